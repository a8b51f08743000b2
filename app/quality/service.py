"""Labeler accuracy, measured on quality-control items.

A QC item is a solution that carries a quality-control label (PRM800K's
`is_quality_control_question`); its earliest such label is the gold. Another label of the same
solution agrees with the gold when it puts the first error at the same step, or finds none where
the gold finds none: that is the judgement PRM800K's phase 2 asks of a labeler, and what a PRM
trained on first errors learns from. Labels that gave up or reported a bad problem say nothing
about the steps and are not compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

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


def first_error(steps: Sequence[dict[str, Any]]) -> int | None:
    """The index of the first step rated -1 on the labeled trajectory, or None."""
    for i, step in enumerate(steps):
        completions = step.get("completions") or []
        chosen = step.get("chosen_completion")
        if chosen is not None and 0 <= chosen < len(completions):
            rating = completions[chosen].get("rating")
        else:
            # Nothing chosen: the trajectory ended here (phase 2's -1 step) or a human step
            # replaced the model's; the model's own completion holds the verdict.
            rating = next((c.get("rating") for c in completions if c.get("rating") is not None), None)
        if rating == -1:
            return i
    return None


def _about_steps():  # type: ignore[no-untyped-def]
    return or_(Label.finish_reason.is_(None), Label.finish_reason.not_in(NOT_ABOUT_STEPS))


def labeler_accuracy(session: Session, project_id: int) -> list[LabelerAccuracy]:
    """Every labeler with at least one label compared against gold, most compared first."""
    gold: dict[int, int | None] = {}
    for solution_id, steps in session.execute(
        select(Label.solution_id, Label.steps)
        .where(Label.project_id == project_id, Label.is_quality_control.is_(True), _about_steps())
        .order_by(Label.id)
    ):
        gold.setdefault(solution_id, first_error(steps))
    if not gold:
        return []
    gold_solutions = select(Label.solution_id).where(
        Label.project_id == project_id, Label.is_quality_control.is_(True)
    )
    tallies: dict[tuple[int | None, str | None], list[Any]] = {}
    for user_id, foreign, username, solution_id, steps in session.execute(
        select(Label.user_id, Label.foreign_labeler, User.username, Label.solution_id, Label.steps)
        .outerjoin(User, User.id == Label.user_id)
        .where(
            Label.project_id == project_id,
            Label.is_quality_control.is_(False),
            Label.solution_id.in_(gold_solutions),
            _about_steps(),
        )
    ):
        if user_id is None and foreign is None:
            continue
        key = (user_id, None) if user_id is not None else (None, foreign)
        tally = tallies.setdefault(key, [username or foreign, 0, 0])
        tally[1] += 1
        tally[2] += first_error(steps) == gold[solution_id]
    found = [
        LabelerAccuracy(user_id, foreign, name, compared, agreed)
        for (user_id, foreign), (name, compared, agreed) in tallies.items()
    ]
    return sorted(found, key=lambda a: (-a.compared, a.name))


def accurate_labelers(session: Session, project_id: int, threshold: float) -> AccurateLabelers:
    """Labelers whose accuracy is at least `threshold`; those never compared are not among them."""
    passing = [a for a in labeler_accuracy(session, project_id) if a.accuracy >= threshold]
    return AccurateLabelers(
        user_ids=frozenset(a.user_id for a in passing if a.user_id is not None),
        foreign_labelers=frozenset(a.foreign_labeler for a in passing if a.foreign_labeler is not None),
    )
