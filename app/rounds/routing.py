"""Routing machine-labeled solutions: to humans first where machine voices disagree or are
unsure, with the reason; into training without a human where they all agree and the project
says so (round setting accept_agreeing_machine_labels).

The voices are each machine source's current label (its latest, when a source labeled a
solution twice) and the step scores of the PRM that ranks the pool (the selector: the served
model unless a fixed one is pinned), whose scores of pool solutions the round already has. A
solution a human has labeled is a human's to judge, and is neither routed nor accepted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from active_learning.disagreement import (
    PRM_DISAGREES,
    Opinion,
    Verdict,
    first_error_of_ratings,
    judge,
)
from app.labeling.review import step_ratings
from app.machine_labels.service import is_human
from app.models import MACHINE_SOURCES, Label, LabelSource, PickReason, SolutionScore
from app.rounds import pool


@dataclass(frozen=True)
class StoredMachineLabel:
    id: int
    solution_id: int
    source: LabelSource
    steps: list[dict[str, Any]]
    source_detail: dict[str, Any] | None


def pick_reason(verdict: Verdict) -> PickReason:
    if verdict.priority >= PRM_DISAGREES:
        return PickReason.machine_disagreement
    if verdict.priority > 0:
        return PickReason.machine_uncertain
    return PickReason.machine_unchecked


def opinion(label: StoredMachineLabel) -> Opinion:
    ratings = [rating for rating, _ in step_ratings(label.steps)]
    return Opinion(label.source.value, first_error_of_ratings(ratings), _shares(label.source_detail))


def _shares(detail: dict[str, Any] | None) -> list[float | None] | None:
    # What a rollout measured per step, stored in source_detail by app.machine_labels.
    shares = (detail or {}).get("shares")
    return list(shares) if isinstance(shares, list) else None


def latest_by_source(labels: Iterable[StoredMachineLabel]) -> dict[int, list[StoredMachineLabel]]:
    """Per solution, each source's latest label, sources in a fixed order (so that reasons
    name them alike every time)."""
    latest: dict[int, dict[LabelSource, StoredMachineLabel]] = defaultdict(dict)
    for label in sorted(labels, key=lambda m: m.id):
        latest[label.solution_id][label.source] = label
    return {sid: [by_source[s] for s in sorted(by_source)] for sid, by_source in latest.items()}


def verdicts(
    latest: dict[int, list[StoredMachineLabel]], step_scores: dict[int, list[float | None]]
) -> dict[int, Verdict]:
    return {sid: judge([opinion(m) for m in labels], step_scores.get(sid)) for sid, labels in latest.items()}


def machine_labels(
    session: Session, project_id: int, *, max_label_id: int | None = None, pool_only: bool = False
) -> list[StoredMachineLabel]:
    """Current machine labels of solutions no human has labeled (up to the snapshot's last
    label, when given); with `pool_only`, of solutions still in the pool (none of their slots
    leased or done)."""
    human = select(Label.solution_id).where(Label.project_id == project_id, is_human())
    if max_label_id is not None:
        human = human.where(Label.id <= max_label_id)
    labeled = set(session.scalars(human))
    query = select(Label.id, Label.solution_id, Label.source, Label.steps, Label.source_detail).where(
        Label.project_id == project_id,
        Label.source.in_(MACHINE_SOURCES),
        Label.superseded_at.is_(None),
    )
    if max_label_id is not None:
        query = query.where(Label.id <= max_label_id)
    rows = [StoredMachineLabel(*row) for row in session.execute(query) if row.solution_id not in labeled]
    if pool_only:
        in_pool = pool.in_pool_among(session, project_id, {m.solution_id for m in rows})
        rows = [m for m in rows if m.solution_id in in_pool]
    return rows


def prm_step_scores(
    session: Session, version_id: int | None, solution_ids: Iterable[int]
) -> dict[int, list[float | None]]:
    if version_id is None:
        return {}
    found: dict[int, list[float | None]] = {}
    ids = list(solution_ids)
    for start in range(0, len(ids), 5000):
        found.update(session.execute(
            select(SolutionScore.solution_id, SolutionScore.step_scores).where(
                SolutionScore.model_version_id == version_id,
                SolutionScore.solution_id.in_(ids[start:start + 5000]),
            )
        ).all())
    return found


def routed(
    session: Session, project_id: int, version_id: int | None, limit: int
) -> list[tuple[int, Verdict]]:
    """The pool's solutions whose machine labels need a human, most urgent first, at most
    `limit`."""
    latest = latest_by_source(machine_labels(session, project_id, pool_only=True))
    found = verdicts(latest, prm_step_scores(session, version_id, latest))
    urgent = [(sid, v) for sid, v in found.items() if v.route]
    urgent.sort(key=lambda item: (-item[1].priority, item[0]))
    return urgent[:limit]


def accepted_label_ids(
    session: Session, project_id: int, version_id: int | None, max_label_id: int
) -> set[int]:
    """The snapshot's machine labels that may train without a human: of each solution whose
    machine voices all agree, each source's latest label."""
    latest = latest_by_source(machine_labels(session, project_id, max_label_id=max_label_id))
    found = verdicts(latest, prm_step_scores(session, version_id, latest))
    return {m.id for sid, labels in latest.items() if not found[sid].route for m in labels}

