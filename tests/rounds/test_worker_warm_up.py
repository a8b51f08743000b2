"""`stepwise worker` loads torch and transformers while it waits, so that its first round does
not spend its lease on imports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

STEPWISE = str(Path(sys.executable).with_name("stepwise"))
# A bound on the wait for the imports, reached only when they never end.
IMPORTS_BOUND_S = 180


def test_an_idle_worker_loads_torch_before_any_round(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'idle.db'}"}
    subprocess.run([STEPWISE, "db", "upgrade"], env=env, capture_output=True, timeout=120, check=True)
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen([STEPWISE, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # No round anywhere: the imports are the worker's own doing.
        deadline = time.monotonic() + IMPORTS_BOUND_S
        while "torch and transformers loaded in" not in log.read_text():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    assert "Traceback" not in log.read_text()
