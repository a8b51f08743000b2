"""`stepwise rounds start|list` and `stepwise worker --once` against a real database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rounds.conftest import synthetic_project

pytestmark = pytest.mark.slow
STEPWISE = str(Path(sys.executable).with_name("stepwise"))


def stepwise(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STEPWISE, *args], env=env, capture_output=True, text=True, timeout=900)


# SQLite only: the PostgreSQL worker is driven from the command line in test_worker.py.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_start_list_and_run_rounds_from_the_command_line(session_factory, database_url, tmp_path, backend) -> None:  # type: ignore[no-untyped-def]
    synthetic_project(session_factory, "cli")
    env = {**os.environ, "DATABASE_URL": database_url, "STEPWISE_MODELS_DIR": str(tmp_path / "models")}

    queued = stepwise(env, "rounds", "start", "--project", "cli")
    assert queued.returncode == 0 and "round 1 of cli queued" in queued.stdout, queued.stderr
    refused = stepwise(env, "rounds", "start", "--project", "cli")
    assert refused.returncode == 1 and "still queued" in refused.stderr
    assert stepwise(env, "rounds", "list", "--project", "cli").stdout.startswith("1\tqueued\tnot started\t0%")

    worked = stepwise(env, "worker", "--once")
    assert worked.returncode == 0, worked.stderr[-3000:]
    listed = stepwise(env, "rounds", "list", "--project", "cli").stdout
    assert listed.startswith("1\tdone\tdone\t100%") and "12 picks first in the queue" in listed

    waited = stepwise(env, "rounds", "start", "--project", "cli", "--wait")
    assert waited.returncode == 0, waited.stderr[-3000:]
    assert "round 2 of cli queued" in waited.stdout and "round 2: done" in waited.stdout
    assert stepwise(env, "rounds", "list", "--project", "nope").returncode == 1


@pytest.mark.parametrize("backend", ["sqlite"])
def test_cancel_a_queued_round_from_the_command_line(session_factory, database_url, tmp_path, backend) -> None:  # type: ignore[no-untyped-def]
    synthetic_project(session_factory, "cli")
    env = {**os.environ, "DATABASE_URL": database_url, "STEPWISE_MODELS_DIR": str(tmp_path / "models")}
    nothing = stepwise(env, "rounds", "cancel", "--project", "cli")
    assert nothing.returncode == 1 and "has no round queued or running" in nothing.stderr
    assert stepwise(env, "rounds", "start", "--project", "cli").returncode == 0
    cancelled = stepwise(env, "rounds", "cancel", "--project", "cli")
    assert cancelled.returncode == 0 and "round 1 of cli cancelled" in cancelled.stdout, cancelled.stderr
    # Cancelled before a worker took it up, it reached no stage.
    assert stepwise(env, "rounds", "list", "--project", "cli").stdout.startswith("1\tcancelled\tnot started\t")
    alone = stepwise(env, "worker", "--once", "--metrics-host", "0.0.0.0")
    assert alone.returncode == 2 and "give --metrics-port too" in alone.stderr
    assert stepwise(env, "rounds", "cancel", "--project", "nope").returncode == 1
