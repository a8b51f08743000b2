"""Browser logins: password storage, the session cookie, logout, expiry, redirects."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select, update

from app.auth.pages import safe_next
from app.auth.security import token_digest, verify_password
from app.db import session_scope
from app.deps import SESSION_COOKIE
from app.models import AuthSession, User, utcnow
from tests.conftest import PASSWORD, browser_login, make_user


def _login_form(client, username: str, password: str, next_path: str = ""):  # type: ignore[no-untyped-def]
    page = client.get("/login")
    token = page.text.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
    return client.post(
        "/login",
        data={"username": username, "password": password, "login_csrf": token, "next": next_path},
        follow_redirects=False,
    )


def test_passwords_are_stored_as_argon2_hashes(session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    stored = db.scalar(select(User.password_hash).where(User.username == "ann"))
    assert stored.startswith("$argon2id$")
    assert PASSWORD not in stored
    assert verify_password(stored, PASSWORD)
    assert not verify_password(stored, PASSWORD + "x")


def test_login_sets_an_httponly_samesite_cookie_and_stores_only_its_hash(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    response = _login_form(client, "ann", PASSWORD)
    assert response.status_code == 303
    assert response.headers["location"] == "/label"
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}=")
    )
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in attributes
    assert "samesite=lax" in attributes
    assert "path=/" in attributes
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    hashes = list(db.scalars(select(AuthSession.token_hash)))
    assert hashes == [token_digest(value)]
    assert value not in hashes


@pytest.mark.parametrize("username", ["ann", "nobody"])
def test_a_failed_login_does_not_say_whether_the_user_exists(client, session_factory, username: str) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    page = _login_form(client, username, "wrong password")
    assert page.status_code == 401
    assert "Wrong username or password." in page.text
    assert SESSION_COOKIE not in page.headers.get("set-cookie", "")
    api = client.post("/api/v1/auth/tokens", json={"username": username, "password": "wrong password"})
    assert api.status_code == 401
    assert api.json() == {"detail": "wrong username or password"}


def test_a_deactivated_user_is_told_so_only_with_the_right_password(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    db.execute(update(User).values(is_active=False))
    db.commit()
    page = _login_form(client, "ann", PASSWORD)
    assert page.status_code == 403
    assert "This account is deactivated" in page.text
    assert SESSION_COOKIE not in page.headers.get("set-cookie", "")
    api = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD})
    assert api.status_code == 403
    assert api.json() == {"detail": "this account is deactivated: ask an administrator to reactivate it"}

    # A wrong password gets the answer any wrong password gets: nothing about the account.
    wrong = _login_form(client, "ann", "wrong password")
    assert wrong.status_code == 401 and "Wrong username or password." in wrong.text
    assert "deactivated" not in wrong.text
    api = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": "wrong password"})
    assert api.status_code == 401 and api.json() == {"detail": "wrong username or password"}


def test_a_failed_login_keeps_the_username(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    page = _login_form(client, "ann", "wrong password")
    assert page.status_code == 401
    assert 'name="username" autocomplete="username" autocapitalize="none" autocorrect="off" spellcheck="false" required maxlength="64" value="ann"' in page.text
    assert PASSWORD not in page.text and "wrong password" not in page.text


def test_the_login_form_needs_its_own_csrf_token(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    client.get("/login")
    response = client.post(
        "/login",
        data={"username": "ann", "password": PASSWORD, "login_csrf": "forged"},
        follow_redirects=False,
    )
    assert response.status_code == 403
    assert db.scalar(select(func.count()).select_from(AuthSession)) == 0


def test_logout_ends_the_session_on_the_server(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "ann")
    old_cookie = client.cookies[SESSION_COOKIE]
    response = client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login"
    assert db.scalar(select(func.count()).select_from(AuthSession)) == 0
    db.rollback()  # SQLite: a reading transaction still holds the write lock the app needs

    # A copy of the cookie kept by an attacker or a second tab is worth nothing now.
    client.cookies.set(SESSION_COOKIE, old_cookie)
    page = client.get("/label/stats", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    assert client.get("/api/v1/users/me").status_code == 401


def test_logout_without_the_csrf_token_is_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    browser_login(client, "ann")
    assert client.post("/logout", follow_redirects=False).status_code == 403
    assert client.get("/label/stats", follow_redirects=False).status_code == 200


def test_an_expired_session_is_refused(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    browser_login(client, "ann")
    db.execute(update(AuthSession).values(expires_at=utcnow() - timedelta(minutes=1)))
    db.commit()
    page = client.get("/label/stats", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/label/stats"
    assert client.get("/api/v1/users/me").status_code == 401


def test_deactivating_a_user_ends_their_session(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    browser_login(client, "ann")
    db.execute(update(User).values(is_active=False))
    db.commit()
    assert client.get("/label/stats", follow_redirects=False).status_code == 303


@pytest.mark.parametrize(
    "next_path",
    ["//evil.example/", "https://evil.example/", "/\\evil.example", "/\t/evil.example", "http:evil.example"],
)
def test_login_never_redirects_off_site(client, session_factory, next_path: str) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    response = _login_form(client, "ann", PASSWORD, next_path)
    assert response.status_code == 303
    assert _stays_on_site(response.headers["location"])


@pytest.mark.parametrize("next_path", ["/\\evil.example", "/\t/evil.example", "/\n/evil.example", "/\x7f/evil.example"])
def test_a_next_path_a_browser_would_read_as_another_site_is_not_followed(next_path: str) -> None:
    # Not left to the redirect's percent-encoding, which a Location built otherwise would lack.
    assert safe_next(next_path) is None
    assert safe_next("/label/stats?project=1") == "/label/stats?project=1"


def _stays_on_site(url: str) -> bool:
    # What a browser makes of it: backslashes count as slashes, tabs and newlines are dropped.
    as_browser = url.replace("\\", "/").replace("\t", "").replace("\n", "")
    return as_browser.startswith("/") and not as_browser.startswith("//") and not urlsplit(as_browser).netloc


def test_login_returns_to_the_page_that_asked_for_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    asked = client.get("/label/stats", follow_redirects=False)
    assert asked.headers["location"] == "/login?next=/label/stats"
    response = _login_form(client, "ann", PASSWORD, "/label/stats")
    assert response.headers["location"] == "/label/stats"


def test_a_username_logs_in_in_any_case_but_of_two_alike_only_the_exact_one(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    # A phone's keyboard capitalises the first letter; autofill may add a space.
    assert _login_form(client, "Ann ", PASSWORD).status_code == 303
    token = client.post("/api/v1/auth/tokens", json={"username": "ANN", "password": PASSWORD})
    assert token.status_code == 201
    # Two names alike but for case, from before names were one whatever their case.
    make_user(session_factory, "cid", "labeler")
    with session_scope(session_factory) as session:
        session.execute(update(User).where(User.username == "ann").values(username="Bob"))
        session.execute(update(User).where(User.username == "cid").values(username="bob"))
    assert client.post("/api/v1/auth/tokens", json={"username": "BOB", "password": PASSWORD}).status_code == 401
    for exact in ("Bob", "bob"):
        assert client.post("/api/v1/auth/tokens", json={"username": exact, "password": PASSWORD}).status_code == 201
