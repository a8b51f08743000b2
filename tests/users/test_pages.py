"""The admin's user page over HTTP: create, change role, deactivate and reactivate."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import session_scope
from app.models import Role, User
from tests.conftest import PASSWORD, api_headers, browser_login, make_user


def _user(factory, username: str) -> User | None:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalar(select(User).where(User.username == username))


def _users(factory) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalar(select(func.count()).select_from(User)) or 0


@pytest.fixture
def admin(client, session_factory) -> str:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    return browser_login(client, "boss")


def test_an_admin_creates_a_user_who_can_then_log_in(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        "/admin/users",
        data={"csrf_token": admin, "username": "rhea", "role": "researcher", "password": PASSWORD},
        follow_redirects=False,
    )
    assert response.status_code == 303
    created = _user(session_factory, "rhea")
    assert created is not None and created.role == Role.researcher and created.is_active
    assert response.headers["location"] == f"/admin/users?created={created.id}"
    assert created.password_hash.startswith("$argon2id$")
    listing = client.get(response.headers["location"])
    assert f'id="user-{created.id}"' in listing.text
    assert "Created rhea (researcher): give them their password privately." in listing.text

    # Each change says what it did, at the top of the page.
    changes = [("role", {"role": "manager"}, "rhea&#39;s role is now manager."),
               ("active", {"is_active": "false"}, "rhea is deactivated: their logins and API tokens have ended."),
               ("active", {"is_active": "true"}, "rhea can log in again.")]
    for action, form, notice in changes:
        changed = client.post(f"/admin/users/{created.id}/{action}", data={"csrf_token": admin, **form},
                              follow_redirects=False)
        assert changed.status_code == 303
        assert notice in client.get(changed.headers["location"]).text
    # An address kept from before says nothing that is no longer so.
    assert "is deactivated" not in client.get(f"/admin/users?deactivated={created.id}").text
    with TestClient(app) as other:
        browser_login(other, "rhea")
        assert other.get("/manage/projects").status_code == 200


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"username": "x", "role": "labeler", "password": PASSWORD}, "username", "Use only 2-64 letters (A-Z, without accents), digits, _ . -"),
        ({"username": "a b", "role": "labeler", "password": PASSWORD}, "username", "Use only 2-64 letters (A-Z, without accents), digits, _ . -"),
        ({"username": "ann", "role": "owner", "password": PASSWORD}, "role", "'labeler', 'manager', 'researcher' or 'admin'"),
        ({"username": "ann", "role": "labeler", "password": "short"}, "password", "at least 8 characters"),
        ({"username": "ann", "role": "labeler", "password": " " * 9}, "password", "only spaces"),
    ],
)
def test_bad_new_user_fields_are_shown_and_nothing_is_created(client, session_factory, admin, form, field, message) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/admin/users", data={"csrf_token": admin, **form})
    assert response.status_code == 422
    shown = html.unescape(response.text).split(f'id="{field}-error">', 1)[1].split("<", 1)[0]
    assert message in shown
    assert _users(session_factory) == 1
    assert PASSWORD not in response.text, "a typed password is never sent back"


def test_a_duplicate_username_is_refused_with_409(client, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    response = client.post(
        "/admin/users",
        data={"csrf_token": admin, "username": "ann", "role": "admin", "password": PASSWORD, "your_password": PASSWORD},
    )
    assert response.status_code == 409
    assert "A user named 'ann' already exists" in html.unescape(response.text)
    assert _user(session_factory, "ann").role == Role.labeler  # type: ignore[union-attr]


def test_a_new_role_takes_effect_on_the_users_next_request(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    with TestClient(app) as ann_browser:
        browser_login(ann_browser, "ann")
        assert ann_browser.get("/manage/projects").status_code == 403
        response = client.post(
            f"/admin/users/{ann.id}/role", data={"csrf_token": admin, "role": "manager"}, follow_redirects=False
        )
        assert response.status_code == 303
        assert _user(session_factory, "ann").role == Role.manager  # type: ignore[union-attr]
        assert ann_browser.get("/manage/projects").status_code == 200


def test_deactivation_locks_a_user_out_and_reactivation_lets_them_back(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    with TestClient(app) as ann_browser:
        browser_login(ann_browser, "ann")
        token = api_headers(ann_browser, "ann")
        response = client.post(
            f"/admin/users/{ann.id}/active", data={"csrf_token": admin, "is_active": "false"}, follow_redirects=False
        )
        assert response.status_code == 303
        assert "deactivated" in client.get("/admin/users").text
        assert ann_browser.get("/label", follow_redirects=False).status_code == 303
        assert ann_browser.get("/api/v1/users/me", headers=token).status_code == 401
        refused = ann_browser.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD})
        assert refused.status_code == 403 and "deactivated" in refused.json()["detail"]

        client.post(f"/admin/users/{ann.id}/active", data={"csrf_token": admin, "is_active": "true"})
        assert _user(session_factory, "ann").is_active  # type: ignore[union-attr]
        browser_login(ann_browser, "ann")
        assert ann_browser.get("/label").status_code == 200


@pytest.mark.parametrize(("action", "form"), [("role", {"role": "labeler"}), ("active", {"is_active": "false"})])
def test_an_admin_cannot_demote_or_deactivate_themselves(client, session_factory, admin, action, form) -> None:  # type: ignore[no-untyped-def]
    me = _user(session_factory, "boss")
    response = client.post(f"/admin/users/{me.id}/{action}", data={"csrf_token": admin, **form})  # type: ignore[union-attr]
    assert response.status_code == 409
    assert "ask another admin" in response.text
    me = _user(session_factory, "boss")
    assert me.role == Role.admin and me.is_active  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "form", "status", "message"),
    [
        ("/admin/users/999/role", {"role": "manager"}, 404, "no user with id 999"),
        ("/admin/users/999/active", {"is_active": "false"}, 404, "no user with id 999"),
        ("/admin/users/abc/role", {"role": "manager"}, 404, "there is nothing at /admin/users/abc/role"),
        ("/admin/users/{ann}/role", {"role": "superuser"}, 422, "ann: role must be one of"),
        ("/admin/users/{ann}/role", {}, 422, "ann: nothing to change"),
        ("/admin/users/{ann}/active", {"is_active": "perhaps"}, 422, "ann: is_active must be true or false"),
        ("/admin/users/{ann}/password", {"password": "            "}, 422, "ann: a password cannot be only spaces"),
    ],
)
def test_bad_changes_get_a_clear_4xx_and_change_nothing(client, session_factory, admin, path, form, status, message) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    response = client.post(path.format(ann=ann.id), data={"csrf_token": admin, **form})
    assert response.status_code == status
    assert message in html.unescape(response.text)
    ann = _user(session_factory, "ann")
    assert ann.role == Role.labeler and ann.is_active  # type: ignore[union-attr]


def _confirm_card(page: str) -> str:
    return page.split('id="confirm-change"', 1)[1].split("</section>", 1)[0]


def test_making_an_admin_on_the_page_asks_for_your_own_password(client, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    """Without JavaScript (whose dialog asks before posting) the page asks, and posts again."""
    ann = make_user(session_factory, "ann", "labeler").id
    asked = client.post(f"/admin/users/{ann}/role", data={"csrf_token": admin, "role": "admin"})
    assert asked.status_code == 403
    card = html.unescape(_confirm_card(asked.text))
    assert "making ann an admin asks for your own password" in card
    assert f'action="/admin/users/{ann}/role"' in card and '<input type="hidden" name="role" value="admin">' in card
    assert 'name="your_password"' in card and 'name="password"' not in card
    assert _user(session_factory, "ann").role == Role.labeler  # type: ignore[union-attr]

    wrong = client.post(f"/admin/users/{ann}/role", data={"csrf_token": admin, "role": "admin", "your_password": "nope"})
    assert wrong.status_code == 403 and "Is not your password" in _confirm_card(wrong.text)
    assert _user(session_factory, "ann").role == Role.labeler  # type: ignore[union-attr]
    done = client.post(f"/admin/users/{ann}/role", data={"csrf_token": admin, "role": "admin", "your_password": PASSWORD},
                       follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/admin/users?role_set={ann}"
    assert _user(session_factory, "ann").role == Role.admin  # type: ignore[union-attr]


def test_a_password_waiting_for_yours_is_typed_again_not_written_into_the_page(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    ada = make_user(session_factory, "ada", "admin").id
    new = "ada's brand new password"
    asked = client.post(f"/admin/users/{ada}/password", data={"csrf_token": admin, "password": new})
    assert asked.status_code == 403
    card = html.unescape(_confirm_card(asked.text))
    assert "changing ada, an admin, asks for your own password" in card
    assert "New password for ada" in card and new not in asked.text
    created = client.post("/admin/users", data={"csrf_token": admin, "username": "eve", "role": "admin", "password": new})
    assert created.status_code == 403 and new not in created.text
    card = html.unescape(_confirm_card(created.text))
    assert "creating eve, an admin, asks for your own password" in card and "Password for eve" in card
    assert '<input type="hidden" name="username" value="eve">' in card and _user(session_factory, "eve") is None

    done = client.post(f"/admin/users/{ada}/password", data={"csrf_token": admin, "password": new, "your_password": PASSWORD},
                       follow_redirects=False)
    assert done.status_code == 303
    with TestClient(app) as ada_client:
        assert ada_client.post("/api/v1/auth/tokens", json={"username": "ada", "password": new}).status_code == 201
    # Deactivating another admin asks too; a labeler's row asks nothing.
    assert client.post(f"/admin/users/{ada}/active", data={"csrf_token": admin, "is_active": "false"}).status_code == 403
    assert _user(session_factory, "ada").is_active  # type: ignore[union-attr]
    ann = make_user(session_factory, "ann", "labeler").id
    assert client.post(f"/admin/users/{ann}/active", data={"csrf_token": admin, "is_active": "false"},
                       follow_redirects=False).status_code == 303


def _generated_password(page: str, username: str) -> str:
    row = page.split('<section class="card form-card created-accounts"', 1)[1].split(f"<td>{username}</td>", 1)[1]
    return row.split('<td class="mono">', 1)[1].split("<", 1)[0]


def test_a_new_user_left_without_a_password_gets_one_generated_and_shown_once(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    made = client.post("/admin/users", data={"csrf_token": admin, "username": "lou", "role": "labeler", "password": "",
                                             "must_change_password": "on"})
    assert made.status_code == 201, made.text
    assert "1 user created" in made.text and "Give them their password privately" in made.text and "loses it (" in made.text
    password = _generated_password(made.text, "lou")
    assert len(password) == 17 and password.count("-") == 2
    lou = _user(session_factory, "lou")
    assert lou is not None and lou.must_change_password
    with TestClient(app) as other:
        assert other.post("/api/v1/auth/tokens", json={"username": "lou", "password": password}).status_code == 201
    # Shown on that answer alone: the list shows it no more.
    assert password not in client.get("/admin/users").text


def test_an_admin_left_without_a_password_is_confirmed_before_one_is_generated(client, app, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    asked = client.post("/admin/users", data={"csrf_token": admin, "username": "eve", "role": "admin"})
    assert asked.status_code == 403 and _user(session_factory, "eve") is None
    card = html.unescape(_confirm_card(asked.text))
    # Nothing to type again: the password is made when the confirmed form comes back.
    assert "creating eve, an admin, asks for your own password" in card and 'name="password"' not in card
    done = client.post("/admin/users", data={"csrf_token": admin, "username": "eve", "role": "admin",
                                             "must_change_password": "true", "your_password": PASSWORD})
    assert done.status_code == 201, done.text
    password = _generated_password(done.text, "eve")
    with TestClient(app) as other:
        assert other.post("/api/v1/auth/tokens", json={"username": "eve", "password": password}).status_code == 201


def test_users_are_listed_by_name_in_any_case(client, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    for name in ("bob", "FINN", "Alice", "carl"):
        make_user(session_factory, name, "labeler")
    # Names are one name in any case elsewhere (logins, new names): the database's own order put
    # every capital first, Alice and FINN before bob, on the page and in `stepwise users list`.
    page = client.get("/admin/users").text
    assert re.findall(r'<td class="username"><strong>([^<]+)</strong>', page) == ["Alice", "bob", "boss", "carl", "FINN"]
    assert [u["username"] for u in client.get("/api/v1/users").json()] == ["Alice", "bob", "boss", "carl", "FINN"]
