"""How long a manager waits for the two views that compare labelers: the Labels tab (which
solutions' labelers disagree, app.browse.service.overlap, computed on every page of the tab) and
the Agreement report (app.quality.agreement.project_agreement).

A project of synthetic PRM800K records, each solution labeled by two of eight imported labelers
(one in five of the second labels moves some +1 ratings to 0), on PostgreSQL and on SQLite. The
baseline, timed in the same run: reading the same labels' steps and parsing them, the least any
view of the steps costs. Medians of --repeat runs, each in a session of its own, with what the
process held before them frozen, as in a served process.

    .venv/bin/python bench/agreement_speed.py                  # 40,000 labels, both databases
    .venv/bin/python bench/agreement_speed.py --quick          # a smoke run, not a measurement
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from sqlalchemy import Text, cast, create_engine, select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_results import run_header, write_results  # noqa: E402
from load_setup import create_database, drop_database  # noqa: E402

from active_learning.synthetic import iter_candidates, to_prm800k  # noqa: E402
from app.browse.service import overlap  # noqa: E402
from app.config import normalize_database_url  # noqa: E402
from app.db import create_session_factory, session_scope  # noqa: E402
from app.imports.service import import_file  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.models import Label, Project  # noqa: E402
from app.projects.schemas import ProjectCreate  # noqa: E402
from app.projects.service import create_project  # noqa: E402
from app.quality.agreement import project_agreement  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "agreement_speed.json"
LABELERS = [f"labeler-{i}" for i in range(8)]


def records(labels: int, seed: int) -> bytes:
    rng = random.Random(seed)
    lines = []
    # Four solutions a problem; every solution labeled twice.
    for candidate in iter_candidates(max(1, labels // 8), 4, seed=seed):
        record = to_prm800k(candidate)
        first, second = rng.sample(LABELERS, 2)
        lines.append(orjson.dumps({**record, "labeler": first}))
        if rng.random() < 0.2:
            for step in record["label"]["steps"]:
                for completion in step["completions"]:
                    if completion.get("rating") == 1 and rng.random() < 0.3:
                        completion["rating"] = 0
        lines.append(orjson.dumps({**record, "labeler": second}))
    return b"\n".join(lines) + b"\n"


@contextmanager
def database(kind: str, postgres: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="agreement-speed-") as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    # The load benchmark's throwaway database (made and migrated, dropped after).
    where = argparse.Namespace(postgres=postgres, database=f"agreement_speed_{uuid.uuid4().hex[:8]}")
    url = create_database(where)
    try:
        yield url
    finally:
        drop_database(where)


def read_steps(session: Session, project_id: int) -> None:
    rows = session.execute(select(Label.id, cast(Label.steps, Text)).where(
        Label.project_id == project_id, Label.superseded_at.is_(None)))
    for _, steps in rows:
        orjson.loads(steps)


def timed(factory, work: Callable[[Session], object], repeat: int) -> float:  # type: ignore[no-untyped-def]
    seconds = []
    for _ in range(repeat):
        with session_scope(factory) as session:
            started = time.perf_counter()
            work(session)
            seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def measure(kind: str, url: str, data: bytes, repeat: int) -> dict[str, object]:
    upgrade(normalize_database_url(url))
    factory = create_session_factory(create_engine(normalize_database_url(url)))
    with session_scope(factory) as session:
        project = create_project(session, ProjectCreate(name="bench", overlap=2))
        result = import_file(session, project, io.BytesIO(data), filename="bench.jsonl", fmt="prm800k",
                             separator=None, user=None)
        project_id = project.id
    labels = result.added["labels"]
    # As `stepwise serve` does once its app has started (app.server).
    gc.collect()
    gc.freeze()
    baseline = timed(factory, lambda s: read_steps(s, project_id), repeat)
    views = {
        "labels_tab": timed(factory, lambda s: overlap(s, project_id), repeat),
        "agreement_report": timed(factory, lambda s: project_agreement(s, s.get(Project, project_id)), repeat),
    }
    return {
        "database": kind,
        "labels": labels,
        "baseline_read_steps_s": round(baseline, 4),
        **{f"{name}_s": round(seconds, 4) for name, seconds in views.items()},
        **{f"{name}_vs_baseline": round(seconds / baseline, 2) for name, seconds in views.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--databases", default="postgresql,sqlite")
    parser.add_argument("--postgres", default=os.environ.get("STEPWISE_TEST_POSTGRES",
                                                             "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    args = parser.parse_args()
    if args.quick:
        args.labels, args.repeat = 400, 1
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if not kinds or set(kinds) - {"postgresql", "sqlite"}:
        parser.error("--databases: choose from postgresql, sqlite")
    data = records(args.labels, args.seed)
    results: dict[str, object] = {**run_header("agreement_speed"), "quick": args.quick,
                                  "load_average_1m": round(os.getloadavg()[0], 2), "runs": []}
    for kind in kinds:
        with database(kind, args.postgres) as url:
            run = measure(kind, url, data, args.repeat)
        print(" ".join(f"{k}={v}" for k, v in run.items()), flush=True)
        results["runs"].append(run)  # type: ignore[union-attr]
        write_results(args.output, results)


if __name__ == "__main__":
    main()
