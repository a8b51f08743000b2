"""Labeler accuracy, measured on quality-control items.

A QC item is a solution that carries quality-control labels (PRM800K's
`is_quality_control_question`). Its gold is the first error those labels agree on: with one
QC label (a manager's gold), that label; with several (an imported PRM800K file flags every
label of a QC question), their majority, ties going to the earliest. A label agrees with the gold
when it puts the first error at the same step, or finds none where the gold finds none: the
judgement PRM800K's phase 2 asks of a labeler, and what a PRM trained on first errors learns from.
Every other label of the item is measured, and so is each QC label against the majority of the
item's other QC labels, when there are any. Labels that gave up or reported a bad problem say
nothing about the steps: they are neither gold nor measured. Of a labeler's corrections of an
item, one label is measured (see `graded`), here and in the queue's checks (app.quality.gate).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from app.machine_labels.service import is_human
from app.models import FinishReason, Label, User

NOT_ABOUT_STEPS = (FinishReason.give_up, FinishReason.bad_problem)


@dataclass(frozen=True)
class LabelerAccuracy:
    """One labeler's agreement with the gold: a user of this platform, or an imported labeler id."""

    user_id: int | None
    foreign_labeler: str | None
    name: str
    compared: int
    agreed: int

    @property
    def accuracy(self) -> float:
        return self.agreed / self.compared


@dataclass(frozen=True)
class AccurateLabelers:
    """Who reached an accuracy threshold, in the two ways a label names its labeler."""

    user_ids: frozenset[int]
    foreign_labelers: frozenset[str]


def taken_step(step: dict[str, Any]) -> dict[str, Any]:
    """The completion of `step` that stands for the solution's step there, in PRM800K's step
    shape, where a completion without its text is the solution's own step (see
    app.models.label): the alternative the labeler chose; else the solution's own step (one they
    replaced with a step of their own, or phase 2's −1 step that ended the trajectory); else the
    step they wrote, where it is the solution's (a solution made from a PRM800K phase-1 record's
    path; PRM800K's labelers wrote a step only where the model's were wrong, and left it
    unrated: +1); else the first completion rated."""
    completions = step.get("completions") or []
    chosen = step.get("chosen_completion")
    if chosen is not None and 0 <= chosen < len(completions):
        return completions[chosen]
    for completion in completions:
        if "text" not in completion:
            return completion
    human = step.get("human_completion")
    if isinstance(human, str):
        return {"text": human, "rating": 1}
    if isinstance(human, dict):
        return {**human, "rating": 1 if human.get("rating") is None else human["rating"]}
    return next((c for c in completions if c.get("rating") is not None), completions[0] if completions else {})


def first_error(steps: Sequence[dict[str, Any]]) -> int | None:
    """The index of the first of the solution's steps rated -1 (see taken_step), or None."""
    return next((i for i, step in enumerate(steps) if taken_step(step).get("rating") == -1), None)


def _about_steps():  # type: ignore[no-untyped-def]
    return or_(Label.finish_reason.is_(None), Label.finish_reason.not_in(NOT_ABOUT_STEPS))


def graded() -> ColumnElement[bool]:
    """A filter on Label: the labels a gold item is graded by, each as first sent. A correction
    made after the submit's receipt showed the gold (qc_feedback) would grade the gold, not the
    labeler, and no label records whether its receipt showed it; the first judgement is also
    the one that stays the same when a project's settings change."""
    return Label.supersedes_id.is_(None)


def labeler_accuracy(session: Session, project_id: int) -> list[LabelerAccuracy]:
    """Every labeler with at least one label compared against gold, most compared first."""
    current_gold = (
        select(Label.id, Label.solution_id, Label.user_id, Label.foreign_labeler, Label.steps)
        .where(
            Label.project_id == project_id,
            Label.is_quality_control.is_(True),
            Label.superseded_at.is_(None),
            _about_steps(),
        )
        .order_by(Label.id)
    )
    # The QC labels' verdicts per item, in the order they were stored, and who made them. A gold
    # label may be a correction (a manager took a labeler's corrected label), which `graded`
    # leaves out of the labels measured below but which is the item's gold all the same.
    verdicts: dict[int, list[tuple[int, int | None]]] = {}
    makers: dict[int, set[tuple[int | None, str | None]]] = {}
    for gold in session.execute(current_gold):
        verdicts.setdefault(gold.solution_id, []).append((gold.id, first_error(gold.steps)))
        makers.setdefault(gold.solution_id, set()).add(_labeler_key(gold))
    rows = session.execute(
        select(
            Label.id,
            Label.solution_id,
            Label.is_quality_control,
            Label.user_id,
            Label.foreign_labeler,
            User.username,
            Label.steps,
        )
        .outerjoin(User, User.id == Label.user_id)
        .where(
            Label.project_id == project_id,
            Label.solution_id.in_(current_gold.with_only_columns(Label.solution_id)),
            graded(),
            is_human(),
            _about_steps(),
        )
        .order_by(Label.id)
    ).all()
    tallies: dict[tuple[int | None, str | None], list[Any]] = {}
    for row in rows:
        if row.user_id is None and row.foreign_labeler is None:
            continue
        key = _labeler_key(row)
        item = verdicts[row.solution_id]
        if row.is_quality_control:
            # Measured against the item's other QC labels; a lone gold has nothing to meet.
            others = [verdict for label_id, verdict in item if label_id != row.id]
            if not others:
                continue
            gold = _majority(others)
        elif key in makers[row.solution_id]:
            # The gold is this labeler's own later word on the item (their correction, taken as
            # gold): measuring them against it would count their own change of mind as a miss.
            continue
        else:
            gold = _majority([verdict for _, verdict in item])
        tally = tallies.setdefault(key, [row.username or row.foreign_labeler, 0, 0])
        tally[1] += 1
        tally[2] += first_error(row.steps) == gold
    found = [
        LabelerAccuracy(user_id, foreign, name, compared, agreed)
        for (user_id, foreign), (name, compared, agreed) in tallies.items()
    ]
    return sorted(found, key=lambda a: (-a.compared, a.name.casefold(), a.name))


def _labeler_key(row: Any) -> tuple[int | None, str | None]:
    return (row.user_id, None) if row.user_id is not None else (None, row.foreign_labeler)


def _majority(verdicts: list[int | None]) -> int | None:
    """The most common first error; among equals, the one stated first."""
    counts = Counter(verdicts)
    return max(verdicts, key=lambda v: counts[v])


def accurate_labelers(session: Session, project_id: int, threshold: float) -> AccurateLabelers:
    """Labelers whose accuracy is at least `threshold`; those never compared are not among them."""
    passing = [a for a in labeler_accuracy(session, project_id) if a.accuracy >= threshold]
    return AccurateLabelers(
        user_ids=frozenset(a.user_id for a in passing if a.user_id is not None),
        foreign_labelers=frozenset(a.foreign_labeler for a in passing if a.foreign_labeler is not None),
    )
