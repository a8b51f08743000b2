"""Login throttling: repeated failures for a username, or from an address, are refused with
429 and Retry-After for a while, in the login form and the token API alike; the count lives in
the database, so every server process agrees."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import schemathesis
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.auth.throttle import Limits, keys_for, record_failure
from app.db import session_scope
from app.main import create_app
from app.models import LoginFailure, LoginKeyKind, User, utcnow
from tests.api.test_openapi_contract import CHECKS
from tests.conftest import PASSWORD, make_user

TOKENS = "/api/v1/auth/tokens"


def _api(client, username: str, password: str):  # type: ignore[no-untyped-def]
    return client.post(TOKENS, json={"username": username, "password": password})


def _form(client, username: str, password: str):  # type: ignore[no-untyped-def]
    page = client.get("/login")
    token = page.text.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
    return client.post(
        "/login",
        data={"username": username, "password": password, "login_csrf": token},
        follow_redirects=False,
    )


def _pass_time(factory, minutes: int) -> None:  # type: ignore[no-untyped-def]
    """Move every stored window and lock `minutes` into the past, as if that time went by."""
    back = timedelta(minutes=minutes)
    with session_scope(factory) as session:
        for row in session.scalars(select(LoginFailure)):
            row.window_started_at -= back
            if row.locked_until is not None:
                row.locked_until -= back


def _assert_locked(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 429, response.text
    assert 0 < int(response.headers["retry-after"]) <= 15 * 60


@pytest.mark.parametrize("login", [_api, _form], ids=["api", "form"])
def test_ten_wrong_passwords_lock_the_username_until_the_lockout_ends(client, session_factory, login) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    for _ in range(10):
        assert login(client, "ann", "wrong password").status_code == 401
    _assert_locked(login(client, "ann", PASSWORD))
    # Another spelling of the name is the same name to the throttle.
    _assert_locked(login(client, "ANN", PASSWORD))
    _pass_time(session_factory, 14)
    _assert_locked(login(client, "ann", PASSWORD))
    _pass_time(session_factory, 2)
    assert login(client, "ann", PASSWORD).status_code in (201, 303)


def test_a_new_password_from_an_admin_lifts_the_lock_on_the_name(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from app.users.schemas import UserUpdate
    from app.users.service import update_user

    make_user(session_factory, "ann", "labeler")
    for _ in range(10):
        _api(client, "ann", "wrong password")
    _assert_locked(_api(client, "ann", PASSWORD))
    with session_scope(session_factory) as session:
        ann = session.scalar(select(User).where(User.username == "ann"))
        update_user(session, ann, UserUpdate(password="a fresh one 42"), by=None)
    assert _api(client, "ann", "a fresh one 42").status_code == 201


def test_the_form_says_why_it_refuses(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    for _ in range(10):
        _form(client, "ann", "wrong password")
    refused = _form(client, "ann", PASSWORD)
    _assert_locked(refused)
    assert "Too many failed logins: try again in 15 minutes." in refused.text
    assert 'name="login_csrf"' in refused.text


@pytest.mark.parametrize("login", [_api, _form], ids=["api", "form"])
def test_an_unknown_username_is_counted_and_refused_alike(client, session_factory, login) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    answers = {}
    for name in ("ann", "nobody"):
        statuses = [login(client, name, "wrong password").status_code for _ in range(11)]
        refused = login(client, name, PASSWORD)
        answers[name] = (statuses, refused.status_code, refused.headers["retry-after"], refused.text.replace(name, "NAME"))
    assert answers["ann"][0] == answers["nobody"][0] == [401] * 10 + [429]
    assert answers["ann"][1] == answers["nobody"][1]
    # Counted down from each lock's own start: a second may pass between the two names' locks.
    assert abs(int(answers["ann"][2]) - int(answers["nobody"][2])) <= 1
    if login is _api:
        assert answers["ann"][3] == answers["nobody"][3]


def test_a_good_login_clears_the_usernames_count(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    for _ in range(9):
        _api(client, "ann", "wrong password")
    assert _api(client, "ann", PASSWORD).status_code == 201
    for _ in range(9):
        assert _api(client, "ann", "wrong password").status_code == 401
    assert _api(client, "ann", PASSWORD).status_code == 201


def test_one_address_is_refused_after_fifty_failures_across_usernames(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    for i in range(50):
        assert _api(client, f"guess-{i}", "wrong password").status_code == 401
    _assert_locked(_api(client, "ann", PASSWORD))
    _assert_locked(_form(client, "ann", PASSWORD))
    # The same user from another address is not held up by this one's guesses.
    with TestClient(client.app, client=("203.0.113.9", 50000)) as elsewhere:
        assert _api(elsewhere, "ann", PASSWORD).status_code == 201


def test_every_server_process_sees_the_same_count(settings, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    first, second = create_app(settings), create_app(settings)
    try:
        with TestClient(first) as one, TestClient(second) as two:
            for i in range(10):
                assert _api(one if i % 2 else two, "ann", "wrong password").status_code == 401
            _assert_locked(_api(one, "ann", PASSWORD))
            _assert_locked(_api(two, "ann", PASSWORD))
    finally:
        first.state.engine.dispose()
        second.state.engine.dispose()


def test_failures_counted_from_many_sessions_at_once_are_all_counted(session_factory) -> None:  # type: ignore[no-untyped-def]
    limits = Limits(per_username=1000, per_address=1000, window=timedelta(minutes=15), lockout=timedelta(minutes=15))
    keys = keys_for("ann", "198.51.100.7", limits)
    now = utcnow()

    def fail() -> None:
        for _ in range(5):
            with session_scope(session_factory) as session:
                record_failure(session, keys, limits, now)

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with session_scope(session_factory) as session:
        counts = dict(session.execute(select(LoginFailure.kind, LoginFailure.failures)).all())
    assert counts == {LoginKeyKind.username: 40, LoginKeyKind.address: 40}


def test_the_token_routes_429_is_documented(app, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    operation = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)[TOKENS]["POST"]
    for expected in [401] * 10 + [429]:
        case = operation.Case(body={"username": "ann", "password": "wrong password"}, media_type="application/json")
        response = case.call()
        assert response.status_code == expected, response.text
        case.validate_response(response, checks=CHECKS)
