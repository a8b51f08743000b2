"""Deleting a project: everything in it goes, in the database's own cascade, and nothing else;
refused while a round or comparison of it runs; the page asks for the name typed."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.audit.service import describe
from app.db import session_scope
from app.models import (
    AuditEvent,
    Base,
    ComparisonStatus,
    ModelComparison,
    ModelVersion,
    PickReason,
    Project,
    ProjectMember,
    Report,
    Round,
    RoundStatus,
    RoundPick,
    RoundTrigger,
    Solution,
    utcnow,
)
from tests.cli.conftest import refused, stepwise  # noqa: F401  (stepwise: a fixture)
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes


def _rows(factory) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Rows of every table of the schema, by table."""
    with session_scope(factory) as session:
        return {name: session.scalar(select(func.count()).select_from(table)) or 0
                for name, table in Base.metadata.tables.items()}


@pytest.fixture
def two_projects(session_factory):  # type: ignore[no-untyped-def]
    """A project with labels, reports, a round and a model version, and a second one alike."""
    projects = []
    for name in ("doomed", "kept"):
        project = make_project(session_factory, name)
        import_bytes(session_factory, project, SAMPLE.read_bytes())
        labeler = make_user(session_factory, f"lab-{name}", "labeler")
        with session_scope(session_factory) as session:
            round_ = Round(project_id=project.id, number=1, status=RoundStatus.done, trigger=RoundTrigger.manual)
            session.add(round_)
            session.flush()
            version = ModelVersion(project_id=project.id, round_id=round_.id, path=f"/models/{name}/v1", base="tiny",
                                   data_hash="0" * 64, train_labels=9)
            session.add(version)
            session.flush()
            session.add(ModelComparison(project_id=project.id, version_a_id=version.id, version_b_id=version.id,
                                        status=ComparisonStatus.done))
            solution = session.scalar(select(Solution.id).where(Solution.project_id == project.id).limit(1))
            session.add(RoundPick(round_id=round_.id, solution_id=solution, rank=0, score=0.5,
                                  reason=PickReason.uniform, answer_grade="wrong", priority=1.0,
                                  model_version_id=version.id))
            session.add(ProjectMember(project_id=project.id, user_id=labeler.id))
        projects.append(project)
    return projects


def test_a_project_goes_with_everything_in_it_and_nothing_else(session_factory, two_projects) -> None:  # type: ignore[no-untyped-def]
    from app.projects.service import delete_project

    doomed, kept = two_projects
    with_both = _rows(session_factory)
    with session_scope(session_factory) as session:
        held = delete_project(session, session.get(Project, doomed.id))
    assert held == {"problems": 8, "solutions": 8, "labels": 9}
    left = _rows(session_factory)
    # Every table that held rows of both projects holds the kept one's alone: half as many.
    for table, before in with_both.items():
        if table in ("users", "instance_secrets", "alembic_version") or before == 0:
            continue
        if table == "audit_events":
            # The trail outlives what it tells of: one more event, the deletion.
            assert left[table] == before + 1
            continue
        assert left[table] * 2 == before, (table, before, left[table])
    with session_scope(session_factory) as session:
        assert session.get(Project, kept.id) is not None
        assert session.scalar(select(func.count()).select_from(Report)) == left["reports"]


def test_a_project_with_a_round_or_comparison_running_is_kept(client, session_factory, two_projects) -> None:  # type: ignore[no-untyped-def]
    doomed, _ = two_projects
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "lena", "labeler")
    url = f"/api/v1/projects/{doomed.id}"
    assert client.delete(url, headers=api_headers(client, "lena")).status_code == 403
    headers = api_headers(client, "max")
    with session_scope(session_factory) as session:
        session.add(Round(project_id=doomed.id, number=2, status=RoundStatus.running, trigger=RoundTrigger.manual,
                          lease_owner="w1", lease_expires_at=utcnow() + timedelta(minutes=1)))
    busy = client.delete(url, headers=headers)
    assert busy.status_code == 409 and "a worker is running round 2 of doomed: cancel it first" in busy.text
    with session_scope(session_factory) as session:
        session.query(Round).filter(Round.number == 2).delete()
        version = session.scalar(select(ModelVersion.id).where(ModelVersion.project_id == doomed.id))
        session.add(ModelComparison(project_id=doomed.id, version_a_id=version, version_b_id=version,
                                    status=ComparisonStatus.running, claimed_by="w2", claimed_at=utcnow()))
    assert client.delete(url, headers=headers).status_code == 409
    # Work no worker holds (queued, or its lease run out) goes with the project: a queued
    # comparison, with no worker running, would have kept it for ever.
    with session_scope(session_factory) as session:
        session.query(ModelComparison).update({"status": ComparisonStatus.queued, "claimed_at": None})
        session.add(Round(project_id=doomed.id, number=3, status=RoundStatus.running, trigger=RoundTrigger.manual,
                          lease_owner="w1", lease_expires_at=utcnow() - timedelta(minutes=1)))
    assert client.delete(url, headers=headers).status_code == 204
    assert client.get(url, headers=headers).status_code == 404


def test_the_page_deletes_only_with_the_name_typed(client, session_factory, two_projects) -> None:  # type: ignore[no-untyped-def]
    doomed, _ = two_projects
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "max")
    page = f"/manage/projects/{doomed.id}"
    assert 'action="' + page + '/delete"' in client.get(page).text
    wrong = client.post(f"{page}/delete", data={"csrf_token": csrf, "confirm_name": "Doomed"})
    assert wrong.status_code == 422
    shown = html.unescape(wrong.text).split('id="confirm_name-error">', 1)[1].split("<", 1)[0]
    assert shown == "Type the project's name, “doomed”, to delete it"
    assert client.get(page).status_code == 200
    # The name as typed, spaces around it aside.
    done = client.post(f"{page}/delete", data={"csrf_token": csrf, "confirm_name": " doomed "}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/manage/projects?deleted=1"
    listed = client.get(done.headers["location"]).text
    assert "The project was deleted, with its problems, solutions and labels." in listed
    assert client.get(page).status_code == 404


def test_the_cli_asks_unless_told_yes(stepwise, database_url, session_factory, two_projects) -> None:  # type: ignore[no-untyped-def]
    kept = stepwise(database_url, "projects", "delete", "doomed", input="n\n")
    assert kept.exit_code == 1 and "Aborted" in kept.output
    assert stepwise(database_url, "projects", "delete", "doomed", "--yes").output.strip() == (
        "deleted doomed: 8 problems, 8 solutions, 9 labels")
    refused(stepwise(database_url, "projects", "delete", "doomed", "--yes"), "no project named 'doomed'")


def test_the_audit_trail_counts_what_a_deleted_project_held_in_words_that_fit_the_count(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "doomed", overlap=1)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    body = {"idempotency_key": "one-label-1", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution",
            "total_time_ms": 10}
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=body).status_code == 200
    assert client.delete(f"/api/v1/projects/{project.id}", headers=api_headers(client, "max")).status_code == 204
    with session_scope(session_factory) as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "project.deleted")).one()
        assert describe(event) == "deleted with its 1 problem, 2 solutions and 1 label"
