"""What a PostgreSQL worker's sweep clears away after a worker killed in a round that was then
cancelled: the job left `doing`, the dead worker's row in the queue, the unfinished checkpoint."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Project, Round, RoundStage, utcnow
from app.rounds.config import get_worker_settings
from app.rounds.jobs import defer_round, sender
from app.rounds.service import cancel_round, start_round
from tests.conftest import make_project
from tests.rounds.test_worker import run_worker, worker_env


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_new_worker_ends_what_a_dead_one_left_of_a_cancelled_round(
    session_factory: sessionmaker[Session], database_url: str, backend: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEPWISE_MODELS_DIR", str(tmp_path))
    get_worker_settings.cache_clear()
    project = make_project(session_factory, "killed")
    with session_scope(session_factory) as session:
        round_ = start_round(session, session.get(Project, project.id))
        round_id, number = round_.id, round_.number
    # The dead worker: it took the round's job, began training, and was killed (its last beat
    # an hour ago); the round was cancelled after.
    defer_round(sender(database_url), round_id)
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("SET search_path TO procrastinate")
        dead = connection.execute("INSERT INTO procrastinate_workers (last_heartbeat) "
                                  "VALUES (now() - interval '1 hour') RETURNING id").fetchone()[0]
        connection.execute("UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s", (dead,))
    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(
            status="running", stage=RoundStage.train, lease_owner="dead", lease_expires_at=utcnow()))
    with session_scope(session_factory) as session:
        cancel_round(session.get(Round, round_id))
        session.get(Round, round_id).finished_at = utcnow() - timedelta(hours=1)
    partial = tmp_path / f"project-{project.id}" / f"round-{number}.partial"
    partial.mkdir(parents=True)
    (partial / "snapshot.pt").write_bytes(b"...")

    # A process of its own, as `stepwise worker --once` runs: in this one an earlier test may
    # leave an event loop running, where the worker's asyncio.run refuses to start.
    get_worker_settings.cache_clear()
    rc, log = run_worker(worker_env(database_url, tmp_path), tmp_path / "sweep.log", timeout=120)
    assert rc == 0, log

    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("SET search_path TO procrastinate")
        jobs = connection.execute("SELECT status, args FROM procrastinate_jobs").fetchall()
        workers = connection.execute("SELECT id FROM procrastinate_workers").fetchall()
        # The queue is no table the other tests empty.
        connection.execute("DELETE FROM procrastinate_jobs")
    assert jobs == [("failed", {"round_id": round_id})]
    assert (dead,) not in workers
    assert not partial.exists()
