"""Passwords after the first: a user changes their own (page and API, giving the current one,
throttled as logins are), an admin sets a new one for a user who lost theirs (page and CLI);
either way the user's other logins end."""

from __future__ import annotations

import html

import pytest
from fastapi.testclient import TestClient

from app.auth.security import guessable
from app.auth.service import authenticate
from app.db import session_scope
from tests.cli.conftest import stepwise  # noqa: F401  (a fixture: runs the CLI)
from tests.conftest import PASSWORD, api_headers, browser_login, make_user

NEW_PASSWORD = "a-new-password-1"


def _works(client: TestClient, headers: dict[str, str] | None = None) -> bool:
    response = client.get("/api/v1/users/me", headers=headers or {})
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


def _password_is(factory, username: str, password: str) -> bool:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return authenticate(session, username, password) is not None


def test_a_user_changes_their_password_by_api_and_keeps_only_that_token(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    client, browser = TestClient(app), TestClient(app)
    browser_login(browser, "lena")
    changing, other = api_headers(client, "lena"), api_headers(client, "lena")
    body = {"current_password": PASSWORD, "new_password": NEW_PASSWORD}
    response = client.post("/api/v1/users/me/password", headers=changing, json=body)
    assert response.status_code == 204, response.text
    assert _password_is(session_factory, "lena", NEW_PASSWORD) and not _password_is(session_factory, "lena", PASSWORD)
    assert _works(client, changing) and not _works(client, other) and not _works(browser)


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"current_password": "not-it-at-all", "new_password": NEW_PASSWORD}, 403, "the current password is wrong"),
        ({"current_password": PASSWORD, "new_password": "short"}, 422, "at least 8 characters"),
        ({"current_password": PASSWORD, "new_password": PASSWORD}, 422, "the new password is the current one"),
        ({"current_password": PASSWORD, "new_password": " " * 12}, 422, "a password cannot be only spaces"),
        ({"new_password": NEW_PASSWORD}, 422, "current_password"),
        ({"current_password": PASSWORD, "new_password": NEW_PASSWORD, "role": "admin"}, 422, "role"),
    ],
)
def test_a_refused_change_says_why_and_changes_nothing(app, session_factory, body, status, words) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    client = TestClient(app)
    headers = api_headers(client, "lena")
    response = client.post("/api/v1/users/me/password", headers=headers, json=body)
    assert response.status_code == status and words in response.text
    assert _password_is(session_factory, "lena", PASSWORD) and _works(client, headers)


def test_wrong_current_passwords_are_throttled_as_logins_are(app, session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    client = TestClient(app)
    headers = api_headers(client, "lena")
    monkeypatch.setattr(app.state.settings, "login_max_failures", 3)
    wrong = {"current_password": "guess-number-x", "new_password": NEW_PASSWORD}
    assert [client.post("/api/v1/users/me/password", headers=headers, json=wrong).status_code for _ in range(3)] == [403] * 3
    locked = client.post("/api/v1/users/me/password", headers=headers,
                         json={"current_password": PASSWORD, "new_password": NEW_PASSWORD})
    assert locked.status_code == 429 and "Retry-After" in locked.headers
    assert _password_is(session_factory, "lena", PASSWORD)


def test_the_account_page_changes_the_password_and_says_what_is_wrong(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    browser, other = TestClient(app), TestClient(app)
    csrf = browser_login(browser, "lena")
    browser_login(other, "lena")
    assert 'href="/account"' in browser.get("/label").text
    form = {"csrf_token": csrf, "current_password": PASSWORD, "new_password": NEW_PASSWORD, "repeat_password": NEW_PASSWORD}
    cases = [
        ({"current_password": "wrong-password"}, 403, "current_password", "Is not your password"),
        ({"repeat_password": "a-new-password-2"}, 422, "repeat_password", "Does not match the new password"),
        ({"new_password": "short", "repeat_password": "short"}, 422, "new_password", "at least 8 characters"),
        ({"current_password": ""}, 422, "current_password", "Needs a value"),
    ]
    for change, status, field, words in cases:
        page = browser.post("/account/password", data={**form, **change})
        assert page.status_code == status, page.text
        assert words in html.unescape(page.text).split(f'id="{field}-error">', 1)[1].split("<", 1)[0]
    same = browser.post("/account/password", data={**form, "new_password": PASSWORD, "repeat_password": PASSWORD})
    assert same.status_code == 422 and "the new password is the current one" in same.text
    assert _password_is(session_factory, "lena", PASSWORD) and _works(other)
    done = browser.post("/account/password", data=form, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/account?password=changed"
    assert "Password changed." in browser.get(done.headers["location"]).text
    assert _password_is(session_factory, "lena", NEW_PASSWORD)
    assert _works(browser) and not _works(other)


def test_an_admin_sets_a_password_on_the_users_page(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    lena_id = make_user(session_factory, "lena", "labeler").id
    admin, lena = TestClient(app), TestClient(app)
    csrf = browser_login(admin, "boss")
    browser_login(lena, "lena")
    short = admin.post(f"/admin/users/{lena_id}/password", data={"csrf_token": csrf, "password": "short"})
    assert short.status_code == 422 and "lena: password" in html.unescape(short.text)
    assert _password_is(session_factory, "lena", PASSWORD) and _works(lena)
    set_ = admin.post(f"/admin/users/{lena_id}/password", data={"csrf_token": csrf, "password": NEW_PASSWORD},
                      follow_redirects=False)
    assert set_.status_code == 303 and set_.headers["location"] == f"/admin/users?password_set={lena_id}"
    assert "New password set for lena" in admin.get(set_.headers["location"]).text
    assert _password_is(session_factory, "lena", NEW_PASSWORD) and not _works(lena) and _works(admin)


def test_an_admin_sets_their_own_password_only_by_giving_the_current_one(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    boss_id = make_user(session_factory, "boss", "admin").id
    admin, api = TestClient(app), TestClient(app)
    csrf = browser_login(admin, "boss")
    headers = api_headers(api, "boss")
    page = admin.post(f"/admin/users/{boss_id}/password", data={"csrf_token": csrf, "password": NEW_PASSWORD})
    assert page.status_code == 409
    assert "Nothing was changed. boss: change your own password under Your account" in html.unescape(page.text)
    response = api.patch(f"/api/v1/users/{boss_id}", headers=headers, json={"password": NEW_PASSWORD})
    assert response.status_code == 409 and "/api/v1/users/me/password" in response.json()["detail"]
    assert _password_is(session_factory, "boss", PASSWORD) and _works(api, headers) and _works(admin)


def test_the_cli_sets_a_password_read_from_standard_input(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    done = stepwise(database_url, "users", "set-password", "--username", "lena", input=NEW_PASSWORD + "\n")
    assert done.exit_code == 0 and "new password set for lena" in done.stdout
    assert _password_is(session_factory, "lena", NEW_PASSWORD)
    short = stepwise(database_url, "users", "set-password", "--username", "lena", input="short\n")
    # A value refused as it is: exit status 2, as click's own refusals.
    assert short.exit_code == 2 and "password" in short.stderr and "Traceback" not in short.output
    nobody = stepwise(database_url, "users", "set-password", "--username", "nobody", input=NEW_PASSWORD + "\n")
    assert nobody.exit_code == 1 and "no user named 'nobody'" in nobody.stderr
    assert _password_is(session_factory, "lena", NEW_PASSWORD)


def test_a_password_that_is_the_account_name_is_refused_wherever_it_is_set(app, session_factory, stepwise, database_url) -> None:  # type: ignore[no-untyped-def]
    """The name is the first guess of all: refused when an admin sets it (API, page, CLI) and when
    its owner chooses it (API, page), though it passes judged alone."""
    name = "ed-lab17"
    assert guessable(name) is None
    user_id = make_user(session_factory, name, "labeler").id
    make_user(session_factory, "boss", "admin")
    client = TestClient(app)
    refused = client.patch(f"/api/v1/users/{user_id}", headers=api_headers(client, "boss"), json={"password": name})
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "password", refused.text
    assert refused.json()["errors"][0]["message"].startswith("is too easy to guess")
    own = client.post("/api/v1/users/me/password", headers=api_headers(client, name),
                      json={"current_password": PASSWORD, "new_password": name})
    assert own.status_code == 422 and own.json()["errors"][0]["field"] == "new_password", own.text

    admin, browser = TestClient(app), TestClient(app)
    csrf = browser_login(admin, "boss")
    page = admin.post(f"/admin/users/{user_id}/password", data={"csrf_token": csrf, "password": name})
    assert page.status_code == 422 and f"{name}: password is too easy to guess" in html.unescape(page.text)
    csrf = browser_login(browser, name)
    account = browser.post("/account/password", data={"csrf_token": csrf, "current_password": PASSWORD,
                                                      "new_password": name, "repeat_password": name})
    assert account.status_code == 422
    assert "too easy to guess" in html.unescape(account.text).split('id="new_password-error">', 1)[1].split("<", 1)[0]
    cli = stepwise(database_url, "users", "set-password", "--username", name, input=name + "\n")
    assert cli.exit_code == 1 and "too easy to guess" in cli.stderr and "Traceback" not in cli.output
    assert _password_is(session_factory, name, PASSWORD) and _works(browser)
