"""A read-only API token makes GET requests and scoring only: a script that reads, leaked, changes nothing."""

from __future__ import annotations

import html

from sqlalchemy import select

from app.db import session_scope
from app.models import AuditEvent, Project, User
from app.projects.members import add_member
from tests.auth.route_table import UNSAFE, endpoints
from tests.auth.test_roles import _call
from tests.cli.conftest import refused, stepwise  # noqa: F401 (a fixture)
from tests.conftest import PASSWORD, add_solutions, browser_login, make_project, make_user

READ_ONLY = "this API token is read-only"


def _token(client, username: str, **settings: object) -> dict:  # type: ignore[no-untyped-def, type-arg]
    made = client.post("/api/v1/auth/tokens", json={"username": username, "password": PASSWORD, **settings})
    assert made.status_code == 201, made.text
    return made.json()


def test_a_read_only_token_reads_and_every_change_is_refused(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    boss = make_user(session_factory, "boss", "admin")
    made = _token(client, "boss", name="dashboard", read_only=True)
    assert made["read_only"] is True
    reader = {"Authorization": f"Bearer {made['token']}"}
    assert client.get("/api/v1/projects", headers=reader).status_code == 200
    assert client.get(f"/api/v1/projects/{project.id}/export", headers=reader, params={"format": "trl"}).status_code == 200
    listed = client.get("/api/v1/auth/tokens", headers=reader).json()
    assert [(t["name"], t["read_only"], t["current"]) for t in listed] == [("dashboard", True, True)]

    ids = {"project_id": project.id, "user_id": boss.id}
    refused = 0
    for endpoint in endpoints(app):
        # The submit judges its body before its caller: the hot-path test sends it a whole one.
        # Scoring changes nothing: tests/rounds/test_scoring_api.py scores with a read-only token.
        if not endpoint.is_api or endpoint.method not in UNSAFE or endpoint.path in (
                "/api/v1/auth/tokens", "/api/v1/auth/tokens/current", "/api/v1/assignments/{assignment_id}/submit",
                "/api/v1/model-versions/{version_id}/score"):
            continue
        answer = _call(client, endpoint, ids, headers=reader)
        assert answer.status_code == 403, f"{endpoint} gave {answer.status_code}"
        assert answer.json()["detail"].startswith(READ_ONLY), endpoint
        refused += 1
    assert refused > 25
    with session_scope(session_factory) as session:
        assert session.get(Project, project.id).name == "algebra"
    # It may still end itself.
    assert client.delete("/api/v1/auth/tokens/current", headers=reader).status_code == 204
    assert client.get("/api/v1/projects", headers=reader).status_code == 401


def test_the_labeling_hot_path_refuses_a_read_only_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    with session_scope(session_factory) as session:
        add_member(session, session.get(Project, project.id), "lena")
    reader = {"Authorization": f"Bearer {_token(client, 'lena', read_only=True)['token']}"}
    writer = {"Authorization": f"Bearer {_token(client, 'lena')['token']}"}
    refused = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=reader)
    assert refused.status_code == 403 and refused.json()["detail"].startswith(READ_ONLY)
    add_solutions(session_factory, project, 1, steps=1)
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=writer).json()["task"]
    label = {"idempotency_key": "read-only-1", "ratings": [{"rating": 1}], "finish_reason": "solution",
             "total_time_ms": 10}
    submitted = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=reader, json=label)
    assert submitted.status_code == 403 and submitted.json()["detail"].startswith(READ_ONLY)
    # A body it could not send anyway is refused as the token is, not read.
    for body in ({}, {**label, "ratings": "none"}):
        unread = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=reader, json=body)
        assert unread.status_code == 403 and unread.json()["detail"].startswith(READ_ONLY), unread.text
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=writer, json=label).status_code == 200
    assert client.get("/api/v1/me/stats", headers=reader).status_code == 200


def test_a_user_who_must_choose_a_password_gets_no_read_only_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    with session_scope(session_factory) as session:
        session.scalars(select(User).where(User.username == "ann")).one().must_change_password = True
    refused = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD, "read_only": True})
    assert refused.status_code == 409 and "choose their own password first" in refused.json()["detail"]
    assert client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD}).status_code == 201


def test_the_command_line_makes_no_token_of_either_kind_before_their_own_password(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lb", "labeler")
    with session_scope(session_factory) as session:
        session.scalars(select(User).where(User.username == "lb")).one().must_change_password = True
    # Made for them, a full token would let its holder choose their password (see
    # test_tokens.py); a read-only one is refused for the same reason, said the same way.
    for access in ((), ("--read-only",)):
        result = stepwise(database_url, "tokens", "create", "--username", "lb", *access)
        refused(result, "lb must still choose their own password")
        # The whole sentence, not cut short.
        assert result.stderr.rstrip().endswith("make it once they have logged in and chosen one"), result.stderr


def test_the_account_page_makes_a_read_only_token_and_shows_which_are(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rae", "researcher")
    csrf = browser_login(client, "rae")
    typo = client.post("/account/tokens", data={"csrf_token": csrf, "name": "notebook", "access": "readonly",
                                                "password": PASSWORD})
    assert typo.status_code == 422 and 'id="token_access-error"' in typo.text
    made = client.post("/account/tokens", data={"csrf_token": csrf, "name": "notebook", "access": "read",
                                                "password": PASSWORD})
    assert made.status_code == 201
    page = html.unescape(made.text)
    assert "Read-only token “notebook” made" in page and "read-only</span>" in page
    with session_scope(session_factory) as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "token.created")).one()
        assert event.details["read_only"] is True


def test_the_command_line_makes_a_read_only_token(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    make_user(session_factory, "rae", "researcher")
    made = stepwise(database_url, "tokens", "create", "--username", "rae", "--read-only")
    assert made.exit_code == 0
    assert stepwise(database_url, "tokens", "list", "--username", "rae").stdout.rstrip().endswith("never (read-only)")
