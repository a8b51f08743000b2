"""A PostgreSQL round worker through a database outage. On a cluster of the test's own (the
machine's shared server is never stopped): an outage longer than the pool's 30 s wait for a
connection, which ends procrastinate's job loop; the rounds queued after it run, and the worker
stops on SIGTERM without a traceback. On a database of the test's own, closed to connections: a
worker stops on SIGTERM whatever it was doing, and one started meanwhile waits for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from app.migrate import upgrade
from tests.conftest import POSTGRES_ADMIN_URL, _postgres_database

ROOT = Path(__file__).resolve().parents[2]
STEPWISE = str(Path(sys.executable).parent / "stepwise")
sys.path.insert(0, str(ROOT / "bench"))
from throwaway_postgres import BINARIES, ThrowawayPostgres  # noqa: E402


def _stepwise(env: dict[str, str], *args: str) -> str:
    return subprocess.run([STEPWISE, *args], env=env, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.skipif(not (BINARIES / "pg_ctl").exists(), reason=f"no PostgreSQL server binaries in {BINARIES}")
def test_a_worker_runs_rounds_queued_after_an_outage_and_stops_cleanly(tmp_path: Path) -> None:
    with ThrowawayPostgres(max_connections=30) as cluster:
        env = {**os.environ, "DATABASE_URL": cluster.url, "STEPWISE_WORKER_POLL_S": "1"}
        _stepwise(env, "db", "upgrade")
        _stepwise(env, "projects", "create", "outage")
        log = tmp_path / "worker.log"
        with log.open("w") as out:
            worker = subprocess.Popen([STEPWISE, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: "Starting worker" in log.read_text(), "the worker to start", log)
            cluster._run(BINARIES / "pg_ctl", "stop", "-w", "-m", "fast", "-D", cluster.data)
            _wait_for(lambda: "the job queue lost the database" in log.read_text(), "the job loop to end", log,
                      timeout=240)
            cluster._run(BINARIES / "pg_ctl", "start", "-w", "-D", cluster.data, "-l", cluster.log)
            _stepwise(env, "rounds", "start", "--project", "outage")
            _wait_for(lambda: "\tdone" in _stepwise(env, "rounds", "list", "--project", "outage"),
                      "the round queued after the outage to be done", log)
        finally:
            worker.send_signal(signal.SIGTERM)
            returncode = worker.wait(timeout=60)
    text = log.read_text()
    assert returncode == 0, text
    assert "Traceback" not in text and "ERROR" not in text, text


def _wait_for(condition, what: str, log: Path, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}; the worker's log:\n{log.read_text()}")
        time.sleep(0.5)


# -- a database closed to connections (ALLOW_CONNECTIONS false) on the shared server ----------

@pytest.fixture
def own_database() -> Iterator[str]:
    """A migrated database of this test's own, which it may close to connections."""
    for url in _postgres_database():
        upgrade(url)
        yield url


def _allow_connections(url: str, allow: bool) -> None:
    name = make_url(url).database
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allow).lower()}')
        if not allow:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


def _start_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": url, "STEPWISE_WORKER_POLL_S": "1"}
    with log.open("w") as out:
        return subprocess.Popen([STEPWISE, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)


def _stopped(worker: subprocess.Popen[bytes], log: Path, within: float) -> int:
    worker.send_signal(signal.SIGTERM)
    try:
        return worker.wait(timeout=within)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        raise AssertionError(f"the worker did not stop within {within} s of SIGTERM:\n{log.read_text()}") from None


@pytest.mark.parametrize("when", ["at once", "while the job loop waits for a connection"])
def test_sigterm_stops_a_worker_whose_database_is_closed(own_database: str, tmp_path: Path, when: str) -> None:
    log = tmp_path / "worker.log"
    worker = _start_worker(own_database, log)
    try:
        _wait_for(lambda: "Starting worker" in log.read_text(), "the worker to start", log)
        _allow_connections(own_database, False)
        if when != "at once":
            # The job loop's next poll waits for a connection, up to the pool's 30 s.
            time.sleep(4)
        returncode = _stopped(worker, log, within=15)
    finally:
        _allow_connections(own_database, True)
        if worker.poll() is None:
            worker.kill()
    text = log.read_text()
    assert returncode == 0, text
    assert text.count("Starting worker") == 1 and "Traceback" not in text, text


def test_a_worker_started_while_its_database_is_closed_waits_for_it(own_database: str, tmp_path: Path) -> None:
    _allow_connections(own_database, False)
    log = tmp_path / "worker.log"
    worker = _start_worker(own_database, log)
    try:
        _wait_for(lambda: log.read_text().count("waiting for the database") >= 2, "two tries", log)
        assert worker.poll() is None, log.read_text()
        assert "trying again in 1 s" in log.read_text() and "trying again in 2 s" in log.read_text()
        _allow_connections(own_database, True)
        _wait_for(lambda: "Starting worker" in log.read_text(), "the worker to start", log)
        assert _stopped(worker, log, within=15) == 0, log.read_text()
    finally:
        _allow_connections(own_database, True)
        if worker.poll() is None:
            worker.kill()


def test_a_worker_waiting_for_its_database_stops_on_sigterm(own_database: str, tmp_path: Path) -> None:
    _allow_connections(own_database, False)
    log = tmp_path / "worker.log"
    worker = _start_worker(own_database, log)
    try:
        _wait_for(lambda: "waiting for the database" in log.read_text(), "a try", log)
        assert _stopped(worker, log, within=10) == 0, log.read_text()
    finally:
        _allow_connections(own_database, True)
    assert "Starting worker" not in log.read_text()


@pytest.mark.parametrize("problem", ["no such database", "no schema"])
def test_a_worker_with_a_wrong_database_fails_at_once(own_database: str, problem: str) -> None:
    url = own_database + "_missing"
    if problem == "no schema":
        with psycopg.connect(own_database, autocommit=True) as connection:
            connection.execute("DROP TABLE alembic_version")
        url = own_database
    started = time.monotonic()
    done = subprocess.run([STEPWISE, "worker"], env={**os.environ, "DATABASE_URL": url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Error: cannot use the database" in done.stderr, done.stderr
    assert ("does not exist" if problem == "no such database" else "has no schema") in done.stderr
    assert "waiting for the database" not in done.stderr and time.monotonic() - started < 30
