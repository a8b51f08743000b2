"""Bearer tokens for the JSON API and scripts."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.auth.security import token_digest
from app.models import ApiToken
from tests.conftest import api_headers, make_user


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
