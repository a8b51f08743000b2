"""The curation actions in the audit trail: imports, retiring and restoring problems, dismissing
reports, gold, labelers' standing and rounds, each with who did it, whichever way it was done;
filtered by their categories on the API, the page and the CLI; repeats that change nothing are
not recorded."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit.service import describe, who
from app.db import session_scope
from app.models import AuditEvent, FinishReason, ImportBatch, User
from app.quality.gold import set_gold
from app.reports.service import restore_problem
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import update_round_settings
from app.rounds.triggers import start_due_rounds
from tests.cli.conftest import stepwise  # noqa: F401  (a fixture: runs the CLI)
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, jsonl
from tests.reports.builders import add_problem, label_next


def _trail(factory, prefix: str) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """Who, what and the sentence of each event whose action starts with `prefix`, in order."""
    with session_scope(factory) as session:
        return [(who(e), e.target, describe(e)) for e in session.scalars(
            select(AuditEvent).where(AuditEvent.action.startswith(prefix)).order_by(AuditEvent.id))]


def _named(session: Session, username: str) -> User:
    return session.scalars(select(User).where(User.username == username)).one()


def test_an_import_is_recorded_once_whether_uploaded_by_api_or_page_or_run_at_the_command_line(  # type: ignore[no-untyped-def]
        app, stepwise, database_url, session_factory, tmp_path) -> None:
    make_user(session_factory, "max", "manager")
    project = make_project(session_factory, "Algebra")
    api, page = TestClient(app), TestClient(app)
    max_ = api_headers(api, "max")
    csrf = browser_login(page, "max")

    def upload(data: bytes, filename: str, fmt: str = "math") -> int:
        return api.post(f"/api/v1/projects/{project.id}/imports", headers=max_, data={"format": fmt},
                        files={"file": (filename, data, "application/x-ndjson")}).status_code

    assert upload(SAMPLE.read_bytes(), "sample.jsonl", "prm800k") == 201
    assert upload(SAMPLE.read_bytes(), "again.jsonl", "prm800k") == 200, "already imported: nothing added"
    assert upload(b'{"problem": "What is $2+2$?"}\n{"oops"\n', "bad.jsonl") == 422, "refused: nothing added"
    problems = [{"problem": "What is $2+2$?", "answer": "4"}, {"problem": "What is $3+3$?", "answer": "6"}]
    shown = page.post(f"/manage/projects/{project.id}/import", data={"csrf_token": csrf, "format": "math"},
                      files={"file": ("page.jsonl", jsonl(problems[:1]), "application/x-ndjson")})
    assert shown.status_code == 200
    (tmp_path / "cli.jsonl").write_bytes(jsonl(problems))
    assert stepwise(database_url, "import", "--project", "Algebra", "--format", "math", tmp_path / "cli.jsonl").exit_code == 0

    with session_scope(session_factory) as session:
        events = list(session.scalars(select(AuditEvent).where(AuditEvent.action == "import.added")
                                      .order_by(AuditEvent.id)))
        batches = {batch.filename: batch.id for batch in session.scalars(select(ImportBatch))}
        assert [(e.actor, e.target) for e in events] == [
            ("max", f"imported file sample.jsonl (import {batches['sample.jsonl']})"),
            ("max", f"imported file page.jsonl (import {batches['page.jsonl']})"),
            (None, f"imported file cli.jsonl (import {batches['cli.jsonl']})"),
        ]
        assert [describe(e) for e in events] == [
            "imported into project Algebra as prm800k: 8 problems, 8 solutions and 9 labels added",
            "imported into project Algebra as math: 1 problem, 0 solutions and 0 labels added",
            "imported into project Algebra as math: 1 problem, 0 solutions and 0 labels added; 1 duplicate already "
            "there",
        ]
    listed = api.get("/api/v1/audit-events", headers=api_headers(api, make_user(session_factory, "boss", "admin").username),
                     params={"category": "imports"}).json()
    assert [e["target"] for e in listed["events"]] == [e[1] for e in reversed(_trail(session_factory, "import."))]
    printed = stepwise(database_url, "audit", "--category", "imports").stdout.splitlines()
    assert [line.split("\t")[2] for line in printed] == [e["target"] for e in listed["events"]]


def test_retiring_restoring_and_dismissing_are_recorded_once_each(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra", overlap=1)
    bad, _ = add_problem(session_factory, project, "What is $1/0$?", n_solutions=2)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="Undefined.")
    label_next(session_factory, project.id, ann.id, FinishReason.solution, ratings=[(1, False), (1, True), (1, False)])
    api = TestClient(app)
    max_ = api_headers(api, "max")
    url = f"/api/v1/projects/{project.id}"
    reports = {r["kind"]: r["id"] for r in api.get(f"{url}/reports", headers=max_).json()["reports"]}

    assert api.post(f"{url}/reports/{reports['flagged_step']}/dismiss", headers=max_).status_code == 200
    assert api.post(f"{url}/reports/{reports['flagged_step']}/dismiss", headers=max_).status_code == 200
    assert api.post(f"{url}/problems/{bad}/retire", headers=max_).status_code == 200
    assert api.post(f"{url}/problems/{bad}/retire", headers=max_).status_code == 200
    with session_scope(session_factory) as session:
        restore_problem(session, project.id, bad, _named(session, "max"))
        restore_problem(session, project.id, bad, _named(session, "max"))

    flagged = next(r for r in api.get(f"{url}/reports", headers=max_).json()["reports"] if r["kind"] == "flagged_step")
    assert _trail(session_factory, "report.") == [
        ("max", f"report {reports['flagged_step']}",
         f"dismissed in project Algebra: ann's flag on step 2 of solution {flagged['solution_id']}"),
    ]
    assert _trail(session_factory, "problem.") == [
        ("max", f"problem {bad}", "retired in project Algebra: 1 waiting queue slot removed, 1 bad-problem report dismissed"),
        ("max", f"problem {bad}", "restored to labeling in project Algebra: 1 queue slot added"),
    ]


def test_gold_and_labelers_standing_are_recorded_under_quality(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra", overlap=1)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    boss = make_user(session_factory, "boss", "admin")
    make_user(session_factory, "max", "manager")
    _, label = label_next(session_factory, project.id, ann.id, FinishReason.solution)
    with session_scope(session_factory) as session:
        max_ = _named(session, "max")
        set_gold(session, project.id, label, gold=True, by=max_)
        set_gold(session, project.id, label, gold=True, by=max_)
        set_gold(session, project.id, label, gold=True, screening=True, by=max_)
        set_gold(session, project.id, label, gold=False, by=max_)
        set_gold(session, project.id, label, gold=False, by=max_)
    api = TestClient(app)
    admin = api_headers(api, "boss")
    standing = f"/api/v1/projects/{project.id}/screening/{ann.id}"
    assert api.post(standing, headers=admin, json={"decision": "admit"}).status_code == 200
    assert api.post(standing, headers=admin, json={"decision": "retire"}).status_code == 200

    assert _trail(session_factory, "label") == [
        ("max", f"label {label} by ann", "made gold in project Algebra"),
        ("max", f"label {label} by ann", "made gold in project Algebra, as a screening item"),
        ("max", f"label {label} by ann", "no longer gold in project Algebra"),
        ("boss", "user ann", "admitted in project Algebra: labels there regardless of screening and QC"),
        ("boss", "user ann", "retired in project Algebra: given no more tasks there"),
    ]
    quality = api.get("/api/v1/audit-events", headers=admin, params={"category": "quality"}).json()
    assert quality["total"] == 5
    page = TestClient(app)
    browser_login(page, boss.username)
    shown = page.get("/admin/activity", params={"category": "quality"})
    assert shown.status_code == 200 and '<option value="quality" selected>Quality</option>' in shown.text
    assert len(re.findall(r'<tr id="event-\d+">', shown.text)) == 5


def test_a_retired_labeler_s_leases_handed_back_are_counted(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra", overlap=1)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    api = TestClient(app)
    assert api.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(api, "ann")).json()["task"]
    retired = api.post(f"/api/v1/projects/{project.id}/screening/{ann.id}", headers=api_headers(api, "max"),
                       json={"decision": "retire"})
    assert retired.status_code == 200
    assert _trail(session_factory, "labeler.") == [
        ("max", "user ann", "retired in project Algebra: given no more tasks there; 1 lease handed back")]


def test_round_settings_starts_and_cancels_are_recorded_under_rounds(app, stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra")
    make_user(session_factory, "rae", "researcher")
    with session_scope(session_factory) as session:
        rae = _named(session, "rae")
        update_round_settings(session, project.id, RoundSettingsUpdate(picks_per_round=50, train_epochs=2.0), by=rae)
        update_round_settings(session, project.id, RoundSettingsUpdate(picks_per_round=50), by=rae)
    api = TestClient(app)
    started = api.post(f"/api/v1/projects/{project.id}/rounds", headers=api_headers(api, "rae"))
    assert started.status_code == 202
    assert stepwise(database_url, "rounds", "cancel", "--project", "Algebra").exit_code == 0
    assert stepwise(database_url, "rounds", "start", "--project", "Algebra").exit_code == 0

    target = f"project Algebra (id {project.id})"
    trail = _trail(session_factory, "round.")
    assert [(name.split(" (")[0], what, said) for name, what, said in trail] == [
        ("rae", target, "round settings changed: picks_per_round 100 → 50; train_epochs 3.0 → 2.0"),
        ("rae", target, "round 1 queued"),
        ("command line", target, "round 1 cancelled while queued"),
        ("command line", target, "round 2 queued"),
    ]
    printed = stepwise(database_url, "audit", "--category", "rounds", "--actor", "rae").stdout.splitlines()
    assert [line.split("\t")[3] for line in printed] == ["round 1 queued", trail[0][2]]


def test_a_round_its_trigger_starts_says_so(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra")
    with session_scope(session_factory) as session:
        update_round_settings(session, project.id, RoundSettingsUpdate(schedule_hours=24))
    with session_scope(session_factory) as session:
        assert len(start_due_rounds(session)) == 1
    assert [said for _, _, said in _trail(session_factory, "round.")] == [
        "round settings changed: schedule_hours none → 24.0", "round 1 queued, as its schedule trigger said"]


def test_the_activity_page_offers_every_category(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    page = TestClient(app)
    browser_login(page, "boss")
    options = re.findall(r'<option value="(\w+)"', page.get("/admin/activity").text)
    assert {"imports", "reports", "quality", "rounds"} <= set(options)
    for category in ("reports", "rounds"):
        shown = page.get("/admin/activity", params={"category": category})
        assert shown.status_code == 200 and "No events match these filters" in html.unescape(shown.text)


def test_the_pages_and_the_api_name_who_restored_made_gold_changed_round_settings_or_cancelled(  # type: ignore[no-untyped-def]
        app, session_factory) -> None:
    project = make_project(session_factory, "Algebra", overlap=1)
    problem, _ = add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    _, label = label_next(session_factory, project.id, ann.id, FinishReason.solution)
    api, manager, researcher = TestClient(app), TestClient(app), TestClient(app)
    max_, rae = api_headers(api, "max"), api_headers(api, "rae")
    max_csrf, rae_csrf = browser_login(manager, "max"), browser_login(researcher, "rae")
    url = f"/api/v1/projects/{project.id}"

    for restore in (lambda: api.post(f"{url}/problems/{problem}/restore", headers=max_).status_code,
                    lambda: manager.post(f"/manage/projects/{project.id}/problems/{problem}/restore",
                                         data={"csrf_token": max_csrf}, follow_redirects=False).status_code):
        assert api.post(f"{url}/problems/{problem}/retire", headers=max_).status_code == 200
        assert restore() in (200, 303)
    assert api.put(f"{url}/labels/{label}/gold", headers=max_, json={"screening": True}).status_code == 200
    assert api.delete(f"{url}/labels/{label}/gold", headers=max_).status_code == 200
    assert manager.post(f"/manage/projects/{project.id}/labels/{label}/gold",
                        data={"csrf_token": max_csrf, "gold": "true"}, follow_redirects=False).status_code == 303
    assert api.patch(f"{url}/round-settings", headers=rae, json={"picks_per_round": 30}).status_code == 200
    assert researcher.post(f"/research/projects/{project.id}/settings", follow_redirects=False,
                           data={"csrf_token": rae_csrf, "picks_per_round": "40"}).status_code == 303
    for cancel in (lambda round_id: api.post(f"/api/v1/rounds/{round_id}/cancel", headers=rae).status_code,
                   lambda round_id: researcher.post(f"/research/rounds/{round_id}/cancel", data={"csrf_token": rae_csrf},
                                                    follow_redirects=False).status_code):
        started = api.post(f"{url}/rounds", headers=rae)
        assert started.status_code == 202
        assert cancel(started.json()["id"]) in (200, 303)

    assert [(name, said.split(":")[0]) for name, _, said in _trail(session_factory, "problem.restored")] == [
        ("max", "restored to labeling in project Algebra")] * 2
    assert [name for name, _, _ in _trail(session_factory, "label")] == ["max"] * 3
    assert [name for name, _, _ in _trail(session_factory, "round.settings_changed")] == ["rae"] * 2
    assert [(name, said) for name, _, said in _trail(session_factory, "round.cancelled")] == [
        ("rae", "round 1 cancelled while queued"), ("rae", "round 2 cancelled while queued")]
