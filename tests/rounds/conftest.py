"""Builders for round tests: synthetic verifiable data imported through the import service."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import orjson
import pytest
import torch
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from active_learning.model import load_base, save_checkpoint
from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.imports.service import import_file
from app.models import Project
from app.rounds.config import WorkerSettings
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import update_round_settings
from tests.conftest import make_project

# Small enough to train in seconds on a CPU with the tiny preset.
FAST_SETTINGS = RoundSettingsUpdate(
    picks_per_round=12,
    per_problem_cap=3,
    train_epochs=1,
    max_length=256,
    min_train_labels=10,
    heldout_share=0.25,
    promote_min=0.0,
    promote_min_heldout=5,
)


def _jsonl(records: list[dict]) -> io.BytesIO:
    return io.BytesIO(b"".join(orjson.dumps(r) + b"\n" for r in records))


def synthetic_project(
    factory: sessionmaker[Session],
    name: str = "synthetic",
    *,
    labeled_problems: int = 16,
    pool_problems: int = 10,
    per_problem: int = 4,
    seed: int = 0,
) -> Project:
    """Oracle-labeled solutions of some problems (PRM800K import) and an unlabeled pool of
    candidates for others (candidate import, graded and queued by the import)."""
    project = make_project(factory, name)
    candidates = list(iter_candidates(labeled_problems + pool_problems, per_problem, seed))
    labeled, pool = candidates[: labeled_problems * per_problem], candidates[labeled_problems * per_problem:]
    pool_problems_rows = {c.problem.problem_id: c.problem for c in pool}
    with session_scope(factory) as session:
        project = session.merge(project)
        import_file(session, project, _jsonl([to_prm800k(c) for c in labeled]),
                    filename="labels.jsonl", fmt="prm800k", separator=None, user=None)
        import_file(session, project,
                    _jsonl([{"problem": p.text, "answer": str(p.answer)} for p in pool_problems_rows.values()]),
                    filename="problems.jsonl", fmt="math", separator=None, user=None)
        import_file(session, project,
                    _jsonl([{"problem": c.problem.text, "steps": c.steps} for c in pool]),
                    filename="pool.jsonl", fmt="solutions", separator=None, user=None)
        update_round_settings(session, project.id, FAST_SETTINGS)
    return project


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained tiny PRM, saved as a round's would be: for tests that need a model to load,
    not one that knows anything."""
    torch.manual_seed(0)
    model, tokenizer = load_base("tiny")
    directory = tmp_path_factory.mktemp("ckpt") / "prm"
    save_checkpoint(model, tokenizer, directory, {"base": "tiny", "data_hash": "abc"})
    return directory


@pytest.fixture
def worker_settings(tmp_path: Path) -> WorkerSettings:
    return WorkerSettings(models_dir=tmp_path / "models", round_lease_s=30, worker_poll_s=1)


def kill_marked_processes(run_id: str) -> None:
    """End processes started with STEPWISE_TEST_RUN=run_id in their environment.

    A killed worker's grading helper process (active_learning.grading) outlives it, holding
    both ends of its own pipe; children inherit the environment, so the marker finds them.
    """
    marker = f"STEPWISE_TEST_RUN={run_id}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue


@pytest.fixture(autouse=True)
def empty_job_queue(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Jobs left in procrastinate's tables would name rounds of tests that have ended."""
    # Asked for before the test, so that this runs before the engine is disposed of.
    engine = request.getfixturevalue("engine") if "engine" in request.fixturenames else None
    yield
    if engine is not None and engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM procrastinate.procrastinate_jobs"))
