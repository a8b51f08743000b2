"""Label a project's pool by rollouts (active_learning.rollouts), storing each label as it comes.

Solutions are labeled in id order and stored a batch at a time, each batch in its own
transaction: a run stopped anywhere keeps what it stored, and the next run with the same
generator and settings skips those solutions (one label per solution and generator, see
app.machine_labels.service), so it goes on where the last one stopped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from active_learning.rollouts import Generator, RolloutLabel, RolloutSettings, RolloutTask, autolabel
from app.db import session_scope
from app.machine_labels.service import MachineLabel, labeled_by, store_machine_labels
from app.models import LabelSource
from app.rounds import pool

# Labels stored per transaction: a stopped run loses at most this many solutions' rollouts.
STORE_EVERY = 8


@dataclass(frozen=True)
class AutolabelResult:
    candidates: int  # pool solutions with a ground-truth answer
    skipped: int  # already labeled by this generator with these settings
    stored: int


def generator_record(generator: Generator, settings: RolloutSettings, spec: str) -> dict[str, Any]:
    """What the labels record of their generator: autolabel's description of it and its sampling
    settings, plus the spec it was opened from, so that two local models that share a directory
    name are told apart."""
    return {**generator.description, "settings": settings.describe(), "spec": _spec(spec)}


def _spec(spec: str) -> str:
    path = os.path.expanduser(spec)
    return os.path.abspath(path) if os.path.isdir(path) else spec


def label_by_rollouts(
    factory: sessionmaker[Session],
    project_id: int,
    generator: Generator,
    spec: str,
    settings: RolloutSettings,
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> AutolabelResult:
    """Roll out the pool's solutions that lack this generator's label (at most `limit`) and store
    a rollout label for each."""
    record = generator_record(generator, settings, spec)
    with session_scope(factory) as session:
        rows = pool.pooled_with_answers(session, project_id)
        done = labeled_by(session, project_id, LabelSource.rollout, record)
    fresh = [RolloutTask(str(sid), problem, steps, answer) for sid, problem, steps, answer in rows if sid not in done]
    todo = fresh[:limit] if limit is not None else fresh
    stored, batch = 0, []
    for label in autolabel(generator, todo, settings, progress=progress):
        batch.append(_machine_label(label))
        if len(batch) >= STORE_EVERY:
            stored += _store(factory, project_id, record, batch)
            batch = []
    stored += _store(factory, project_id, record, batch)
    return AutolabelResult(candidates=len(rows), skipped=len(rows) - len(fresh), stored=stored)


def _machine_label(label: RolloutLabel) -> MachineLabel:
    return MachineLabel(
        solution_id=int(label.key),
        ratings=[s.rating for s in label.steps],
        measured={
            "shares": [s.share for s in label.steps],
            "rollouts": [s.rollouts for s in label.steps],
            "first_error": label.first_error,
        },
    )


def _store(factory: sessionmaker[Session], project_id: int, record: dict[str, Any], labels: list[MachineLabel]) -> int:
    if not labels:
        return 0
    with session_scope(factory) as session:
        return store_machine_labels(session, project_id, LabelSource.rollout, record, labels)
