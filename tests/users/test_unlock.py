"""A name locked by failed logins is shown to admins, who lift the lock without a new password."""

from __future__ import annotations

import html
from datetime import datetime

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db import session_scope
from app.models import AuditEvent
from app.users.service import get_user, unlock
from tests.conftest import PASSWORD, api_headers, browser_login, make_user


def _guess(app, username: str, times: int) -> list[int]:  # type: ignore[no-untyped-def]
    guesser = TestClient(app)
    return [guesser.post("/api/v1/auth/tokens", json={"username": username, "password": "guess-guess"}).status_code
            for _ in range(times)]


def _logs_in(app, username: str) -> int:  # type: ignore[no-untyped-def]
    return TestClient(app).post("/api/v1/auth/tokens", json={"username": username, "password": PASSWORD}).status_code


def test_an_admin_sees_the_lock_and_lifts_it_by_api(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    ann = make_user(session_factory, "ann", "labeler").id
    boss = api_headers(client, "boss")
    assert _guess(app, "ANN", 11) == [401] * 10 + [429]
    assert _logs_in(app, "ann") == 429, "locked: the right password is refused too"
    listed = {u["username"]: u for u in client.get("/api/v1/users", headers=boss).json()}
    assert listed["boss"]["locked_until"] is None
    assert datetime.fromisoformat(listed["ann"]["locked_until"]) > datetime.fromisoformat(listed["ann"]["created_at"])
    assert client.get(f"/api/v1/users/{ann}", headers=boss).json()["locked_until"] == listed["ann"]["locked_until"]

    assert client.post(f"/api/v1/users/{ann}/unlock").status_code == 401
    unlocked = client.post(f"/api/v1/users/{ann}/unlock", headers=boss)
    assert (unlocked.status_code, unlocked.json()) == (200, {"cleared": True})
    assert client.get(f"/api/v1/users/{ann}", headers=boss).json()["locked_until"] is None
    assert _logs_in(app, "ann") == 201
    again = client.post(f"/api/v1/users/{ann}/unlock", headers=boss)
    assert (again.status_code, again.json()) == (200, {"cleared": False})
    assert client.post("/api/v1/users/999/unlock", headers=boss).status_code == 404
    assert client.post(f"/api/v1/users/{ann}/unlock", headers=api_headers(client, "ann")).status_code == 403
    with session_scope(session_factory) as session:
        unlocks = session.execute(select(AuditEvent.actor, AuditEvent.target)
                                  .where(AuditEvent.action == "user.unlocked")).all()
    assert unlocks == [("boss", "user ann")], "recorded once: the second had nothing to forget"


def test_the_users_page_shows_the_lock_with_an_unlock_button(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    ann = make_user(session_factory, "ann", "labeler").id
    csrf = browser_login(client, "boss")
    assert "locked until" not in client.get("/admin/users").text
    _guess(app, "ann", 10)
    page = client.get("/admin/users").text
    row = page.split(f'id="user-{ann}"', 1)[1].split("</tr>", 1)[0]
    assert "locked until " in row and f'action="/admin/users/{ann}/unlock"' in row
    done = client.post(f"/admin/users/{ann}/unlock", data={"csrf_token": csrf}, follow_redirects=False)
    assert (done.status_code, done.headers["location"]) == (303, f"/admin/users?unlocked={ann}")
    shown = html.unescape(client.get(done.headers["location"]).text)
    assert "ann may log in again at once" in shown and "locked until" not in shown
    assert _logs_in(app, "ann") == 201


def test_an_admins_name_is_unlocked_by_another_admin_with_their_password(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """The count is what stops a stolen admin session guessing its owner's password where a
    change asks for it: it cannot clear it for its own name, nor another admin's without one."""
    boss = make_user(session_factory, "boss", "admin").id
    ada = make_user(session_factory, "ada", "admin").id
    headers = api_headers(client, "boss")
    _guess(app, "ada", 10)
    _guess(app, "boss", 10)
    asked = client.post(f"/api/v1/users/{ada}/unlock", headers=headers)
    assert (asked.status_code, asked.json()["detail"]) == (
        403, "changing ada, an admin, asks for your own password: send it as your_password")
    own = client.post(f"/api/v1/users/{boss}/unlock", headers=headers)
    assert own.status_code == 409 and "you cannot unlock your own name" in own.json()["detail"]
    assert _logs_in(app, "ada") == 429 and _logs_in(app, "boss") == 429
    # boss's own name is locked, so his password cannot be checked: another admin unlocks him.
    locked = client.post(f"/api/v1/users/{ada}/unlock", headers=headers, json={"your_password": PASSWORD})
    assert locked.status_code == 429
    assert TestClient(app).post("/api/v1/auth/tokens", json={"username": "ada", "password": PASSWORD}).status_code == 429
    with session_scope(session_factory) as session:
        assert unlock(session, get_user(session, boss), by=None)
    done = client.post(f"/api/v1/users/{ada}/unlock", headers=headers, json={"your_password": PASSWORD})
    assert (done.status_code, done.json()) == (200, {"cleared": True})
    assert _logs_in(app, "ada") == 201
