"""Import and export of generated PRM800K files, each in a child process of its own, so that
the peak RSS measured is that operation's."""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import psutil
from sqlalchemy import create_engine

from app.config import normalize_database_url
from app.db import create_session_factory, session_scope
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from load_setup import ROOT, STEP_TEXTS, database_url


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


def io_child(args: argparse.Namespace) -> None:
    """Runs one import or export in this process and prints its time and memory as JSON."""
    from app.exports.schemas import ExportFilters
    from app.exports.service import write_export
    from app.imports.service import import_file
    from app.projects.service import get_project_by_name

    kind, project_name, file = args.io_child
    engine = create_engine(normalize_database_url(database_url(args)))
    factory = create_session_factory(engine)
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    # The commit at the end of the scope is part of an import's time.
    with session_scope(factory) as session:
        project = get_project_by_name(session, project_name)
        if kind == "import":
            with open(file, "rb") as stream:
                result = import_file(
                    session,
                    project,
                    stream,
                    filename=Path(file).name,
                    fmt="prm800k",
                    separator=None,
                    user=None,
                )
            detail: dict[str, object] = {
                "added": result.added,
                "queued": result.queued,
                "duplicates": result.duplicates,
            }
        else:
            with open(file, "wb") as sink:
                detail = {
                    "records": write_export(session, project, kind, ExportFilters(), sink),
                    "file_mb": 0.0,
                }
    seconds = time.perf_counter() - started
    if kind != "import":
        detail["file_mb"] = round(Path(file).stat().st_size / 2**20, 1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {"seconds": seconds, "rss_before_mb": rss_before / 2**20, "peak_rss_mb": peak, **detail}
        )
    )


def _child(args: argparse.Namespace, kind: str, project: str, file: Path) -> dict[str, object]:
    command = [
        sys.executable,
        str(Path(__file__).resolve().with_name("labeling_load.py")),
        "--postgres",
        args.postgres,
        "--database",
        args.database,
        "--io-child",
        kind,
        project,
        str(file),
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} of {file.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
            run = _child(args, "import", name, path)
            entry: dict[str, object] = {
                "steps": steps,
                "records": records,
                "file_mb": round(path.stat().st_size / 2**20, 1),
                "import": {**_io_figures(run, steps), "added": run["added"]},
            }
            path.unlink()
            for fmt in args.export_formats.split(","):
                out = Path(tmp) / f"export-{steps}.{fmt}"
                run = _child(args, fmt, name, out)
                entry[f"export_{fmt}"] = {
                    **_io_figures(run, steps),
                    "records": run["records"],
                    "file_mb": run["file_mb"],
                }
                out.unlink()
            sizes.append(entry)
            print(f"import/export of {steps} steps done", flush=True)
    engine.dispose()
    largest = sizes[-1]
    return {
        "import": largest["import"],
        "export": largest["export_prm800k"] if "export_prm800k" in largest else None,
        "sizes": sizes,
    }


def _io_figures(run: dict[str, object], steps: int) -> dict[str, object]:
    seconds = float(run["seconds"])  # type: ignore[arg-type]
    return {
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds),
        "peak_rss_mb": round(float(run["peak_rss_mb"]), 1),  # type: ignore[arg-type]
        "rss_before_mb": round(float(run["rss_before_mb"]), 1),  # type: ignore[arg-type]
    }
