"""Shared fixtures: a real, migrated database per backend, an app, and builders.

Each backend's database is made once per test session and migrated with Alembic (so the
migrations are tested too); every table is emptied after each test, which keeps tests isolated
while still letting them commit, as concurrent-labeler tests must.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import create_db_engine, create_session_factory, session_scope
from app.labeling.queue import add_slots
from app.main import create_app
from app.migrate import upgrade
from app.models import Base, Problem, Project, Role, Solution, User
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from app.users.schemas import UserCreate
from app.users.service import create_user

POSTGRES_ADMIN_URL = os.environ.get(
    "STEPWISE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
PASSWORD = "correct horse battery"

# Every test, and the browser tests' server process, share one database per backend. A round
# worker thread in any app (the embedded default on SQLite) would claim rounds that other tests
# drive, the kill tests' rounds included; rounds run only where a test starts them.
os.environ["STEPWISE_LOCAL_WORKER"] = "false"


def _postgres_database() -> Iterator[str]:
    name = f"stepwise_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgresql_url() -> Iterator[str]:
    yield from _postgres_database()


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'stepwise.db'}"


@pytest.fixture(scope="session")
def migrated(request: pytest.FixtureRequest) -> dict[str, str]:
    """Backend name -> URL of a database migrated to head, made on first use."""
    return {}


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def database_url(backend: str, migrated: dict[str, str], request: pytest.FixtureRequest) -> str:
    if backend not in migrated:
        url = request.getfixturevalue(f"{backend}_url")
        upgrade(url)
        migrated[backend] = url
    return migrated[backend]


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, STEPWISE_ENV="test")


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = create_db_engine(settings)
    yield engine
    _empty_tables(engine)
    engine.dispose()


def _empty_tables(engine: Engine) -> None:
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                connection.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def session_factory(engine: Engine) -> sessionmaker[Session]:
    return create_session_factory(engine)


@pytest.fixture
def db(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session for arranging and checking; commit it to make rows visible to the app."""
    session = session_factory()
    yield session
    session.rollback()
    session.close()


@pytest.fixture
def app(settings: Settings, engine: Engine):  # type: ignore[no-untyped-def]
    app = create_app(settings)
    yield app
    app.state.engine.dispose()


@pytest.fixture
def client(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(app) as test_client:
        yield test_client


def make_user(factory: sessionmaker[Session], username: str, role: Role | str) -> User:
    with session_scope(factory) as session:
        return create_user(
            session, UserCreate(username=username, role=Role(role), password=PASSWORD)
        )


def make_project(factory: sessionmaker[Session], name: str = "algebra", **settings: object) -> Project:
    with session_scope(factory) as session:
        return create_project(session, ProjectCreate(name=name, **settings))  # type: ignore[arg-type]


def add_solutions(
    factory: sessionmaker[Session], project: Project, n: int, steps: int = 3, priority: float | None = None
) -> list[int]:
    """`n` solutions of one problem, with their slots; priority rises with the index unless one
    `priority` is given for all."""
    with session_scope(factory) as session:
        problem = Problem(project_id=project.id, statement="What is 1+1?", answer="2", content_hash="p1")
        session.add(problem)
        session.flush()
        ids = []
        for i in range(n):
            solution = Solution(
                project_id=project.id,
                problem_id=problem.id,
                steps=[f"step {j} of {i}" for j in range(steps)],
                priority=float(i) if priority is None else priority,
                content_hash=f"s{i}",
            )
            session.add(solution)
            session.flush()
            ids.append(solution.id)
        add_slots(session, project, [(i, float(k) if priority is None else priority, None) for k, i in enumerate(ids)])
    return ids


def add_many_solutions(factory: sessionmaker[Session], project_id: int, n: int, *, queued: bool = False) -> None:
    """`n` one-step solutions of a new problem, each with a waiting slot at priority -1 if
    `queued`, written by SQL, then ANALYZE: tables of production size, whose statistics say so."""
    with session_scope(factory) as session:
        problem_id = session.scalar(
            text(
                "INSERT INTO problems (project_id, statement, content_hash, is_demo, created_at) "
                "VALUES (:project, 'filler', 'filler-' || :project, false, now()) RETURNING id"
            ),
            {"project": project_id},
        )
        session.execute(
            text(
                "INSERT INTO solutions (project_id, problem_id, steps, steps_source, answer_grade, "
                "origin, priority, content_hash, is_demo, created_at) "
                "SELECT :project, :problem, '[\"x\"]', 'given', 'ungraded', '{}', -1, 'filler-' || n, "
                "false, now() FROM generate_series(1, :n) AS n"
            ),
            {"project": project_id, "problem": problem_id, "n": n},
        )
        if queued:
            session.execute(
                text(
                    "INSERT INTO assignments (project_id, solution_id, slot, priority, status) "
                    "SELECT project_id, id, 0, priority, 'waiting' FROM solutions WHERE problem_id = :problem"
                ),
                {"problem": problem_id},
            )
        session.execute(text("ANALYZE"))


def prepared_plans(session: Session, starts: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """(generic plans, custom plans) of each statement prepared on the session's connection, by
    name, for the statements whose SQL begins as `starts` says (spaces and line breaks aside).
    A name none matches fails the test."""
    rows = session.execute(text("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")).all()
    plans = {
        name: [(r.generic_plans, r.custom_plans) for r in rows if " ".join(r.statement.split()).startswith(start)]
        for name, start in starts.items()
    }
    unprepared = [name for name, found in plans.items() if not found]
    assert not unprepared, f"never prepared: {', '.join(unprepared)}"
    return plans


def api_headers(client: TestClient, username: str) -> dict[str, str]:
    response = client.post(
        "/api/v1/auth/tokens", json={"username": username, "password": PASSWORD}
    )
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def browser_login(client: TestClient, username: str) -> str:
    """Log the test client in through the login form; returns the session's CSRF token."""
    page = client.get("/login")
    token = page.text.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
    response = client.post(
        "/login",
        data={"username": username, "password": PASSWORD, "login_csrf": token},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    home = client.get("/label/stats")
    return home.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


def process_alive(pid: int) -> bool:
    """Whether a process still runs; a zombie has exited and waits only to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")
