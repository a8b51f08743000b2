"""The audit trail: each change to accounts, roles, projects, settings and members, and each
removed import, is recorded with who made it, whichever way it was made; admins read it on
Users → Activity, by API and from the CLI; a refused change records nothing."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import session_scope
from app.models import AuditEvent, Project
from tests.cli.conftest import stepwise  # noqa: F401  (a fixture: runs the CLI)
from tests.conftest import PASSWORD, api_headers, browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes


def _events(factory, *, tokens: bool = False) -> list[tuple[str | None, str, str]]:  # type: ignore[no-untyped-def]
    """Who did what to what, in order; the tokens the test logs in with left out unless asked."""
    with session_scope(factory) as session:
        return [(e.actor, e.action, e.target) for e in session.scalars(select(AuditEvent).order_by(AuditEvent.id))
                if tokens or not e.action.startswith("token.")]


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
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"role": "labeler", "password": "b" * 10}).status_code == 200
    assert api.patch(f"/api/v1/users/{ann_id}", headers=boss, json={"is_active": False}).status_code == 200
    # Refused, so not recorded: the last admin stays one.
    boss_id = api.get("/api/v1/users/me", headers=boss).json()["id"]
    assert api.patch(f"/api/v1/users/{boss_id}", headers=boss, json={"role": "labeler"}).status_code == 409
    assert api.post("/api/v1/users/me/password", headers=max_,
                    json={"current_password": PASSWORD, "new_password": "c" * 10}).status_code == 204

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
    assert api.get("/api/v1/audit-events", headers=boss, params={"actor": "command line"}).json()["total"] == 2
    assert api.get("/api/v1/audit-events", headers=max_).status_code == 403
    assert api.get("/api/v1/audit-events", headers=boss, params={"category": "weather"}).status_code == 422

    shown = page.get("/admin/activity", params={"category": "imports"})
    assert shown.status_code == 200
    text = html.unescape(shown.text)
    assert "&lt;i&gt;sample.jsonl" in shown.text and "<i>sample" not in shown.text
    assert "removed from project Algebra: 8 problems, 8 solutions and 9 labels deleted" in text
    assert len(re.findall(r'<tr id="event-\d+">', shown.text)) == 1
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
    assert (who, target, what) == ("command line", "user ann", "added to project Algebra") and when.endswith("UTC")
    assert len(stepwise(database_url, "audit").stdout.splitlines()) == 3
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 3
