"""Next-task and submit check their caller inside their one transaction (app.db.in_transaction),
not through ApiUser: the same refusals must hold there."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.deps import CSRF_HEADER
from app.models import AuthSession, utcnow
from tests.conftest import api_headers, browser_login, make_project, make_user


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    return make_project(session_factory, "guarded")


def _submit_body() -> dict[str, object]:
    return {
        "ratings": [],
        "finish_reason": "give_up",
        "finish_note": "unreadable",
        "total_time_ms": 1000,
        "idempotency_key": uuid.uuid4().hex,
    }


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic bWF4OnB3"}, {"Authorization": "Bearer "}],
    ids=["none", "unknown-token", "basic", "empty-bearer"],
)
def test_callers_without_good_credentials_get_401(client, project, headers) -> None:  # type: ignore[no-untyped-def]
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).status_code == 401
    submit = client.post("/api/v1/assignments/1/submit", headers=headers, json=_submit_body())
    assert submit.status_code == 401


def test_a_caller_with_no_credentials_is_refused_before_the_body_is_judged(client) -> None:  # type: ignore[no-untyped-def]
    # Credentials that are sent but wrong are looked up in the transaction, after the body is
    # read: the schema the body breaks is public anyway.
    assert client.post("/api/v1/assignments/1/submit", json={"no": 1}).status_code == 401


def test_a_deactivated_labelers_token_is_refused(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    ann = make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).status_code == 200
    admin = api_headers(client, "boss")
    assert client.patch(f"/api/v1/users/{ann.id}", headers=admin, json={"is_active": False}).status_code == 200
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).status_code == 401


def test_a_revoked_token_is_refused(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    assert client.delete("/api/v1/auth/tokens/current", headers=headers).status_code == 204
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).status_code == 401


def test_an_expired_browser_session_is_refused(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "ann")
    with session_factory() as session:
        session.execute(update(AuthSession).values(expires_at=utcnow() - timedelta(minutes=1)))
        session.commit()
    url = f"/api/v1/projects/{project.id}/tasks/next"
    assert client.post(url, headers={CSRF_HEADER: csrf}).status_code == 401


def test_a_browser_session_needs_the_csrf_header(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "ann")
    url = f"/api/v1/projects/{project.id}/tasks/next"
    assert client.post(url).status_code == 403
    assert client.post(url, headers={CSRF_HEADER: "wrong"}).status_code == 403
    assert client.post(url, headers={CSRF_HEADER: csrf}).status_code == 200
    submit = client.post("/api/v1/assignments/1/submit", json=_submit_body())
    assert submit.status_code == 403
