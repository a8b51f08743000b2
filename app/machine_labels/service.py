"""Labels a machine made (rollouts, a judge, a PRM), kept beside the labelers' own.

A machine label is a Label row with `source` other than human, no user, and `source_detail`
naming what made it. One machine label per (solution, source, generator): the generator's
description (model, backend, sampling parameters) is hashed into the label's content_hash, so
storing the same run twice, or resuming it, adds nothing, while another model or other
parameters make labels of their own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, insert, select
from sqlalchemy.orm import Session

from app.models import Label, LabelSource, utcnow
from app.models.label import FinishReason
from app.models.solution import Solution


def is_human(label: Any = Label) -> ColumnElement[bool]:
    """The condition that keeps labelers' labels: what overlap, agreement, QC and standings count."""
    return label.source == LabelSource.human


@dataclass(frozen=True)
class MachineLabel:
    """One machine verdict on a solution: a rating per step up to where it stopped judging
    (None for a step it did not estimate), and what it measured, for `source_detail`."""

    solution_id: int
    ratings: list[int | None]
    measured: dict[str, Any]


def generator_key(source: LabelSource, generator: dict[str, Any]) -> str:
    """The hash that names one generator with its parameters, for one source."""
    canonical = json.dumps({"source": source.value, "generator": generator}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def machine_label_hash(key: str, solution_id: int) -> str:
    """The content hash of one generator's label of a solution: a solution has at most one, and
    the same label exported and imported back has the same hash (app.imports.chunks)."""
    return hashlib.sha256(f"machine:{key}:{solution_id}".encode()).hexdigest()


def labeled_by(session: Session, project_id: int, source: LabelSource, generator: dict[str, Any]) -> set[int]:
    """Ids of the project's solutions that already carry this generator's label."""
    key = generator_key(source, generator)
    rows = session.scalars(
        select(Label.solution_id).where(
            Label.project_id == project_id,
            Label.source == source,
            Label.source_detail["key"].as_string() == key,
        )
    )
    return set(rows)


def store_machine_labels(
    session: Session,
    project_id: int,
    source: LabelSource,
    generator: dict[str, Any],
    labels: Iterable[MachineLabel],
) -> int:
    """Store the labels the solutions lack from this generator; the number stored."""
    if source == LabelSource.human:
        raise ValueError("machine labels need a machine source")
    key = generator_key(source, generator)
    wanted = {machine_label_hash(key, label.solution_id): label for label in labels}
    if not wanted:
        return 0
    have = set(session.scalars(
        select(Label.content_hash).where(Label.project_id == project_id, Label.content_hash.in_(wanted))
    ))
    steps_of = dict(session.execute(
        select(Solution.id, Solution.steps).where(
            Solution.project_id == project_id,
            Solution.id.in_({label.solution_id for label in wanted.values()}),
        )
    ).all())
    rows = [
        _row(project_id, source, key, generator, content_hash, label, len(steps_of[label.solution_id]))
        for content_hash, label in wanted.items()
        if content_hash not in have and label.solution_id in steps_of
    ]
    if rows:
        session.execute(insert(Label), rows)
    return len(rows)


def _row(
    project_id: int, source: LabelSource, key: str, generator: dict[str, Any],
    content_hash: str, label: MachineLabel, n_steps: int,
) -> dict[str, Any]:
    ratings = _judged(label.ratings)
    if -1 in ratings:
        reason = FinishReason.found_error
    elif len(ratings) == n_steps:
        reason = FinishReason.solution
    else:
        reason = None
    return {
        "project_id": project_id,
        "solution_id": label.solution_id,
        "source": source,
        "source_detail": {"key": key, **generator, **label.measured},
        "steps": [_step(r) for r in ratings],
        "finish_reason": reason,
        "content_hash": content_hash,
        "extra": {},
        "is_quality_control": False,
        "is_initial_screening": False,
        "created_at": utcnow(),
    }


def _judged(ratings: list[int | None]) -> list[int]:
    """The ratings up to the first step not estimated, and up to the first -1 (PRM800K's shape:
    nothing is rated after the first error)."""
    kept: list[int] = []
    for rating in ratings:
        if rating is None:
            break
        kept.append(rating)
        if rating == -1:
            break
    return kept


def _step(rating: int) -> dict[str, Any]:
    # The same shape as a labeler's step (app.labeling.service.prm800k_step).
    return {
        "completions": [{"rating": rating, "flagged": False}],
        "human_completion": None,
        "chosen_completion": None if rating == -1 else 0,
    }
