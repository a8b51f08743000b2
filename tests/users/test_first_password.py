"""A password an admin chose is for one login: its owner chooses their own before anything else."""

from __future__ import annotations

import html

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db import session_scope
from app.deps import CSRF_HEADER
from app.models import AuditEvent, User
from tests.cli.conftest import stepwise  # noqa: F401 (a fixture)
from tests.conftest import PASSWORD, api_headers, browser_login, make_project, make_user

OWN = "a password of my own"


def _must_change(session_factory, username: str) -> bool:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalar(select(User.must_change_password).where(User.username == username))


def _events(session_factory, action: str) -> list[dict]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return [e.details for e in session.scalars(select(AuditEvent).where(AuditEvent.action == action))]


def _log_in(app, username: str, password: str, next_path: str = "") -> tuple[TestClient, str]:  # type: ignore[no-untyped-def]
    browser = TestClient(app)
    form = browser.get("/login").text
    token = form.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
    answer = browser.post("/login", data={"username": username, "password": password, "login_csrf": token,
                                          "next": next_path}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return browser, answer.headers["location"]


def test_a_user_made_on_the_users_page_chooses_their_own_password_first(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    project = make_project(session_factory)
    csrf = browser_login(client, "boss")
    page = client.get("/admin/users").text
    assert 'name="must_change_password" checked' in page, "ticked unless the admin unticks it"
    made = client.post("/admin/users", data={"csrf_token": csrf, "username": "ann", "role": "labeler",
                                              "password": PASSWORD, "must_change_password": "on"})
    assert made.status_code == 200
    assert "They choose their own when they next log in." in made.text
    assert "to choose a password" in made.text
    assert _events(session_factory, "user.created")[-1] == {"role": "labeler", "must_change_password": True}

    ann, went = _log_in(app, "ann", PASSWORD, f"/label/{project.id}")
    assert went == f"/account?next=%2Flabel%2F{project.id}#password"
    account = ann.get("/account")
    assert "Choose your own password" in account.text and "An administrator chose the password" in account.text
    assert 'id="tokens"' not in account.text and 'aria-label="Main"' not in account.text
    assert f'name="next" value="/label/{project.id}"' in ann.get(went.split("#")[0]).text
    ann_csrf = account.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    # Every other page sends them back; the API answers why.
    for path in ("/label", "/label/stats", f"/label/{project.id}"):
        closed = ann.get(path, follow_redirects=False)
        assert closed.status_code == 303 and closed.headers["location"] == f"/account?next={path}#password", path
    token = ann.post("/account/tokens", data={"csrf_token": ann_csrf, "name": "x", "password": PASSWORD},
                     follow_redirects=False, headers={"Referer": "http://testserver/account"})
    assert token.status_code == 303 and token.headers["location"] == "/account?next=/account#password"
    api = ann.get("/api/v1/me/stats")
    assert api.status_code == 403 and "an administrator chose your password" in api.json()["detail"]
    hot = ann.post(f"/api/v1/projects/{project.id}/tasks/next", headers={"X-CSRF-Token": ann_csrf})
    assert hot.status_code == 403 and "choose your own" in hot.json()["detail"]
    assert ann.get("/api/v1/users/me").json()["must_change_password"] is True

    same = ann.post("/account/password", data={"csrf_token": ann_csrf, "current_password": PASSWORD,
                                              "new_password": PASSWORD, "repeat_password": PASSWORD,
                                              "next": f"/label/{project.id}"})
    assert same.status_code == 422 and _must_change(session_factory, "ann")
    assert f'name="next" value="/label/{project.id}"' in same.text, "where they were going is kept"
    chosen = ann.post("/account/password", data={"csrf_token": ann_csrf, "current_password": PASSWORD,
                                                "new_password": OWN, "repeat_password": OWN,
                                                "next": f"/label/{project.id}"}, follow_redirects=False)
    assert chosen.status_code == 303 and chosen.headers["location"] == f"/label/{project.id}"
    assert not _must_change(session_factory, "ann")
    assert ann.get("/label/stats").status_code == 200
    assert ann.get("/api/v1/me/stats").status_code == 200
    again, went = _log_in(app, "ann", OWN)
    assert went == "/label"


def test_an_api_user_trades_the_given_password_for_a_token_and_changes_it_with_that_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    boss = api_headers(client, "boss")
    made = client.post("/api/v1/users", headers=boss, json={"username": "rhea", "role": "researcher",
                                                            "password": PASSWORD, "must_change_password": True})
    assert made.status_code == 201 and made.json()["must_change_password"] is True
    rhea = api_headers(client, "rhea")
    closed = client.get("/api/v1/projects", headers=rhea)
    assert closed.status_code == 403
    assert closed.json()["detail"].startswith("an administrator chose your password: choose your own")
    # A body the route could not read is refused for the same reason, not judged.
    unread = client.post("/api/v1/projects", headers={**rhea, "Content-Type": "application/json"}, content=b"{")
    assert unread.status_code == 403 and "administrator chose your password" in unread.json()["detail"]
    assert client.get("/api/v1/auth/tokens", headers=rhea).status_code == 200
    assert client.get("/api/v1/users/me", headers=rhea).json()["must_change_password"] is True
    changed = client.post("/api/v1/users/me/password", headers=rhea,
                          json={"current_password": PASSWORD, "new_password": OWN})
    assert changed.status_code == 204
    assert client.get("/api/v1/projects", headers=rhea).status_code == 200, "the token it was changed with stays"
    assert client.get("/api/v1/users/me", headers=rhea).json()["must_change_password"] is False


def test_an_admin_asks_for_a_new_password_with_one_or_alone(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    ann = make_user(session_factory, "ann", "labeler")
    boss = api_headers(client, "boss")
    assert not _must_change(session_factory, "ann"), "made by the command line or a script: as before"
    asked = client.patch(f"/api/v1/users/{ann.id}", headers=boss, json={"must_change_password": True})
    assert asked.status_code == 200 and asked.json()["must_change_password"] is True
    _, went = _log_in(app, "ann", PASSWORD)
    assert went == "/account?next=%2Flabel#password"
    waived = client.patch(f"/api/v1/users/{ann.id}", headers=boss, json={"must_change_password": False})
    assert waived.status_code == 200 and not _must_change(session_factory, "ann")
    assert [e.action for e in _audit(session_factory)] == ["user.password_change_asked", "user.password_change_waived"]
    own = client.patch("/api/v1/users/1", headers=boss, json={"must_change_password": True})
    assert own.status_code == 409 and "/account" in own.json()["detail"]

    # The page's Set password: ticked, they replace it; unticked, the new one is theirs to keep.
    csrf = browser_login(client, "boss")
    client.post(f"/admin/users/{ann.id}/password", data={"csrf_token": csrf, "password": "handed over 1",
                                                        "must_change_password": "on"})
    assert _must_change(session_factory, "ann")
    assert _events(session_factory, "user.password_set") == [{"must_change_password": True}]
    kept = client.post(f"/admin/users/{ann.id}/password", data={"csrf_token": csrf, "password": "handed over 2"})
    assert "New password set for ann" in kept.text and "They choose their own when" not in html.unescape(kept.text)
    assert not _must_change(session_factory, "ann")


def _audit(session_factory) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return list(session.scalars(select(AuditEvent).where(AuditEvent.action.like("user.password_change_%"))
                                    .order_by(AuditEvent.id)))


def test_the_confirmation_card_keeps_the_choice_for_an_admins_new_password(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    other = make_user(session_factory, "ada", "admin")
    csrf = browser_login(client, "boss")
    asked = client.post(f"/admin/users/{other.id}/password", data={"csrf_token": csrf, "password": "handed over 1",
                                                                  "must_change_password": "on"})
    assert asked.status_code == 403
    assert '<input type="hidden" name="must_change_password" value="true">' in asked.text
    assert "handed over 1" not in asked.text
    done = client.post(f"/admin/users/{other.id}/password", data={
        "csrf_token": csrf, "password": "handed over 1", "must_change_password": "true", "your_password": PASSWORD})
    assert done.status_code == 200 and _must_change(session_factory, "ada")


def test_generated_passwords_are_replaced_at_first_login_unless_the_admin_says_otherwise(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    boss = api_headers(client, "boss")
    made = client.post("/api/v1/users/batch", headers=boss, json={"usernames": ["lu"], "role": "labeler"})
    assert made.json()[0]["must_change_password"] is True
    kept = client.post("/api/v1/users/batch", headers=boss,
                       json={"usernames": ["mo"], "role": "labeler", "must_change_password": False})
    assert kept.json()[0]["must_change_password"] is False
    csrf = browser_login(client, "boss")
    page = client.post("/admin/users/batch", data={"csrf_token": csrf, "usernames": "ny", "role": "labeler"})
    assert page.status_code == 201 and not _must_change(session_factory, "ny"), "an unticked box sends nothing"
    ticked = client.post("/admin/users/batch", data={"csrf_token": csrf, "usernames": "ol", "role": "labeler",
                                                     "must_change_password": "on"})
    assert ticked.status_code == 201 and _must_change(session_factory, "ol")


def test_the_command_line_asks_for_a_new_password_when_told(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    made = stepwise(database_url, "users", "create", "--username", "ann", "--role", "labeler",
                    "--must-change-password", input=PASSWORD + "\n")
    assert made.exit_code == 0 and "they choose their own password at their first login" in made.stdout
    assert "(to choose a password)" in stepwise(database_url, "users", "list").stdout
    assert stepwise(database_url, "users", "set-password", "--username", "ann", input=OWN + "\n").exit_code == 0
    assert _must_change(session_factory, "ann"), "neither flag: as before"
    assert stepwise(database_url, "users", "set-password", "--username", "ann", "--no-must-change-password",
                    input=OWN + "\n").exit_code == 0
    assert not _must_change(session_factory, "ann")
    many = stepwise(database_url, "users", "create-many", "--role", "labeler", "-", input="bo\n")
    assert many.exit_code == 0 and _must_change(session_factory, "bo")


# What a user whose password an admin chose may still reach: the door, the account page and
# password change, their tokens; and what asks no login at all.
STILL_OPEN = {("GET", "/login"), ("POST", "/login"), ("POST", "/logout"), ("GET", "/account"),
              ("POST", "/account/password"), ("GET", "/api/v1/users/me"), ("POST", "/api/v1/users/me/password"),
              ("POST", "/api/v1/auth/tokens"), ("GET", "/api/v1/auth/tokens"),
              ("DELETE", "/api/v1/auth/tokens/current"), ("DELETE", "/api/v1/auth/tokens/{token_id}"),
              ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}


SUBMIT = ("POST", "/api/v1/assignments/{assignment_id}/submit")
LABEL = {"idempotency_key": "key-0001", "ratings": [{"rating": 1}], "finish_reason": "solution", "total_time_ms": 10}


def test_every_other_route_waits_for_the_users_own_password(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.auth.route_table import endpoints
    from tests.auth.test_roles import _call

    project = make_project(session_factory)
    boss = make_user(session_factory, "boss", "admin")
    ids = {"project_id": project.id, "user_id": boss.id}
    headers = api_headers(client, "boss")
    csrf = browser_login(client, "boss")
    with session_scope(session_factory) as session:
        session.get(User, boss.id).must_change_password = True
    walked = []
    for endpoint in endpoints(app):
        if (endpoint.method, endpoint.path) in STILL_OPEN or endpoint.path.startswith("/api/v1/docs"):
            continue
        if (endpoint.method, endpoint.path) == SUBMIT:
            # The hot path judges the body before the caller: a well-formed one reaches the check.
            url = endpoint.url(ids)
            answers = (client.post(url, headers=headers, json=LABEL),
                       client.post(url, headers={CSRF_HEADER: csrf}, json=LABEL))
        elif endpoint.is_api:
            answers = (_call(client, endpoint, ids, headers=headers), _call(client, endpoint, ids, csrf=csrf))
        if endpoint.is_api:
            for answer in answers:
                assert answer.status_code == 403, f"{endpoint} gave {answer.status_code}"
                assert "an administrator chose your password" in answer.json()["detail"], endpoint
        else:
            answer = _call(client, endpoint, ids, csrf=csrf)
            assert answer.status_code == 303, f"{endpoint} gave {answer.status_code}"
            assert answer.headers["location"].startswith("/account?next="), endpoint
        walked.append(endpoint)
    assert len(walked) > 100
