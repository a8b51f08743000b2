"""Bearer tokens for the JSON API and scripts."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, text, update

from app.auth.security import token_digest
from app.db import session_scope
from app.models import ApiToken, AuditEvent, User, utcnow
from tests.cli.conftest import refused, stepwise  # noqa: F401 (a fixture)
from tests.conftest import PASSWORD, api_headers, browser_login, make_project, make_user


def test_a_bearer_token_works_and_only_its_hash_is_stored(client, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    me = client.get("/api/v1/users/me", headers=headers)
    assert me.status_code == 200 and me.json()["username"] == "max"
    # No CSRF header needed: a bearer token is never sent by a browser on its own.
    created = client.post("/api/v1/projects", headers=headers, json={"name": "algebra"})
    assert created.status_code == 201
    token = headers["Authorization"].split(" ", 1)[1]
    assert list(db.scalars(select(ApiToken.token_hash))) == [token_digest(token)]


def test_a_revoked_token_is_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    other = api_headers(client, "max")
    assert client.delete("/api/v1/auth/tokens/current", headers=headers).status_code == 204
    refused = client.get("/api/v1/users/me", headers=headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert client.delete("/api/v1/auth/tokens/current", headers=headers).status_code == 401
    assert client.get("/api/v1/users/me", headers=other).status_code == 200, "only that token ends"


@pytest.mark.parametrize(
    "header", ["Bearer not-a-token", "Basic bWF4OnB3", "Bearer", "Bearer "]
)
def test_bad_authorization_headers_get_401(client, session_factory, header: str) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    response = client.get("/api/v1/users/me", headers={"Authorization": header})
    assert response.status_code == 401
    assert "detail" in response.json()


def test_no_credentials_get_401_from_the_api(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/v1/projects").status_code == 401


def test_a_deactivated_users_token_is_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "max", "manager")
    admin = api_headers(client, "boss")
    headers = api_headers(client, "max")
    max_id = client.get("/api/v1/users/me", headers=headers).json()["id"]
    assert client.patch(f"/api/v1/users/{max_id}", headers=admin, json={"is_active": False}).status_code == 200
    assert client.get("/api/v1/users/me", headers=headers).status_code == 401


def _token_row(factory, token_id: int) -> ApiToken:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.get(ApiToken, token_id)


def test_a_user_lists_their_tokens_and_revokes_one_by_its_id(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "ann", "labeler")
    made = client.post("/api/v1/auth/tokens", json={"username": "max", "password": PASSWORD, "name": "notebook",
                                                    "expires_in_days": 30})
    assert made.status_code == 201
    notebook = made.json()
    assert notebook["expires_at"] is not None
    assert timedelta(days=29) < datetime.fromisoformat(notebook["expires_at"]) - utcnow() <= timedelta(days=30)
    headers = api_headers(client, "max")
    listed = client.get("/api/v1/auth/tokens", headers=headers).json()
    assert [(t["name"], t["current"], t["expired"]) for t in listed] == [("api", True, False), ("notebook", False, False)]
    assert "token" not in listed[0] and listed[1]["last_used_at"] is None
    # Another's token is not yours to revoke, nor said to exist.
    ann = api_headers(client, "ann")
    assert client.delete(f"/api/v1/auth/tokens/{notebook['id']}", headers=ann).status_code == 404
    assert client.delete(f"/api/v1/auth/tokens/{notebook['id']}", headers=headers).status_code == 204
    assert client.get("/api/v1/users/me", headers={"Authorization": f"Bearer {notebook['token']}"}).status_code == 401
    assert [t["name"] for t in client.get("/api/v1/auth/tokens", headers=headers).json()] == ["api"]
    assert client.delete(f"/api/v1/auth/tokens/{notebook['id']}", headers=headers).status_code == 404
    with session_scope(session_factory) as session:
        trail = [(e.actor, e.action, e.details["token"]) for e in session.scalars(
            select(AuditEvent).where(AuditEvent.action.startswith("token.")).order_by(AuditEvent.id))]
    assert trail[0] == ("max", "token.created", notebook["id"]) and trail[-1] == ("max", "token.revoked", notebook["id"])


@pytest.mark.parametrize("days", [0, -1, 3651, "soon", 1.5])
def test_a_bad_expiry_is_refused_and_makes_no_token(client, session_factory, days) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    response = client.post("/api/v1/auth/tokens", json={"username": "max", "password": PASSWORD, "expires_in_days": days})
    assert response.status_code == 422 and "expires_in_days" in response.text
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(ApiToken)) == 0


def test_an_expired_token_is_refused_and_listed_as_expired(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    made = client.post("/api/v1/auth/tokens", json={"username": "max", "password": PASSWORD, "expires_in_days": 1}).json()
    old = {"Authorization": f"Bearer {made['token']}"}
    assert client.get("/api/v1/users/me", headers=old).status_code == 200
    with session_scope(session_factory) as session:
        session.execute(update(ApiToken).where(ApiToken.id == made["id"]).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.get("/api/v1/users/me", headers=old).status_code == 401
    # The labeling hot path reads its caller another way: refused there too.
    assert client.post("/api/v1/projects/1/tasks/next", headers=old).status_code == 401
    listed = client.get("/api/v1/auth/tokens", headers=api_headers(client, "max")).json()
    assert [(t["id"], t["expired"]) for t in listed if t["id"] == made["id"]] == [(made["id"], True)]


def test_a_tokens_last_use_is_kept_to_the_minute(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "max")
    token_id = client.get("/api/v1/auth/tokens", headers=headers).json()[0]["id"]
    first = _token_row(session_factory, token_id).last_used_at
    assert first is not None and utcnow() - first < timedelta(minutes=1)
    # Within the minute a request writes nothing; past it, the next one writes it again.
    with session_scope(session_factory) as session:
        session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=utcnow() - timedelta(seconds=30)))
    client.get("/api/v1/users/me", headers=headers)
    assert utcnow() - _token_row(session_factory, token_id).last_used_at >= timedelta(seconds=29)
    project = make_project(session_factory, "algebra")
    labeler = api_headers(client, "ann")
    ann_token = client.get("/api/v1/auth/tokens", headers=labeler).json()[0]["id"]
    with session_scope(session_factory) as session:
        session.execute(update(ApiToken).where(ApiToken.id.in_([token_id, ann_token]))
                        .values(last_used_at=utcnow() - timedelta(minutes=5)))
    assert client.get("/api/v1/users/me", headers=headers).status_code == 200
    # The labeling hot path reads its caller as a plain row: it keeps the last use too.
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=labeler).status_code == 200
    for used in (token_id, ann_token):
        assert utcnow() - _token_row(session_factory, used).last_used_at < timedelta(seconds=5)


def test_a_request_does_not_wait_on_another_holding_its_tokens_row(client, session_factory, backend) -> None:  # type: ignore[no-untyped-def]
    if backend != "postgresql":
        pytest.skip("SQLite's transactions take the one write lock in turn; there is no row to hold")
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    token_id = client.get("/api/v1/auth/tokens", headers=headers).json()[0]["id"]
    # A long import under the same token holds the row it wrote its last use to.
    with session_factory() as holder:
        holder.execute(update(ApiToken).where(ApiToken.id == token_id)
                       .values(last_used_at=utcnow() - timedelta(minutes=5)))
        holder.commit()
        holder.execute(update(ApiToken).where(ApiToken.id == token_id).values(name="held"))
        answered: list[int] = []
        asking = threading.Thread(target=lambda: answered.append(client.get("/api/v1/users/me", headers=headers).status_code))
        asking.start()
        asking.join(timeout=15)
        waited = asking.is_alive()
        holder.rollback()
    asking.join()
    assert not waited and answered == [200]


def test_a_long_request_under_a_token_does_not_hold_up_its_revocation(client, session_factory, backend) -> None:  # type: ignore[no-untyped-def]
    if backend != "postgresql":
        pytest.skip("SQLite's transactions take the one write lock in turn; there is no row to hold")
    from app.auth.service import principal_from_bearer, revoke_own_token

    make_user(session_factory, "max", "manager")
    made = client.post("/api/v1/auth/tokens", json={"username": "max", "password": PASSWORD}).json()
    # A request (a long import, say) reads its caller and goes on in its transaction.
    with session_factory() as request:
        caller = principal_from_bearer(request, made["token"])
        assert caller is not None
        with session_factory() as admin:
            admin.execute(text("SET LOCAL lock_timeout = '3s'"))
            revoke_own_token(admin, admin.get(type(caller.user), caller.user.id), made["id"])
            admin.commit()
        request.rollback()
    # Its last use was written in a transaction of its own, kept though the request's was not.
    assert utcnow() - _token_row(session_factory, made["id"]).last_used_at < timedelta(seconds=10)


def test_a_site_caps_how_long_a_token_lasts(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    client.app.state.settings = client.app.state.settings.model_copy(update={"token_max_days": 30})
    ask = {"username": "max", "password": PASSWORD}
    unasked = client.post("/api/v1/auth/tokens", json=ask)
    assert unasked.status_code == 201
    lasts = datetime.fromisoformat(unasked.json()["expires_at"]) - utcnow()
    assert timedelta(days=29, hours=23) < lasts <= timedelta(days=30), "no expiry asked for: the cap"
    shorter = client.post("/api/v1/auth/tokens", json={**ask, "expires_in_days": 7})
    assert datetime.fromisoformat(shorter.json()["expires_at"]) - utcnow() <= timedelta(days=7)
    longer = client.post("/api/v1/auth/tokens", json={**ask, "expires_in_days": 31})
    assert longer.status_code == 422
    assert longer.json()["detail"] == "tokens last at most 30 days here (STEPWISE_TOKEN_MAX_DAYS): ask for 30 or fewer"
    assert longer.json()["errors"] == [{"field": "expires_in_days", "message": "must be at most 30"}]
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(ApiToken)) == 2

    # The account page offers no expiry past the cap, and "never" is the cap.
    browser_login(client, "max")
    page = client.get("/account").text
    assert "In 30 days (the limit)" in page and "Never" not in page
    assert '<option value="90"' not in page and '<option value="30"' in page


def test_nobody_makes_a_token_for_a_user_who_must_still_choose_their_password(stepwise, database_url, client, session_factory) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    make_user(session_factory, "ann", "labeler")
    with session_scope(session_factory) as session:
        session.scalars(select(User).where(User.username == "ann")).one().must_change_password = True
    # A token's one use until then is POST /users/me/password: one made at the command line
    # would let whoever holds it choose ann's password for her, and keep the login it ends.
    result = stepwise(database_url, "tokens", "create", "--username", "ann")
    refused(result, "ann must still choose their own password", "make it once they have logged in and chosen one")
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(ApiToken)) == 0
        assert session.scalar(select(func.count()).select_from(AuditEvent)
                              .where(AuditEvent.action == "token.created")) == 0
    # Her own, traded for the password she was given, is how an API-only user gets to choose one.
    own = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD})
    assert own.status_code == 201
