"""A real `stepwise worker` process, killed with SIGKILL at every stage of a round, then restarted.

The worker kills itself at named failpoints (app.rounds.failpoints) placed where dying hurts
most: after a stage's work, before the transaction that records it. After each death the
served model must be what it was, the queue must hold no slot twice, and the next worker must
continue the round to its end. A last test kills the worker from outside, mid-training.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Assignment, ModelVersion, Project, Round, RoundPick, RoundStage, RoundStatus, utcnow
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import served_version, start_round, update_round_settings
from app.rounds.worker import log_failed_sweep
from tests.rounds.conftest import kill_marked_processes, synthetic_project

pytestmark = pytest.mark.slow

STEPWISE = str(Path(sys.executable).with_name("stepwise"))
LEASE_S = 2
RUN = uuid.uuid4().hex
ORDER = list(RoundStage)
# (failpoint, the stage the round must still be at after dying there)
CRASHES = [
    ("snapshot.taken", RoundStage.snapshot),
    ("train.saved", RoundStage.train),
    ("evaluate.measured", RoundStage.evaluate),
    ("promote.decided", RoundStage.promote),
    ("score.chunk", RoundStage.score),
    ("select.written", RoundStage.select),
    ("enqueue.written", RoundStage.enqueue),
]


@pytest.fixture(autouse=True)
def reap_helpers() -> Iterator[None]:
    yield
    kill_marked_processes(RUN)


def worker_env(database_url: str, models_dir: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "STEPWISE_TEST_RUN": RUN,
        "DATABASE_URL": database_url,
        "STEPWISE_MODELS_DIR": str(models_dir),
        "STEPWISE_ROUND_LEASE_S": str(LEASE_S),
        "STEPWISE_WORKER_POLL_S": "1",
        **extra,
    }


def state(factory: sessionmaker[Session], project_id: int, round_id: int) -> dict:
    with session_scope(factory) as session:
        round_ = session.get(Round, round_id)
        served = served_version(session, project_id)
        slots = Counter(session.scalars(select(Assignment.solution_id)))
        return {
            "status": round_.status,
            "stage": round_.stage,
            "lease_expires_at": round_.lease_expires_at,
            "served": served.id if served else None,
            "versions": session.scalar(select(func.count()).select_from(ModelVersion)),
            "picks": session.scalar(select(func.count()).select_from(RoundPick)),
            "max_slots": max(slots.values()),
            "slots": sum(slots.values()),
            "queued_by_round": session.scalar(select(func.count()).select_from(Assignment).where(Assignment.generation == 1)),
        }


def wait_for_lease_to_lapse(factory: sessionmaker[Session], round_id: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with session_scope(factory) as session:
            expires = session.scalar(select(Round.lease_expires_at).where(Round.id == round_id))
        if expires is None or expires < utcnow():
            return
        time.sleep(0.3)
    pytest.fail("the dead worker's lease never ran out")


def run_worker(env: dict[str, str], log: Path, timeout: float = 600) -> tuple[int, str]:
    """(exit status, log tail). Output goes to a file, not a pipe: a killed worker's grading
    helper process outlives it holding its pipes, and reading them to the end would hang."""
    with log.open("w") as sink:
        done = subprocess.run([STEPWISE, "worker", "--once"], env=env, stdout=sink,
                              stderr=subprocess.STDOUT, timeout=timeout)
    return done.returncode, log.read_text()[-3000:]


def test_a_worker_killed_at_every_stage_leaves_everything_whole(
    session_factory: sessionmaker[Session], database_url: str, backend: str, tmp_path: Path
) -> None:
    project = synthetic_project(session_factory)
    with session_scope(session_factory) as session:
        round_id = start_round(session, session.get(Project, project.id)).id
    before = state(session_factory, project.id, round_id)
    assert before["served"] is None and before["queued_by_round"] == 0
    models = tmp_path / "models"

    for point, stage in CRASHES:
        rc, log = run_worker(worker_env(database_url, models, STEPWISE_FAILPOINTS=point), tmp_path / f"{point}.log")
        assert rc == -signal.SIGKILL, f"{point}: rc {rc}\n{log}"
        now = state(session_factory, project.id, round_id)
        assert now["status"] == RoundStatus.running and now["stage"] == stage, (point, now)
        # Nothing the dead worker had not recorded shows: no model served before promotion was
        # committed, no picks before selection was, no slot added or moved before enqueuing was.
        promoted = ORDER.index(stage) > ORDER.index(RoundStage.promote)
        assert (now["served"] is not None) == promoted, (point, now)
        assert now["versions"] == (0 if ORDER.index(stage) <= ORDER.index(RoundStage.train) else 1)
        assert (now["picks"] == 12) == (stage == RoundStage.enqueue), (point, now)
        assert now["max_slots"] == 1 and now["slots"] == before["slots"]
        assert now["queued_by_round"] == 0
        wait_for_lease_to_lapse(session_factory, round_id)

    rc, log = run_worker(worker_env(database_url, models), tmp_path / "last.log")
    assert rc == 0, log
    end = state(session_factory, project.id, round_id)
    assert end["status"] == RoundStatus.done and end["stage"] == RoundStage.done
    assert end["versions"] == 1 and end["served"] is not None
    assert end["picks"] == 12 and end["max_slots"] == 1 and end["slots"] == before["slots"]
    assert end["queued_by_round"] == 12
    with session_scope(session_factory) as session:
        assert session.get(Round, round_id).attempts == len(CRASHES) + 1


# PostgreSQL, the production path (procrastinate retries the dead worker's job); resuming the
# training itself is the same code on SQLite.
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_worker_killed_mid_training_is_resumed_from_its_snapshot(
    session_factory: sessionmaker[Session], database_url: str, backend: str, tmp_path: Path
) -> None:
    project = synthetic_project(session_factory)
    with session_scope(session_factory) as session:
        # ~3 optimizer steps an epoch, a snapshot after each: something to interrupt.
        update_round_settings(session, project.id, RoundSettingsUpdate(train_epochs=4))
        round_id = start_round(session, session.get(Project, project.id)).id
    models = tmp_path / "models"
    partial = models / f"project-{project.id}" / "round-1.partial" / "progress.json"
    log = tmp_path / "killed.log"
    with log.open("w") as sink:
        worker = subprocess.Popen([STEPWISE, "worker"], env=worker_env(database_url, models),
                                  stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while not partial.exists():
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "training never wrote a snapshot"
            time.sleep(0.2)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    killed_at = json.loads(partial.read_text())["step"]
    assert state(session_factory, project.id, round_id)["stage"] == RoundStage.train

    wait_for_lease_to_lapse(session_factory, round_id)
    rc, text = run_worker(worker_env(database_url, models), tmp_path / "resumed.log")
    assert rc == 0, text
    assert state(session_factory, project.id, round_id)["status"] == RoundStatus.done
    meta = json.loads((models / f"project-{project.id}" / "round-1" / "stepwise.json").read_text())
    assert meta["resumed_from_step"] >= killed_at > 0


def test_a_database_outage_is_one_line_and_a_bug_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    # A traceback every poll buried the log while the database was down or not yet migrated.
    outage = OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: round_settings"))
    with caplog.at_level(logging.WARNING, logger="stepwise.rounds"):
        log_failed_sweep("round sweep", outage)
        try:
            raise KeyError("stage")
        except KeyError as bug:
            log_failed_sweep("round sweep", bug)
    quiet, loud = caplog.records
    assert quiet.levelname == "WARNING" and quiet.exc_info is None
    assert "not available or not migrated" in quiet.getMessage() and "no such table" in quiet.getMessage()
    assert loud.levelname == "ERROR" and loud.exc_info is not None
