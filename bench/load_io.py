"""Import and export of generated PRM800K files through the `stepwise` CLI, each command a
process of its own, so that the time is what a user waits for and the peak RSS is that
command's, interpreter and libraries included."""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import create_engine

from app.config import normalize_database_url
from app.db import create_session_factory, session_scope
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from load_setup import ROOT, STEP_TEXTS


def write_prm800k_file(path: Path, steps: int, rng: random.Random) -> tuple[int, int]:
    """A labeled phase-2 PRM800K file of `steps` solution steps; returns (records, steps)."""
    labelers = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(50)]
    records = written = 0
    with path.open("wb") as out:
        while written < steps:
            n = min(rng.randint(5, 15), steps - written)
            # The record number makes every solution new: none is a duplicate of another.
            body = [f"{rng.choice(STEP_TEXTS)} (record {records}, step {k})" for k in range(n - 1)]
            body.append(f"So the answer is {records % 97}.\n\n# Answer\n\n{records % 97}")
            error_at = rng.randrange(n) if rng.random() < 0.5 else None
            problem = records % 5000
            ratings = [1] * n if error_at is None else [1] * error_at + [-1]
            record = {
                "labeler": labelers[records % len(labelers)],
                "timestamp": f"2023-01-{1 + records % 28:02d}T04:34:27.052924",
                "generation": 1 + records % 9,
                "is_quality_control_question": False,
                "is_initial_screening_question": False,
                "question": {
                    "problem": f"Problem {problem}: find $x$ if $3x + {problem} = {4 * problem}$.",
                    "ground_truth_answer": str(problem),
                    "ground_truth_solution": f"Subtract and divide: $x = \\boxed{{{problem}}}$.",
                    "pre_generated_steps": body,
                    "pre_generated_answer": str(records % 97),
                    "pre_generated_verifier_score": rng.random(),
                },
                "label": {
                    "steps": [
                        {
                            "completions": [{"text": text, "rating": rating, "flagged": False}],
                            "human_completion": None,
                            "chosen_completion": None if rating == -1 else 0,
                        }
                        for text, rating in zip(body, ratings, strict=False)
                    ],
                    "total_time": rng.randint(5_000, 300_000),
                    "finish_reason": "solution" if error_at is None else "found_error",
                },
            }
            out.write(orjson.dumps(record) + b"\n")
            records += 1
            written += n
    return records, written


def run_cli(url: str, command: list[str]) -> dict[str, object]:
    """Run one `stepwise` command as a user would; its wall time, peak RSS and output.

    The peak RSS is the kernel's high-water mark of the command's own memory (VmHWM, which exec
    starts afresh), read until it exits: interpreter and libraries included. wait4's ru_maxrss
    would not do: it keeps the pre-exec high-water mark, which is this bench's own size.
    """
    stepwise = Path(sys.executable).parent / "stepwise"
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    peak_kb = 0
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        child = subprocess.Popen(
            [str(stepwise), *command], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT
        )
        while child.poll() is None:
            peak_kb = max(peak_kb, _high_water_kb(child.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        out.seek(0)
        output = out.read().decode(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(f"stepwise {' '.join(command)} failed:\n{output[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": peak_kb / 1024, "output": output}


def _high_water_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def import_export(url: str, args: argparse.Namespace) -> dict[str, object]:
    """Import then export generated PRM800K files of a twentieth of --io-steps and of all of it:
    peak memory that stays put while the file grows twentyfold is memory flat in file size."""
    engine = create_engine(normalize_database_url(url))
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for steps in sorted({max(1000, args.io_steps // 20), args.io_steps}):
            path = Path(tmp) / f"prm800k-{steps}.jsonl"
            records, steps = write_prm800k_file(path, steps, random.Random(args.seed))
            name = f"io-{steps}"
            with session_scope(create_session_factory(engine)) as session:
                create_project(session, ProjectCreate(name=name))
            run = run_cli(url, ["import", "--project", name, "--format", "prm800k", str(path)])
            entry: dict[str, object] = {
                "steps": steps,
                "records": records,
                "file_mb": round(path.stat().st_size / 2**20, 1),
                "import": {**_io_figures(run, steps), "summary": _last_line(run)},
            }
            path.unlink()
            for fmt in args.export_formats.split(","):
                out = Path(tmp) / f"export-{steps}.{fmt}"
                run = run_cli(url, ["export", "--project", name, "--format", fmt, "--output", str(out)])
                entry[f"export_{fmt}"] = {
                    **_io_figures(run, steps),
                    "summary": _last_line(run),
                    "file_mb": round(out.stat().st_size / 2**20, 1),
                }
                out.unlink()
            sizes.append(entry)
            print(f"import/export of {steps} steps done", flush=True)
    engine.dispose()
    largest = sizes[-1]
    return {
        "import": {**largest["import"], **_marginal(sizes, "import")},
        "export": (
            {**largest["export_prm800k"], **_marginal(sizes, "export_prm800k")}
            if "export_prm800k" in largest
            else None
        ),
        "sizes": sizes,
    }


def _marginal(sizes: list[dict[str, Any]], kind: str) -> dict[str, object]:
    """Steps per second beyond what the small file cost: a command's fixed cost (interpreter,
    imports, connecting) drops out, which the wall-time figure of one size keeps."""
    if len(sizes) < 2:
        return {}
    small, large = sizes[0], sizes[-1]
    extra_seconds = large[kind]["seconds"] - small[kind]["seconds"]
    if extra_seconds <= 0:
        return {}
    return {"marginal_steps_per_s": round((large["steps"] - small["steps"]) / extra_seconds)}


def _io_figures(run: dict[str, object], steps: int) -> dict[str, object]:
    seconds = float(run["seconds"])  # type: ignore[arg-type]
    return {
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds),
        "peak_rss_mb": round(float(run["peak_rss_mb"]), 1),  # type: ignore[arg-type]
    }


def _last_line(run: dict[str, object]) -> str:
    return str(run["output"]).strip().splitlines()[-1]
