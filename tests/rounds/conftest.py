"""Builders for round tests: synthetic verifiable data imported through the import service."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import orjson
import pytest
import torch
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from active_learning.model import load_base, save_checkpoint
from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.imports.service import import_file
from app.machine_labels.service import MachineLabel, store_machine_labels
from app.models import ACTIVE_ROUND_STATUSES, LabelSource, ModelVersion, Project, Round, RoundStatus, SolutionScore
from app.rounds.config import WorkerSettings
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import start_round, update_round_settings
from app.rounds.stages import run_round
from tests.conftest import add_solutions, make_project

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
    # These projects test ranking: the default mode draws uniformly, and a tiny model trained in
    # seconds never clears the default bar (test_round.py tests both).
    selector_mode="fixed",
    selector_min_step_auroc=None,
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
        if pool:  # an empty file is refused
            import_file(session, project,
                        _jsonl([{"problem": p.text, "answer": str(p.answer)} for p in pool_problems_rows.values()]),
                        filename="problems.jsonl", fmt="math", separator=None, user=None)
            import_file(session, project,
                        _jsonl([{"problem": c.problem.text, "steps": c.steps} for c in pool]),
                        filename="pool.jsonl", fmt="solutions", separator=None, user=None)
        update_round_settings(session, project.id, FAST_SETTINGS)
    return project


def untrained_checkpoint(directory: Path, seed: int = 0) -> Path:
    """An untrained tiny PRM, saved as a round's would be: for tests that need a model to load,
    not one that knows anything. Two seeds give two models that score differently."""
    torch.manual_seed(seed)
    model, tokenizer = load_base("tiny")
    save_checkpoint(model, tokenizer, directory, {"base": "tiny", "data_hash": f"seed-{seed}"})
    return directory


def add_versions(factory: sessionmaker[Session], project_id: int, paths: list[Path], *,
                 serve_last: bool = True) -> list[int]:
    """Model versions of the project at these checkpoints, the last one served unless told not."""
    with session_scope(factory) as session:
        versions = [ModelVersion(project_id=project_id, path=str(path), base="tiny", data_hash=path.name,
                                 train_labels=0, is_served=serve_last and i == len(paths) - 1)
                    for i, path in enumerate(paths)]
        session.add_all(versions)
        session.flush()
        return [v.id for v in versions]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "prm")


PRM_SAYS_RIGHT = [0.9, 0.9, 0.9]


def routed_project(factory: sessionmaker[Session], checkpoint: Path, *, accept: bool = False) -> tuple[Project, list[int]]:
    """Six queued solutions the served PRM calls right throughout, five with a rollout label:
    two that put an error where the PRM sees none, one uncertain, two that agree."""
    project = make_project(factory, "routed")
    ids = add_solutions(factory, project, 6, steps=3, priority=0.0)
    with session_scope(factory) as session:
        version = ModelVersion(project_id=project.id, path=str(checkpoint), base="tiny", data_hash="served",
                               train_labels=0, is_served=True)
        session.add(version)
        session.flush()
        session.add_all(SolutionScore(model_version_id=version.id, solution_id=sid, score=0.73,
                                      step_scores=PRM_SAYS_RIGHT) for sid in ids)
        store_machine_labels(session, project.id, LabelSource.rollout, {"model": "gen", "rollouts": 8}, [
            MachineLabel(ids[0], [1, -1], {"shares": [0.9, 0.0]}),
            MachineLabel(ids[1], [-1], {"shares": [0.0]}),
            MachineLabel(ids[2], [1, 1, 1], {"shares": [0.9, 0.45, 1.0]}),
            MachineLabel(ids[3], [1, 1, 1], {"shares": [1.0, 0.9, 1.0]}),
            MachineLabel(ids[4], [1, 1, 1], {"shares": [1.0, 1.0, 1.0]}),
        ])
        update_round_settings(session, project.id, RoundSettingsUpdate(
            picks_per_round=6, accept_agreeing_machine_labels=accept))
    return project, ids


def run_one_round(factory: sessionmaker[Session], project_id: int, worker_settings: WorkerSettings) -> int:
    """Start a round and run it here; where a server's own worker claimed it first, wait for
    that one to finish it."""
    with session_scope(factory) as session:
        round_id = start_round(session, session.get(Project, project_id)).id
    status = run_round(factory, round_id, "worker-a", worker_settings)
    deadline = time.monotonic() + 120
    while status is None and time.monotonic() < deadline:
        time.sleep(0.5)
        with session_scope(factory) as session:
            status = session.scalar(select(Round.status).where(
                Round.id == round_id, Round.status.not_in(ACTIVE_ROUND_STATUSES)))
    assert status == RoundStatus.done
    return round_id


@pytest.fixture
def worker_settings(tmp_path: Path) -> WorkerSettings:
    # Retried at once: a test that runs a round again after an error is the worker that retries.
    return WorkerSettings(models_dir=tmp_path / "models", round_lease_s=30, worker_poll_s=1, round_retry_after_s=0)


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
