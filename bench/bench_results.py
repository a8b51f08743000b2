"""What every fault and load benchmark records about its run, and how it writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_header(benchmark: str) -> dict[str, object]:
    """The benchmark's name, when, the command as typed and the commit it ran."""
    return {
        "benchmark": benchmark,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        ).stdout.strip(),
    }


def write_results(path: Path, results: dict[str, object]) -> None:
    # Whole or not at all: a run stopped halfway leaves the last complete results in place.
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(results, indent=2) + "\n")
    partial.replace(path)
