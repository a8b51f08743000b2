"""The audit trail: each change to accounts, roles, projects, settings and members, each import
and removed import and each export, is recorded with who made it, whichever way it was made,
each browser login with its address, and each wrong password with the name it was tried for and
its address; admins read it on Users → Activity, by API and from the CLI; a refused change
records nothing."""

from __future__ import annotations

import html
import os
import pwd
import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.audit.service import describe
from app.db import session_scope
from app.models import AuditEvent, Project
from tests.cli.conftest import refused, stepwise  # noqa: F401  (a fixture: runs the CLI)
from tests.conftest import PASSWORD, api_headers, browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes


def _events(factory, *, tokens: bool = False) -> list[tuple[str | None, str, str]]:  # type: ignore[no-untyped-def]
    """Who did what to what, in order; the tokens and browser logins the test logs in with left
    out unless asked."""
    with session_scope(factory) as session:
        return [(e.actor, e.action, e.target) for e in session.scalars(select(AuditEvent).order_by(AuditEvent.id))
                if tokens or not e.action.startswith(("token.", "login."))]


def test_changes_are_recorded_with_who_made_them_and_read_back_by_admins(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "max", "manager")
    page, api = TestClient(app), TestClient(app)
    csrf = browser_login(page, "boss")
    boss, max_ = api_headers(api, "boss"), api_headers(api, "max")
    assert _events(session_factory) == [(None, "user.created", "user boss"), (None, "user.created", "user max")]

    assert page.post("/admin/users", data={"csrf_token": csrf, "username": "ann", "role": "labeler",
                                           "password": PASSWORD}).status_code == 200
    ann_id = api.get("/api/v1/users", headers=boss).json()[0]["id"]
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"role": "manager"}).status_code == 200
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"role": "labeler", "password": "brisk amber lanterns"}).status_code == 200
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"is_active": False}).status_code == 200
    # Refused, so not recorded: the last admin stays one.
    boss_id = api.get("/api/v1/users/me", headers=boss).json()["id"]
    assert api.patch(f"/api/v1/users/{boss_id}", headers=boss, json={"role": "labeler"}).status_code == 409
    assert api.post("/api/v1/users/me/password", headers=max_,
                    json={"current_password": PASSWORD, "new_password": "copper kites at noon"}).status_code == 204

    project = api.post("/api/v1/projects", headers=max_, json={"name": "Algebra", "open_to_all": False}).json()
    url = f"/api/v1/projects/{project['id']}"
    assert api.patch(url, headers=max_, json={"overlap": 3, "qc_rate": 0.1, "guidelines": "Rate each step.",
                                              "description": ""}).status_code == 200
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"is_active": True}).status_code == 200
    assert api.post(f"{url}/members", headers=max_, json={"username": "ann"}).status_code == 201
    assert api.delete(f"{url}/members/{ann_id}", headers=max_).status_code == 204
    with session_scope(session_factory) as session:
        algebra = session.get(Project, project["id"])
    batch = import_bytes(session_factory, algebra, SAMPLE.read_bytes(), filename="<i>sample.jsonl").batch_id
    assert api.delete(f"{url}/imports/{batch}", headers=max_).status_code == 200
    assert api.delete(url, headers=max_).status_code == 204

    target = f"project Algebra (id {project['id']})"
    assert _events(session_factory)[2:] == [
        ("boss", "user.created", "user ann"),
        ("boss", "user.role_changed", "user ann"),
        ("boss", "user.role_changed", "user ann"),
        ("boss", "user.password_set", "user ann"),
        ("boss", "user.deactivated", "user ann"),
        ("max", "user.password_changed", "user max"),
        ("max", "project.created", target),
        ("max", "project.settings_changed", target),
        ("boss", "user.reactivated", "user ann"),
        ("max", "member.added", "user ann"),
        ("max", "member.removed", "user ann"),
        (None, "import.added", f"imported file <i>sample.jsonl (import {batch})"),
        ("max", "import.removed", f"imported file <i>sample.jsonl (import {batch})"),
        ("max", "project.deleted", target),
    ]

    listed = api.get("/api/v1/audit-events", headers=boss, params={"category": "projects"}).json()
    assert listed["total"] == 3
    settings = next(e for e in listed["events"] if e["action"] == "project.settings_changed")
    # A setting that kept its value (the empty description) is not among the changes.
    assert settings["details"] == {"overlap": [1, 3], "qc_rate": [0.0, 0.1], "guidelines": "changed"}
    assert settings["summary"] == "settings changed: guidelines changed; overlap 1 → 3; qc_rate 0.0 → 0.1"
    deleted = listed["events"][0]
    assert deleted["summary"] == "deleted with its 0 problems, 0 solutions and 0 labels"
    by_max = api.get("/api/v1/audit-events", headers=boss, params={"actor": "MAX", "limit": 2}).json()
    assert by_max["total"] == 8 and len(by_max["events"]) == 2  # with the token max logged in with
    tokens = api.get("/api/v1/audit-events", headers=boss, params={"category": "tokens"}).json()["events"]
    assert [(e["actor"], e["summary"].split(" “")[0]) for e in tokens][-2:] == [
        ("max", f"given API token {tokens[-2]['details']['token']}"), ("boss", f"given API token {tokens[-1]['details']['token']}")]
    assert api.get("/api/v1/audit-events", headers=boss, params={"actor": "command line"}).json()["total"] == 3
    assert api.get("/api/v1/audit-events", headers=max_).status_code == 403
    assert api.get("/api/v1/audit-events", headers=boss, params={"category": "weather"}).status_code == 422

    shown = page.get("/admin/activity", params={"category": "imports"})
    assert shown.status_code == 200
    text = html.unescape(shown.text)
    assert "&lt;i&gt;sample.jsonl" in shown.text and "<i>sample" not in shown.text
    assert "removed from project Algebra: 8 problems, 8 solutions and 9 labels deleted" in text
    assert len(re.findall(r'<tr id="event-\d+">', shown.text)) == 2
    bad = page.get("/admin/activity", params={"category": "weather", "page": "two"})
    assert bad.status_code == 422 and 'id="category-error"' in bad.text and "Page: must be a whole number" in bad.text
    make_user(session_factory, "lena", "labeler")
    labeler = TestClient(app)
    browser_login(labeler, "lena")
    assert labeler.get("/admin/activity", follow_redirects=False).status_code == 403


def test_the_command_line_records_as_the_command_line_and_prints_the_trail(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "Algebra", open_to_all=False)
    make_user(session_factory, "ann", "labeler")
    assert stepwise(database_url, "members", "add", "--project", "Algebra", "--username", "ann").exit_code == 0
    printed = stepwise(database_url, "audit", "--category", "members").stdout.splitlines()
    assert len(printed) == 1
    when, who, target, what = printed[0].split("\t")
    assert (who, target, what) == (f"command line ({pwd.getpwuid(os.geteuid()).pw_name})", "user ann",
                                   "added to project Algebra")
    assert when.endswith("UTC")

    assert len(stepwise(database_url, "audit").stdout.splitlines()) == 3
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 3

    # A setting changed at the command line says what changed, not the account (said as who).
    assert stepwise(database_url, "projects", "guidelines", "Algebra", "-", input="Rate each step.\n").exit_code == 0
    settings = stepwise(database_url, "audit", "--category", "projects").stdout.splitlines()[0].split("\t")
    assert settings[3] == "settings changed: guidelines changed", settings


def _logins(factory) -> list[tuple[str | None, str, str, dict]]:  # type: ignore[no-untyped-def, type-arg]
    with session_scope(factory) as session:
        return [(e.actor, e.action, e.target, e.details) for e in session.scalars(
            select(AuditEvent).where(AuditEvent.action.startswith("login.")).order_by(AuditEvent.id))]


def test_logins_and_wrong_passwords_are_recorded_with_their_address(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "ann", "labeler")
    ann = TestClient(app)
    form = ann.get("/login").text.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
    wrong = ann.post("/login", data={"username": "Ann", "password": "guess", "login_csrf": form})
    assert wrong.status_code == 401
    assert api_failure(app, "nobody") == 401
    assert api_failure(app, "  ") == 401
    browser_login(ann, "ann")
    # A logged-in user's wrong password, checked before a change, is one too.
    assert ann.post("/api/v1/users/me/password", headers={"X-CSRF-Token": _csrf(ann)},
                    json={"current_password": "not it", "new_password": "drowsy lime pelicans"}).status_code == 403
    # Whoever typed a wrong password is not known: the name it was tried for is its target.
    assert _logins(session_factory) == [
        (None, "login.failed", "user Ann", {"purpose": "browser login", "address": "testclient"}),
        (None, "login.failed", "user nobody", {"purpose": "API token", "address": "testclient"}),
        (None, "login.failed", "user (blank)", {"purpose": "API token", "address": "testclient"}),
        ("ann", "login.succeeded", "user ann", {"address": "testclient"}),
        (None, "login.failed", "user ann", {"purpose": "password change", "address": "testclient"}),
    ]
    boss = TestClient(app)
    browser_login(boss, "boss")
    page = boss.get("/admin/activity", params={"category": "logins", "actor": "ann"}).text
    assert "user ann logged in from testclient" in html.unescape(re.sub(r"<[^>]+>", "", page))
    assert len(re.findall(r'<tr id="event-\d+">', page)) == 1, "what was tried against ann is not by ann"
    page = boss.get("/admin/activity", params={"category": "logins"}).text
    rows = [html.unescape(re.sub(r"<[^>]+>", " ", row)).split() for row in re.findall(r'<tr id="event-\d+">(.*?)</tr>', page, re.S)]
    assert [" ".join(cells[2:]) for cells in rows if "wrong" in cells] == [
        "(unknown) user ann wrong password (password change) from testclient",
        "(unknown) user (blank) wrong password (API token) from testclient",
        "(unknown) user nobody wrong password (API token) from testclient",
        "(unknown) user Ann wrong password (browser login) from testclient",
    ], "the name as typed, in any case"
    api = TestClient(app)
    by_nobody = api.get("/api/v1/audit-events", headers=api_headers(api, "boss"),
                        params={"actor": "nobody", "category": "logins"})
    # Tried against, never by: a name no user has, and which no event has as its actor.
    assert by_nobody.status_code == 422 and "no user named 'nobody'" in by_nobody.json()["detail"]
    by_command_line = api.get("/api/v1/audit-events", headers=api_headers(api, "boss"),
                              params={"actor": "command line", "category": "logins"}).json()
    assert by_command_line["total"] == 0, "not the command line's either"


def test_the_command_line_prints_a_wrong_password_as_by_nobody_known(app, stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "bx3", "labeler")
    for _ in range(3):
        assert api_failure(app, "bx3") == 401
    assert api_failure(app, "nosuchuser") == 401
    printed = [line.split("\t")[1:] for line in stepwise(database_url, "audit", "--category", "logins").stdout.splitlines()]
    assert printed[0] == ["(unknown)", "user nosuchuser", "wrong password (API token) from testclient"]
    assert printed[1:] == [["(unknown)", "user bx3", "wrong password (API token) from testclient"]] * 3
    assert stepwise(database_url, "audit", "--actor", "bx3").stdout == ""


def api_failure(app, username: str) -> int:  # type: ignore[no-untyped-def]
    return TestClient(app).post("/api/v1/auth/tokens", json={"username": username, "password": "x" * 10}).status_code


def _csrf(client: TestClient) -> str:
    return client.get("/account").text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


def test_exports_are_recorded_with_their_format_and_filters(app, stepwise, database_url, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rae", "researcher")
    project = make_project(session_factory, "Algebra")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    api = TestClient(app)
    rae = api_headers(api, "rae")
    response = api.get(f"/api/v1/projects/{project.id}/export", headers=rae,
                       params={"format": "trl", "qc": "exclude", "since": "2020-01-01"})
    assert response.status_code == 200
    refused = api.get(f"/api/v1/projects/{project.id}/export", headers=rae, params={"format": "trl", "labeler": "nobody"})
    assert refused.status_code == 422, "refused, so not recorded"
    assert stepwise(database_url, "export", "--project", "Algebra", "--format", "prm800k",
                    "--output", str(tmp_path / "algebra.jsonl")).exit_code == 0
    with session_scope(session_factory) as session:
        events = list(session.scalars(select(AuditEvent).where(AuditEvent.action == "export.downloaded").order_by(AuditEvent.id)))
    target = f"project Algebra (id {project.id})"
    assert [(e.actor, e.target) for e in events] == [("rae", target), (None, target)]
    assert events[0].details == {"format": "trl", "filters": [["since", "2020-01-01"], ["qc", "exclude"]]}
    assert describe(events[0]) == "labels exported as trl (since=2020-01-01, qc=exclude)"
    assert describe(events[1]) == f"labels exported as prm800k: {events[1].details['count']:,} written"
    assert events[1].details["count"] > 0


def test_an_actor_nobody_is_named_is_said_so_not_listed_as_nothing_done(app, stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "quiet", "labeler")
    api, page = TestClient(app), TestClient(app)
    boss = api_headers(api, "boss")
    browser_login(page, "boss")
    # A typo listed nothing, read as "they did nothing", where other commands say "no user named".
    refused(stepwise(database_url, "audit", "--actor", "nobody"), "no user named 'nobody', now or in the audit trail")
    unknown = api.get("/api/v1/audit-events", headers=boss, params={"actor": "nobody"})
    assert unknown.status_code == 422
    assert unknown.json()["errors"] == [{"field": "actor", "message": "no user named 'nobody', now or in the audit trail"}]
    shown = page.get("/admin/activity", params={"actor": "nobody"})
    assert shown.status_code == 422 and 'id="actor-error"' in shown.text
    assert "No user named 'nobody', now or in the audit trail" in html.unescape(shown.text)
    assert "Nothing is listed: correct the filters marked above." in shown.text

    # A user who did nothing (here) is no error; nor is a deleted user, whose events keep the name.
    quiet = stepwise(database_url, "audit", "--actor", "QUIET")
    assert quiet.exit_code == 0 and quiet.stdout == ""
    assert api.get("/api/v1/audit-events", headers=boss, params={"actor": "boss", "category": "rounds"}).json()["total"] == 0
    with session_scope(session_factory) as session:
        session.add(AuditEvent(actor_id=None, actor="gone", action="project.created", target="project X (id 9)",
                               details={}))
    assert api.get("/api/v1/audit-events", headers=boss, params={"actor": "Gone"}).json()["total"] == 1
    assert api.get("/api/v1/audit-events", headers=boss,
                   params={"actor": "gone", "category": "users"}).json() == {"total": 0, "events": []}
