"""A database that drops out (a restart, a failover) gets a 503 to retry, never a 500."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.deps import SESSION_COOKIE
from app.main import create_app
from tests.conftest import PASSWORD, api_headers, make_user
from tests.imports.test_cli import fresh_database  # noqa: F401  (a fixture: an empty database per backend)

# Port 1 on loopback: the connection is refused at once, as while PostgreSQL restarts.
UNREACHABLE = "postgresql://stepwise:hunter2secret@127.0.0.1:1/none"


def test_an_api_call_while_the_database_is_down_is_a_503_to_retry() -> None:
    with TestClient(create_app(Settings(database_url=UNREACHABLE, STEPWISE_ENV="test"))) as client:
        response = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD, "name": "x"})
    assert response.status_code == 503
    assert response.headers["Retry-After"].isdigit()
    assert response.json()["detail"].startswith("the database is not available")
    assert "hunter2secret" not in response.text


def test_metrics_while_the_database_is_down_keep_the_processs_counters() -> None:
    # A scrape answered with an error page lost every counter, the 5xx an alert watches included.
    settings = Settings(database_url=UNREACHABLE, STEPWISE_ENV="test", STEPWISE_METRICS_TOKEN="scrape-me")
    with TestClient(create_app(settings)) as client:
        client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD, "name": "x"})
        response = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert "stepwise_database_up 0.0" in response.text and 'status="503"' in response.text
    assert "stepwise_queue_waiting_slots" not in response.text


def test_an_unreadable_body_while_the_database_is_down_is_still_named() -> None:
    # Who is calling cannot be asked: the body's own fault is answered, not a 500.
    with TestClient(create_app(Settings(database_url=UNREACHABLE, STEPWISE_ENV="test"))) as client:
        response = client.patch("/api/v1/projects/1", content="{broken", headers={
            "content-type": "application/json", "authorization": "Bearer some-token"})
    assert response.status_code == 422 and "not valid JSON" in response.json()["detail"]


def test_an_unreadable_page_form_while_the_database_is_down_is_no_500() -> None:
    with TestClient(create_app(Settings(database_url=UNREACHABLE, STEPWISE_ENV="test"))) as client:
        client.cookies.set(SESSION_COOKIE, "a-session")
        # A multipart body without its parts: the form cannot be parsed (FastAPI's 400).
        response = client.post("/manage/projects/1/settings", content=b"garbage",
                               headers={"content-type": "multipart/form-data; boundary=x"})
    assert response.status_code == 400, response.text


def test_a_page_while_the_database_is_down_is_a_503_page() -> None:
    with TestClient(create_app(Settings(database_url=UNREACHABLE, STEPWISE_ENV="test"))) as client:
        # A session cookie is looked up in the database before any page is drawn.
        client.cookies.set(SESSION_COOKIE, "a-session")
        response = client.get("/")
    assert response.status_code == 503
    assert "the database is not available" in response.text


@pytest.mark.parametrize("backend", ["postgresql"])
def test_connections_the_database_dropped_are_replaced_unnoticed(database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    # What a PostgreSQL restart leaves in every worker's pool: connections closed at the far end.
    make_user(session_factory, "ann", "labeler")
    with TestClient(create_app(Settings(database_url=database_url, STEPWISE_ENV="test"))) as client:
        headers = api_headers(client, "ann")
        assert client.get("/api/v1/users/me", headers=headers).status_code == 200
        with psycopg.connect(database_url, autocommit=True) as admin:
            dropped = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]  # type: ignore[index]
        assert dropped > 0
        assert client.get("/api/v1/users/me", headers=headers).status_code == 200


def test_a_database_without_the_schema_says_what_to_run(fresh_database: str) -> None:
    # Retrying cannot help here: the answer names the command, as /readyz does. Before, the API
    # said to retry in a few seconds (SQLite), or failed with a 500 (PostgreSQL).
    if fresh_database.startswith("sqlite"):
        Path(fresh_database.removeprefix("sqlite:///")).touch()
    with TestClient(create_app(Settings(database_url=fresh_database, STEPWISE_ENV="test"))) as client:
        response = client.post("/api/v1/auth/tokens", json={"username": "ann", "password": PASSWORD, "name": "x"})
        client.cookies.set(SESSION_COOKIE, "a-session")
        page = client.get("/")
    assert response.status_code == 503
    assert response.json()["detail"] == "the database has no schema: run `stepwise db upgrade`"
    assert "Retry-After" not in response.headers
    assert page.status_code == 503 and "the database has no schema: run `stepwise db upgrade`" in page.text


def test_only_a_missing_table_or_column_asks_about_the_schema() -> None:
    # Asking opens a connection: after a lock timeout or an outage it would wait as long again.
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from app.main import _missing_schema

    def error(kind, message: str, sqlstate: str | None = None):  # type: ignore[no-untyped-def]
        orig = type("DriverError", (Exception,), {"sqlstate": sqlstate})(message)
        return kind("SELECT 1", {}, orig)

    assert _missing_schema(error(OperationalError, "no such table: users"))
    assert _missing_schema(error(ProgrammingError, 'relation "users" does not exist', "42P01"))
    assert _missing_schema(error(ProgrammingError, 'column "separator" does not exist', "42703"))
    assert not _missing_schema(error(OperationalError, "database is locked"))
    assert not _missing_schema(error(OperationalError, "connection refused", "08006"))
