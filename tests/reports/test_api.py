"""The reports API: list with filters, dismiss, retire, one label; roles and bad input."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db import session_scope
from app.audit.service import describe
from app.models import Assignment, AuditEvent, FinishReason, Problem, User
from tests.conftest import api_headers, make_project, make_user
from tests.reports.builders import add_problem, label_next


def _setup(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    bad, _ = add_problem(session_factory, project, "Broken", n_solutions=3, priority=5.0)
    add_problem(session_factory, project, "Fine", n_solutions=1, priority=1.0)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="=1+1 is not the question")
    label_next(session_factory, project.id, bob.id, FinishReason.solution, ratings=[(1, True), (1, False), (1, False)])
    return project, bad


def test_list_filters_and_pages(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, bad = _setup(session_factory)
    headers = api_headers(client, "rae")
    url = f"/api/v1/projects/{project.id}/reports"

    everything = client.get(url, headers=headers).json()
    assert everything["total"] == 2
    assert [(r["kind"], r["labeler"], r["step"]) for r in everything["reports"]] == [
        ("flagged_step", "bob", 1),
        ("bad_problem", "ann", None),
    ]
    assert everything["reports"][1]["reason"] == "=1+1 is not the question"
    assert everything["reports"][1]["problem_id"] == bad
    assert [r["labeler"] for r in client.get(url, headers=headers, params={"labeler": "ann"}).json()["reports"]] == ["ann"]
    assert client.get(url, headers=headers, params={"kind": "give_up"}).json() == {"total": 0, "reports": []}
    page = client.get(url, headers=headers, params={"limit": 1, "offset": 1}).json()
    assert page["total"] == 2 and [r["kind"] for r in page["reports"]] == ["bad_problem"]

    assert client.get(url, headers=headers, params={"kind": "rude"}).status_code == 422
    assert client.get(url, headers=headers, params={"limit": 0}).status_code == 422
    assert client.get("/api/v1/projects/999/reports", headers=headers).status_code == 404


def test_dismiss_and_retire_need_a_manager(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, bad = _setup(session_factory)
    manager, researcher, labeler = (api_headers(client, u) for u in ("max", "rae", "ann"))
    report_id = client.get(f"/api/v1/projects/{project.id}/reports", headers=manager).json()["reports"][1]["id"]
    dismiss = f"/api/v1/projects/{project.id}/reports/{report_id}/dismiss"
    retire = f"/api/v1/projects/{project.id}/problems/{bad}/retire"

    for headers in (researcher, labeler):
        assert client.post(dismiss, headers=headers).status_code == 403
        assert client.post(retire, headers=headers).status_code == 403
    assert client.get(f"/api/v1/projects/{project.id}/reports", headers=labeler).status_code == 403

    dismissed = client.post(dismiss, headers=manager)
    assert dismissed.status_code == 200
    assert dismissed.json()["status"] == "dismissed" and dismissed.json()["dismissed_by"] == "max"
    assert client.post(dismiss, headers=manager).json() == dismissed.json()
    assert client.post(f"/api/v1/projects/{project.id}/reports/99999/dismiss", headers=manager).status_code == 404

    retired = client.post(retire, headers=manager)
    assert retired.status_code == 200 and retired.json()["slots_removed"] == 1
    again = client.post(retire, headers=manager).json()
    assert again["slots_removed"] == 0 and again["retired_at"] == retired.json()["retired_at"]
    listed = client.get(f"/api/v1/projects/{project.id}/reports", headers=manager).json()["reports"]
    assert [r["problem_retired"] for r in listed] == [True, True]


def test_a_retired_problem_returns_to_labeling_with_the_slots_it_lost(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, bad = _setup(session_factory)
    manager, researcher, labeler = (api_headers(client, u) for u in ("max", "rae", "ann"))
    restore = f"/api/v1/projects/{project.id}/problems/{bad}/restore"

    def waiting() -> int:
        with session_scope(session_factory) as session:
            return session.scalar(select(func.count()).select_from(Assignment).where(
                Assignment.project_id == project.id, Assignment.status == "waiting")) or 0

    assert client.post(restore, headers=manager).json() == {"problem_id": bad, "slots_added": 0}
    assert client.post(f"/api/v1/projects/{project.id}/problems/{bad}/retire", headers=manager).json()["slots_removed"] == 1
    assert waiting() == 1
    for headers in (researcher, labeler):
        assert client.post(restore, headers=headers).status_code == 403
    assert waiting() == 1

    # Two of the problem's three solutions were labeled (overlap 1): the third waits again.
    assert client.post(restore, headers=manager).json() == {"problem_id": bad, "slots_added": 1}
    assert client.post(restore, headers=manager).json() == {"problem_id": bad, "slots_added": 0}
    assert waiting() == 2
    listed = client.get(f"/api/v1/projects/{project.id}/reports", headers=manager).json()["reports"]
    assert [r["problem_retired"] for r in listed] == [False, False]
    assert client.post(f"/api/v1/projects/{project.id}/problems/99999/restore", headers=manager).status_code == 404
    # The queue serves it again.
    make_user(session_factory, "cat", "labeler")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(client, "cat")).json()
    assert task["task"]["problem"]["id"] == bad


def test_retiring_an_unknown_problem_changes_nothing(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _setup(session_factory)
    other = make_project(session_factory, "other")
    headers = api_headers(client, "max")
    fine = add_problem(session_factory, other, "Elsewhere", n_solutions=1)[0]
    assert client.post(f"/api/v1/projects/{project.id}/problems/{fine}/retire", headers=headers).status_code == 404
    assert client.post(f"/api/v1/projects/{project.id}/problems/{2**40}/retire", headers=headers).status_code == 422
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Problem).where(Problem.retired_at.is_not(None))) == 0
        assert session.scalar(select(func.count()).select_from(Assignment).where(Assignment.project_id == project.id, Assignment.status == "waiting")) == 2


def test_one_label_as_submitted(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _setup(session_factory)
    headers = api_headers(client, "max")
    report = client.get(f"/api/v1/projects/{project.id}/reports", headers=headers).json()["reports"][0]
    view = client.get(f"/api/v1/projects/{project.id}/labels/{report['label_id']}", headers=headers)
    assert view.status_code == 200
    body = view.json()
    assert body["labeler"] == "bob" and body["statement"] == "Broken"
    assert [(s["rating"], s["flagged"]) for s in body["steps"]] == [(1, True), (1, False), (1, False)]
    other = make_project(session_factory, "other")
    assert client.get(f"/api/v1/projects/{other.id}/labels/{report['label_id']}", headers=headers).status_code == 404


def test_open_reports_are_dismissed_at_once_by_kind_labeler_and_as_listed(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _setup(session_factory)
    manager = api_headers(client, "max")
    url = f"/api/v1/projects/{project.id}/reports"
    dismiss = f"{url}/dismiss"
    for name in ("rae", "ann"):
        assert client.post(dismiss, headers=api_headers(client, name), json={}).status_code == 403
    for body in ({"kind": "rude"}, {"through": "5"}, {"through": 0}, {"labeler": ""}, {"status": "open"}):
        assert client.post(dismiss, headers=manager, json=body).status_code == 422, body
    assert client.post("/api/v1/projects/999/reports/dismiss", headers=manager, json={}).status_code == 404

    assert client.post(dismiss, headers=manager, json={"kind": "flagged_step"}).json() == {"dismissed": 1}
    assert client.post(dismiss, headers=manager, json={"kind": "flagged_step"}).json() == {"dismissed": 0}
    listed = client.get(url, headers=manager, params={"status": "open"}).json()["reports"]
    assert [(r["kind"], r["labeler"]) for r in listed] == [("bad_problem", "ann")]
    # A report sent after the caller listed stays open for them to read.
    newest = listed[0]["id"]
    with session_scope(session_factory) as session:
        ann_id = session.scalar(select(User.id).where(User.username == "ann"))
    label_next(session_factory, project.id, ann_id, FinishReason.give_up, ratings=[], note="lost")
    assert client.post(dismiss, headers=manager, json={"labeler": "ann", "through": newest}).json() == {"dismissed": 1}
    still_open = client.get(url, headers=manager, params={"status": "open"}).json()["reports"]
    assert [(r["kind"], r["labeler"]) for r in still_open] == [("give_up", "ann")]
    dismissed = client.get(url, headers=manager, params={"status": "dismissed"}).json()["reports"]
    assert {r["dismissed_by"] for r in dismissed} == {"max"} and len(dismissed) == 2
    with session_scope(session_factory) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "report.dismissed")
                                 .order_by(AuditEvent.id)).all()
        said = [describe(event) for event in events]
    assert [(e.target, e.details["count"], e.details["filters"]) for e in events] == [
        ("1 report", 1, {"kind": "flagged_step"}), ("1 report", 1, {"labeler": "ann"})]
    assert said[1] == f"dismissed at once in project {project.name}, every open one with labeler ann up to report {newest}"


def test_the_labeler_filter_takes_a_labeler_uuid_and_refuses_one_who_labeled_nothing(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _setup(session_factory)
    with session_scope(session_factory) as session:
        uuid = session.scalar(select(User.labeler_uuid).where(User.username == "ann"))
    headers = api_headers(client, "max")
    url = f"/api/v1/projects/{project.id}/reports"
    for name in (uuid, uuid.upper(), "ANN"):
        assert [r["labeler"] for r in client.get(url, headers=headers, params={"labeler": name}).json()["reports"]] == ["ann"]
    refused = client.get(url, headers=headers, params={"labeler": "nobody"})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("no label in this project is by 'nobody'")
    assert refused.json()["errors"] == [{"field": "labeler", "message": "no labels by 'nobody' here"}]
    dismissed = client.post(f"{url}/dismiss", headers=headers, json={"labeler": "nobody"})
    assert dismissed.status_code == 422 and dismissed.json()["errors"][0]["field"] == "labeler"
    assert client.post(f"{url}/dismiss", headers=headers, json={"labeler": uuid}).json() == {"dismissed": 1}
