"""Several accounts at once, for a team of labelers: generated passwords shown once, all or none."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import session_scope
from app.models import AuditEvent, User
from tests.conftest import api_headers, browser_login, make_user


def _users(session_factory) -> list[str]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return list(session.scalars(select(User.username).order_by(User.username)))


def _logs_in(app, username: str, password: str) -> bool:  # type: ignore[no-untyped-def]
    return TestClient(app).post("/api/v1/auth/tokens", json={"username": username, "password": password}).status_code == 201


def test_the_api_creates_several_users_with_passwords_shown_once(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    boss = api_headers(client, "boss")
    made = client.post("/api/v1/users/batch", headers=boss, json={"usernames": ["ann", "bob", "cy"], "role": "labeler"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert [(u["username"], u["role"]) for u in body] == [("ann", "labeler"), ("bob", "labeler"), ("cy", "labeler")]
    assert len({u["password"] for u in body}) == 3 and all(len(u["password"]) >= 12 for u in body)
    assert all(_logs_in(app, u["username"], u["password"]) for u in body)
    assert "password" not in client.get("/api/v1/users", headers=boss).json()[0]
    with session_scope(session_factory) as session:
        created = session.scalar(select(func.count()).where(AuditEvent.action == "user.created", AuditEvent.actor == "boss"))
    assert created == 3


def test_a_batch_with_a_bad_name_creates_nobody_and_names_each(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "Ann", "labeler")
    boss = api_headers(client, "boss")
    refused = client.post("/api/v1/users/batch", headers=boss,
                          json={"usernames": ["dee", "ann", "eve", "DEE"], "role": "labeler"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == "no user was created: 2 of the names cannot be used"
    assert refused.json()["errors"] == [
        {"field": "usernames.1", "message": "a user named 'Ann' already exists"},
        {"field": "usernames.3", "message": "'DEE' is listed already, as usernames.0"},
    ]
    # Every name to fix in one answer: a malformed one hid the names taken or listed twice.
    # `field` is the list's 0-based index; the message names the name.
    every = client.post("/api/v1/users/batch", headers=boss,
                        json={"usernames": ["dee", "x!", "ann", "DEE"], "role": "labeler"})
    assert every.status_code == 422
    assert every.json()["detail"] == "no user was created: 3 of the names cannot be used"
    assert every.json()["errors"] == [
        {"field": "usernames.1",
         "message": "'x!' cannot be a username: use only 2-64 letters (A-Z, without accents), digits, _ . -"},
        {"field": "usernames.2", "message": "a user named 'Ann' already exists"},
        {"field": "usernames.3", "message": "'DEE' is listed already, as usernames.0"},
    ]
    for body, field in (({"usernames": ["x!", "ok"], "role": "labeler"}, "usernames.0"),
                        ({"usernames": ["zed"], "role": "admin"}, "role"),
                        ({"usernames": [], "role": "labeler"}, "usernames"),
                        ({"usernames": [f"u{i}" for i in range(101)], "role": "labeler"}, "usernames")):
        response = client.post("/api/v1/users/batch", headers=boss, json=body)
        assert response.status_code == 422 and field in {e["field"] for e in response.json()["errors"]}, response.text
    assert _users(session_factory) == ["Ann", "boss"]
    assert client.post("/api/v1/users/batch", headers=api_headers(client, "Ann"),
                       json={"usernames": ["zed"], "role": "labeler"}).status_code == 403


def test_the_users_page_creates_a_team_and_shows_each_password_once(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "taken", "labeler")
    csrf = browser_login(client, "boss")
    bad = client.post("/admin/users/batch", data={"csrf_token": csrf, "usernames": "lu\nbad name!\n\ntaken\nmo\nLU", "role": "labeler"})
    assert bad.status_code == 422
    said = html.unescape(re.sub(r"<[^>]+>", " ", bad.text.split('id="new-users-error"', 1)[1].split("</div>", 1)[0]))
    # Every name to fix at once, counted from one as the list shows them (blank lines skipped):
    # the name taken and the one listed twice were said only once the malformed one was fixed.
    assert "Name 2 (bad name!): 'bad name!' cannot be a username" in said
    assert "Name 3 (taken): a user named 'taken' already exists" in said
    assert "Name 5 (LU): 'LU' is listed already, as name 1" in said
    assert "No user was created" in html.unescape(bad.text)
    assert "lu\nbad name!\n\ntaken\nmo\nLU</textarea>" in html.unescape(bad.text), "what was typed stays to correct"
    assert _users(session_factory) == ["boss", "taken"]
    taken = client.post("/admin/users/batch", data={"csrf_token": csrf, "usernames": "lu\ntaken\nmo", "role": "labeler"})
    assert taken.status_code == 422
    assert "Name 2 (taken): a user named 'taken' already exists" in html.unescape(taken.text)

    made = client.post("/admin/users/batch", data={"csrf_token": csrf, "usernames": " lu \r\nmo\r\n", "role": "researcher"})
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    card = html.unescape(made.text.split('id="created"', 1)[1].split("</section>", 1)[0])
    assert "2 users created" in card and "Give each their password privately" in card and "loses them" in card
    rows = re.findall(r"<tr><td>(\w+)</td><td>researcher</td><td class=\"mono\">([\w-]+)</td></tr>", card)
    assert [name for name, _ in rows] == ["lu", "mo"]
    assert all(_logs_in(app, name, password) for name, password in rows)
    assert f"username,password\n{rows[0][0]},{rows[0][1]}\n{rows[1][0]},{rows[1][1]}\n" in card
    # Gone once the page is left: the list shows the users, not their passwords.
    assert rows[0][1] not in client.get("/admin/users").text
