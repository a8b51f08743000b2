"""A PostgreSQL round worker through a database outage, on a cluster of the test's own (the
machine's shared server is never stopped): an outage longer than the pool's 30 s wait for a
connection, which ends procrastinate's job loop; the rounds queued after it run, and the worker
stops on SIGTERM without a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
