"""Your API tokens on the account page: made there (shown once), listed with their last use and
expiry, revoked there; a bad expiry is refused in place."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient

from tests.conftest import PASSWORD, api_headers, browser_login, make_user


def test_a_user_makes_lists_and_revokes_their_tokens_on_the_account_page(app, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "ann", "labeler")
    browser, api = TestClient(app), TestClient(app)
    csrf = browser_login(browser, "lena")
    assert "You have no API tokens." in browser.get("/account").text

    # The password is asked, as the API asks it: a session left open makes no lasting access.
    for password, status in (("", 422), ("not-hers-at-all", 403)):
        refused = browser.post("/account/tokens", data={"csrf_token": csrf, "name": "x", "password": password})
        assert refused.status_code == status and 'id="token_password-error"' in refused.text
        assert 'name="name" maxlength="100" placeholder="api" value="x"' in refused.text
    assert "You have no API tokens." in browser.get("/account").text
    made = browser.post("/account/tokens", data={"csrf_token": csrf, "name": "  notebook ", "expires_in_days": "90",
                                                 "password": PASSWORD})
    assert made.status_code == 201
    page = html.unescape(made.text)
    token = re.search(r'readonly value="([^"]+)" aria-label="The new token"', page).group(1)
    assert "Token “notebook” made, until" in page and "it is shown this once" in page
    assert api.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"}).json()["username"] == "lena"
    listed = html.unescape(browser.get("/account").text)
    assert token not in listed and "<td data-label=\"Name\">notebook</td>" in listed
    token_id = int(re.search(r'<tr id="token-(\d+)">', listed).group(1))

    # Another's token is not found; a bad expiry makes nothing and says so by its field.
    ann = TestClient(app)
    ann_csrf = browser_login(ann, "ann")
    assert ann.post(f"/account/tokens/{token_id}/revoke", data={"csrf_token": ann_csrf}).status_code == 404
    assert api.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    bad = browser.post("/account/tokens", data={"csrf_token": csrf, "name": "x", "expires_in_days": "-3",
                                                "password": PASSWORD})
    assert bad.status_code == 422
    assert "No token was made" in bad.text and 'id="token_expires_in_days-error"' in bad.text
    # The password form above it was not used: it says nothing.
    assert "The password was not changed" not in bad.text
    wrong = browser.post("/account/tokens", data={"csrf_token": csrf, "name": "x", "password": "not-mine-at-all"})
    assert wrong.status_code == 403 and "Is not your password" in wrong.text
    assert "No token was made" in wrong.text and "The password was not changed" not in wrong.text
    assert html.unescape(bad.text).count("<tr id=\"token-") == 1
    assert browser.post("/account/tokens", data={"name": "no csrf"}).status_code == 403

    revoked = browser.post(f"/account/tokens/{token_id}/revoke", data={"csrf_token": csrf}, follow_redirects=False)
    assert revoked.status_code == 303 and revoked.headers["location"] == f"/account?revoked={token_id}#tokens"
    assert f"Token {token_id} revoked" in browser.get(revoked.headers["location"]).text
    # A second click finds it gone, and says so on the page.
    twice = browser.post(f"/account/tokens/{token_id}/revoke", data={"csrf_token": csrf})
    assert twice.status_code == 404 and f"No token {token_id} of yours is left to revoke" in twice.text
    assert "Token 1²" not in browser.get("/account", params={"revoked": "1²"}).text
    assert api.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    # A token made by API shows here too, with no expiry.
    api_headers(api, "lena")
    assert "Never (until revoked)" in browser.get("/account").text and ">never</span>" in browser.get("/account").text
