"""Deactivation and a password change end a user's logins for good (OWASP ASVS 3.3.3, 3.3.4):
browser sessions and bearer tokens issued before stay dead after reactivation, and a new
password leaves only the login that set it."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.auth.service import authenticate
from app.db import session_scope
from tests.conftest import PASSWORD, api_headers, browser_login, make_user

NEW_PASSWORD = "a-new-password-1"


def _cookie_works(client: TestClient) -> bool:
    response = client.get("/api/v1/users/me")
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


def _token_works(client: TestClient, headers: dict[str, str]) -> bool:
    response = client.get("/api/v1/users/me", headers=headers)
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


def _patch(client: TestClient, user_id: int, headers: dict[str, str], **body: object) -> None:
    response = client.patch(f"/api/v1/users/{user_id}", headers=headers, json=body)
    assert response.status_code == 200, response.text


def _change_own(client: TestClient, headers: dict[str, str]) -> None:
    # An admin too changes their own password giving the current one (PATCH of their own is 409).
    response = client.post("/api/v1/users/me/password", headers=headers,
                           json={"current_password": PASSWORD, "new_password": NEW_PASSWORD})
    assert response.status_code == 204, response.text


def _setup(app, session_factory) -> tuple[TestClient, dict[str, str], TestClient, dict[str, str], int]:  # type: ignore[no-untyped-def]
    """An admin's bearer token, and max logged in twice: in a browser and with a token."""
    make_user(session_factory, "boss", "admin")
    max_id = make_user(session_factory, "max", "manager").id
    admin = TestClient(app)
    browser = TestClient(app)
    browser_login(browser, "max")
    return admin, api_headers(admin, "boss"), browser, api_headers(admin, "max"), max_id


def test_reactivation_brings_back_no_session_or_token(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    admin, admin_headers, browser, max_token, max_id = _setup(app, session_factory)
    assert _cookie_works(browser) and _token_works(admin, max_token)
    _patch(admin, max_id, admin_headers, is_active=False)
    assert not _cookie_works(browser) and not _token_works(admin, max_token)
    _patch(admin, max_id, admin_headers, is_active=True)
    assert not _cookie_works(browser), "the browser session died with the deactivation"
    assert not _token_works(admin, max_token), "the token died with the deactivation"
    # A fresh login works again.
    browser_login(browser, "max")
    assert _cookie_works(browser) and _token_works(admin, api_headers(admin, "max"))


def test_an_admin_reset_password_ends_every_login_of_the_user(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    admin, admin_headers, browser, max_token, max_id = _setup(app, session_factory)
    _patch(admin, max_id, admin_headers, password=NEW_PASSWORD)
    assert not _cookie_works(browser) and not _token_works(admin, max_token)
    assert _token_works(admin, admin_headers), "the admin's own login is untouched"
    with session_scope(session_factory) as session:
        assert authenticate(session, "max", PASSWORD) is None
        assert authenticate(session, "max", NEW_PASSWORD) is not None


def test_a_role_change_ends_no_login(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    admin, admin_headers, browser, max_token, max_id = _setup(app, session_factory)
    _patch(admin, max_id, admin_headers, role="researcher")
    assert _cookie_works(browser) and _token_works(admin, max_token)


def test_changing_ones_own_password_by_token_keeps_only_that_token(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    client = TestClient(app)
    browser = TestClient(app)
    browser_login(browser, "boss")
    changing, other = api_headers(client, "boss"), api_headers(client, "boss")
    _change_own(client, changing)
    assert _token_works(client, changing)
    assert not _token_works(client, other) and not _cookie_works(browser)


def test_changing_ones_own_password_in_the_browser_keeps_only_that_session(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    client = TestClient(app)
    browser = TestClient(app)
    other_browser = TestClient(app)
    csrf = browser_login(browser, "boss")
    browser_login(other_browser, "boss")
    token = api_headers(client, "boss")
    _change_own(browser, {"X-CSRF-Token": csrf})
    assert _cookie_works(browser)
    assert not _cookie_works(other_browser) and not _token_works(client, token)
