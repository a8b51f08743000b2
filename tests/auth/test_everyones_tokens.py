"""Admins see every user's live API tokens and revoke any: who can reach the API now."""

from __future__ import annotations

import html

from sqlalchemy import select

from app.db import session_scope
from app.models import AuditEvent
from tests.cli.conftest import refused, stepwise  # noqa: F401 (a fixture)
from tests.conftest import PASSWORD, api_headers, browser_login, make_user


def test_an_admin_lists_and_revokes_any_users_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "rhea", "researcher")
    boss = api_headers(client, "boss")
    ann = api_headers(client, "ann")
    rhea = api_headers(client, "rhea")
    client.delete("/api/v1/auth/tokens/current", headers=rhea)

    listed = client.get("/api/v1/api-tokens", headers=boss)
    assert listed.status_code == 200
    body = listed.json()
    assert [(t["username"], t["current"]) for t in body] == [("ann", False), ("boss", True)], "revoked ones are gone"
    assert "token" not in body[0] and body[0]["last_used_at"] is None
    for someone in (ann, rhea):
        assert client.get("/api/v1/api-tokens", headers=someone).status_code in (401, 403)
    assert client.delete(f"/api/v1/api-tokens/{body[0]['id']}", headers=ann).status_code == 403

    assert client.delete(f"/api/v1/api-tokens/{body[0]['id']}", headers=boss).status_code == 204
    assert client.get("/api/v1/me/stats", headers=ann).status_code == 401
    again = client.delete(f"/api/v1/api-tokens/{body[0]['id']}", headers=boss)
    assert again.status_code == 404 and "no token" in again.json()["detail"]
    assert client.delete("/api/v1/api-tokens/99999", headers=boss).status_code == 404
    with session_scope(session_factory) as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "token.revoked",
                                                         AuditEvent.actor == "boss")).one()
        assert event.target == "user ann"


def test_the_tokens_page_lists_holders_and_revokes_with_a_form(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "boss")
    assert "No API tokens" in client.get("/admin/users/tokens").text
    ann = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": "correct horse battery",
                                                   "name": "<b>nightly</b>"}).json()
    page = client.get("/admin/users/tokens")
    assert page.status_code == 200 and 'id="token-' in page.text
    assert "&lt;b&gt;nightly&lt;/b&gt;" in page.text and "<b>nightly</b>" not in page.text
    assert 'href="/admin/users/tokens"' in client.get("/admin/users").text
    done = client.post(f"/admin/users/tokens/{ann['id']}/revoke", data={"csrf_token": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/admin/users/tokens?revoked={ann['id']}"
    assert f"Token {ann['id']} revoked" in client.get(done.headers["location"]).text
    twice = client.post(f"/admin/users/tokens/{ann['id']}/revoke", data={"csrf_token": csrf})
    assert twice.status_code == 404 and f"No token {ann['id']} is left to revoke" in html.unescape(twice.text)
    assert client.post("/admin/users/tokens/1/revoke", data={}).status_code == 403, "no CSRF token, no change"

    labeler = client.__class__(client.app)
    browser_login(labeler, "ann")
    assert labeler.get("/admin/users/tokens").status_code == 403


def test_the_command_line_lists_everyones_tokens_and_revokes_any(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bo", "manager")
    for name in ("ann", "bo"):
        assert stepwise(database_url, "tokens", "create", "--username", name, "--name", f"{name}-job").exit_code == 0
    lines = [line.split("\t") for line in stepwise(database_url, "tokens", "list").stdout.splitlines()]
    assert [(line[0], line[2]) for line in lines] == [("bo", "bo-job"), ("ann", "ann-job")]
    done = stepwise(database_url, "tokens", "revoke", lines[0][1])
    assert done.exit_code == 0 and f"revoked token {lines[0][1]} (bo-job) of bo" in done.stdout
    refused(stepwise(database_url, "tokens", "revoke", lines[0][1]), "no token")
    assert [line.split("\t")[0] for line in stepwise(database_url, "tokens", "list").stdout.splitlines()] == ["ann"]


def test_a_name_someone_chose_reaches_an_admins_terminal_escaped(client, session_factory, database_url, stepwise) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    # Raw, a token's name cleared the admin's screen and wrote what it liked in its place.
    make_user(session_factory, "ann", "labeler")
    forged = "\x1b[2J\x1b[31mFAKE: all tokens revoked\x1b[0m\r"
    made = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD, "name": forged})
    assert made.status_code == 201, made.text
    for args in (["tokens", "list"], ["audit", "--category", "tokens"]):
        shown = stepwise(database_url, *args)
        assert shown.exit_code == 0, shown.output
        assert "\x1b" not in shown.output and "\r" not in shown.output
    assert "\\x1b[2J\\x1b[31mFAKE: all tokens revoked\\x1b[0m\\x0d" in stepwise(database_url, "tokens", "list").output
