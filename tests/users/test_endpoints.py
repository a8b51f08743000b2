"""The users API: admins only, bad input refused with a clear 4xx."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.errors import Conflict
from app.models import Assignment, AssignmentStatus, LoginFailure, LoginKeyKind, Role, User
from app.users import service
from app.users.schemas import UserUpdate
from tests.conftest import PASSWORD, add_solutions, api_headers, make_project, make_user


@pytest.fixture
def headers(client, session_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    return api_headers(client, "boss")


def test_an_admin_creates_lists_and_updates_users(client, headers) -> None:  # type: ignore[no-untyped-def]
    created = client.post("/api/v1/users", headers=headers, json={"username": "ann", "role": "labeler", "password": PASSWORD})
    assert created.status_code == 201
    body = created.json()
    # Nothing of the password itself: its one word in the answer is whether they must replace it.
    assert body["role"] == "labeler" and body["must_change_password"] is False
    assert "password" not in str({k: v for k, v in body.items() if k != "must_change_password"}).lower()
    assert PASSWORD not in created.text and "argon2" not in created.text
    changed = client.patch(f"/api/v1/users/{body['id']}", headers=headers, json={"role": "manager"})
    assert changed.status_code == 200 and changed.json()["role"] == "manager"
    assert [u["username"] for u in client.get("/api/v1/users", headers=headers).json()] == ["ann", "boss"]
    one = client.get(f"/api/v1/users/{body['id']}", headers=headers)
    assert one.status_code == 200 and one.json() == changed.json()
    assert client.get("/api/v1/users/9999", headers=headers).status_code == 404
    ann = api_headers(client, "ann")
    assert client.get(f"/api/v1/users/{body['id']}", headers=ann).status_code == 403


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"username": "a", "role": "labeler", "password": PASSWORD}, "username"),
        ({"username": "ann", "role": "king", "password": PASSWORD}, "role"),
        ({"username": "ann", "role": "labeler", "password": "short"}, "password"),
        ({"username": "ann", "role": "labeler", "password": PASSWORD, "is_admin": True}, "is_admin"),
    ],
)
def test_invalid_new_users_get_422(client, headers, body, field) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/api/v1/users", headers=headers, json=body)
    assert response.status_code == 422
    assert field in {e["field"] for e in response.json()["errors"]}
    assert len(client.get("/api/v1/users", headers=headers).json()) == 1


def test_a_password_within_a_million_guesses_is_refused_everywhere_it_is_chosen(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    for password, why in (("password1", "this is a very common password"), ("12345678", "top-10 common password"),
                          ("qwertyuiop", "common password"), ("iloveyou", "common password")):
        made = client.post("/api/v1/users", headers=headers, json={"username": "ann", "role": "labeler", "password": password})
        assert made.status_code == 422, password
        (error,) = made.json()["errors"]
        assert error["field"] == "password" and error["message"].startswith("is too easy to guess") and why in error["message"]
    # The account's own name is the first guess: refused as a password for it, fine for another.
    named = {"role": "labeler", "password": "lena-beaumont"}
    assert client.post("/api/v1/users", headers=headers, json={**named, "username": "lena-beaumont"}).status_code == 422
    assert client.post("/api/v1/users", headers=headers, json={**named, "username": "ann"}).status_code == 201
    with session_scope(session_factory) as session:
        ann = session.scalar(select(User.id).where(User.username == "ann"))
    assert client.patch(f"/api/v1/users/{ann}", headers=headers, json={"password": "password1"}).status_code == 422
    token = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": "lena-beaumont"}).json()["token"]
    own = client.post("/api/v1/users/me/password", headers={"Authorization": f"Bearer {token}"},
                      json={"current_password": "lena-beaumont", "new_password": "letmein1"})
    assert own.status_code == 422 and own.json()["errors"][0]["field"] == "new_password"
    # A passphrase past zxcvbn's 72 characters is judged by its start, and passes.
    long = "otters wander past the lighthouse while seven kettles whistle in the fog at dawn"
    assert client.patch(f"/api/v1/users/{ann}", headers=headers, json={"password": long}).status_code == 200


def test_duplicate_and_unknown_users_get_409_and_404(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    duplicate = client.post("/api/v1/users", headers=headers, json={"username": "ann", "role": "admin", "password": PASSWORD,
                                                                        "your_password": PASSWORD})
    assert duplicate.status_code == 409
    same_but_case = client.post("/api/v1/users", headers=headers, json={"username": "Ann", "role": "labeler", "password": PASSWORD})
    assert same_but_case.status_code == 409
    assert same_but_case.json()["detail"] == "a user named 'ann' already exists; names may not differ only in case"
    assert [u["username"] for u in client.get("/api/v1/users", headers=headers).json()].count("Ann") == 0
    assert client.patch("/api/v1/users/999", headers=headers, json={"role": "admin"}).status_code == 404
    assert client.patch("/api/v1/users/x", headers=headers, json={"role": "admin"}).status_code == 422
    # Starlette's int path convertor would make this a 500 (int() refuses 4,301 digits).
    assert client.patch(f"/api/v1/users/{'9' * 5000}", headers=headers, json={"role": "admin"}).status_code == 422


@pytest.mark.parametrize("body", [{"username": "renamed"}, {"unknown": 1}, {"role": "manager", "labeler_uuid": "x"}])
def test_a_field_the_update_cannot_change_is_refused_by_name(client, session_factory, headers, body) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    before = client.get("/api/v1/users", headers=headers).json()
    response = client.patch(f"/api/v1/users/{ann.id}", headers=headers, json=body)
    assert response.status_code == 422, response.text
    refused = list(body)[-1]
    assert [e["field"] for e in response.json()["errors"]] == [refused]
    assert f"{refused}: " in response.json()["detail"]
    assert client.get("/api/v1/users", headers=headers).json() == before


@pytest.mark.parametrize("body", [{}, {"role": None, "is_active": None, "password": None}])
def test_an_update_that_changes_nothing_is_refused(client, session_factory, headers, body) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    response = client.patch(f"/api/v1/users/{ann.id}", headers=headers, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == [
        {"field": "body", "message": "nothing to change: no new role, active flag, password or must_change_password was given"}]


def test_an_admin_may_send_their_own_unchanged_role_but_not_a_new_one(client, headers) -> None:  # type: ignore[no-untyped-def]
    me = client.get("/api/v1/users/me", headers=headers).json()
    same = client.patch(f"/api/v1/users/{me['id']}", headers=headers, json={"role": "admin", "is_active": True})
    assert same.status_code == 200 and same.json()["role"] == "admin"
    demoted = client.patch(f"/api/v1/users/{me['id']}", headers=headers, json={"role": "labeler"})
    assert demoted.status_code == 409 and "ask another admin" in demoted.json()["detail"]
    assert client.get("/api/v1/users/me", headers=headers).json()["role"] == "admin"


def _failures(session_factory, name: str) -> int:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalar(select(LoginFailure.failures).where(
            LoginFailure.kind == LoginKeyKind.username, LoginFailure.key == name)) or 0


def test_making_or_changing_an_admin_asks_for_your_own_password(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    """A session left open or a leaked token cannot make an admin, or take one over, alone."""
    new_admin = {"username": "ada", "role": "admin", "password": PASSWORD}
    asked = client.post("/api/v1/users", headers=headers, json=new_admin)
    assert asked.status_code == 403
    assert asked.json()["detail"] == "creating ada, an admin, asks for your own password: send it as your_password"
    wrong = client.post("/api/v1/users", headers=headers, json={**new_admin, "your_password": "not the password"})
    assert (wrong.status_code, wrong.json()["detail"]) == (403, "your_password is not your password")
    assert _failures(session_factory, "boss") == 1, "a wrong password counts as a failed login"
    assert [u["username"] for u in client.get("/api/v1/users", headers=headers).json()] == ["boss"]
    created = client.post("/api/v1/users", headers=headers, json={**new_admin, "your_password": PASSWORD})
    assert created.status_code == 201 and created.json()["role"] == "admin"
    ada = created.json()["id"]

    ann = make_user(session_factory, "ann", "labeler").id
    # Any other change of a labeler asks nothing; making them an admin does.
    assert client.patch(f"/api/v1/users/{ann}", headers=headers, json={"role": "manager"}).status_code == 200
    promote = client.patch(f"/api/v1/users/{ann}", headers=headers, json={"role": "admin"})
    assert (promote.status_code, promote.json()["detail"]) == (
        403, "making ann an admin asks for your own password: send it as your_password")
    # Every change of another admin asks: their password, their role, their active flag.
    for change in ({"password": "a new password for ada"}, {"role": "labeler"}, {"is_active": False}):
        refused = client.patch(f"/api/v1/users/{ada}", headers=headers, json=change)
        assert (refused.status_code, refused.json()["detail"]) == (
            403, "changing ada, an admin, asks for your own password: send it as your_password")
    assert client.get(f"/api/v1/users/{ada}", headers=headers).json()["role"] == "admin"
    assert client.get(f"/api/v1/users/{ann}", headers=headers).json()["role"] == "manager"
    assert api_headers(client, "ada"), "ada's password and standing are as they were"
    done = client.patch(f"/api/v1/users/{ada}", headers=headers, json={"is_active": False, "your_password": PASSWORD})
    assert done.status_code == 200 and not done.json()["is_active"]
    assert _failures(session_factory, "boss") == 0, "the right password clears the count, as a login does"


def test_wrong_passwords_for_admin_changes_lock_as_logins_do(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    body = {"username": "ada", "role": "admin", "password": PASSWORD, "your_password": "guess"}
    answers = [client.post("/api/v1/users", headers=headers, json=body).status_code for _ in range(11)]
    assert answers == [403] * 10 + [429]
    locked = client.post("/api/v1/users", headers=headers, json={**body, "your_password": PASSWORD})
    assert locked.status_code == 429 and "Retry-After" in locked.headers
    assert [u["username"] for u in client.get("/api/v1/users", headers=headers).json()] == ["boss"]


def test_a_user_made_an_admin_meanwhile_is_not_changed_without_your_password(session_factory) -> None:  # type: ignore[no-untyped-def]
    """The check before the change read the user as a labeler; another admin promoted them since:
    under the lock, the change is decided on the user as they are now."""
    boss = make_user(session_factory, "boss", "admin")
    ann = make_user(session_factory, "ann", "labeler")
    with session_scope(session_factory) as session:
        seen = session.get(User, ann.id)
        assert service.admin_powers_change(seen, None, by=boss) is None
        session.commit()  # as a request ends its reads (SQLite's transaction would hold the write lock)
        with session_scope(session_factory) as other:
            other.get(User, ann.id).role = Role.admin  # type: ignore[union-attr]
        with pytest.raises(Conflict, match="ann became an admin meanwhile"):
            service.update_user(session, seen, UserUpdate(password="a new password"), by=boss)


def test_deactivating_a_labeler_puts_their_tasks_back(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    # Held until their leases ran out (a day, at the longest lease), the tasks waited on someone
    # who could not come back.
    project = make_project(session_factory, lease_minutes=1440)
    add_solutions(session_factory, project, 2)
    ann = make_user(session_factory, "ann", "labeler")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(client, "ann")).json()["task"]
    assert task is not None
    done = client.patch(f"/api/v1/users/{ann.id}", headers=headers, json={"is_active": False})
    assert done.status_code == 200, done.text
    with session_scope(session_factory) as session:
        slots = session.execute(select(Assignment.status, Assignment.user_id)).all()
    assert sorted(slots) == [(AssignmentStatus.waiting, None)] * 2
