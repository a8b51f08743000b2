"""Does selection pay on this project's own labels? Each round's picks, once labeled, compared
with the uniform control slice drawn in the same round from the same pool.

The rule's picks (convincing wrong answers and top-scored solutions) should be where labelers
find errors more often than in uniformly drawn solutions, and the next model should gain on
held-out data. The share of labeled picks in which a labeler found an error carries a Wilson
95% interval; the difference between the arms carries Newcombe's interval built from the two
(method 10 of Newcombe, 1998), which stays inside [-1, 1] and behaves at small counts, where a
normal approximation does not.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.labeling.review import step_ratings
from app.models import FinishReason, Label, PickReason, PromoteMetric, Round, RoundPick
from app.rounds.promotion import metric_value

ACTIVE = (PickReason.convincing_wrong, PickReason.top_scored)
CONTROL = (PickReason.random_control,)
# A give-up or a bad-problem report says nothing about where the error was.
UNRATED = (FinishReason.give_up, FinishReason.bad_problem)


@dataclass(frozen=True)
class Arm:
    picks: int
    labeled: int  # picks with at least one current label made here
    labels: int
    with_error: int  # labels in which the labeler rated a step -1
    first_error_step: float | None  # median 1-based step of the first -1, over labels with one
    mean_score: float | None  # mean solution score the picking model gave

    @property
    def error_share(self) -> float | None:
        return self.with_error / self.labels if self.labels else None

    @property
    def error_share_ci(self) -> tuple[float, float] | None:
        return wilson(self.with_error, self.labels)


@dataclass(frozen=True)
class RoundPayoff:
    round_number: int
    round_id: int
    active: Arm
    control: Arm
    # Active minus control error share, with Newcombe's 95% interval.
    difference: float | None
    difference_ci: tuple[float, float] | None
    # The next round's model against the model served while these picks were labeled, on the
    # next round's held-out set, by the project's promotion metric.
    next_gain: float | None


def wilson(successes: int, trials: int) -> tuple[float, float] | None:
    if not trials:
        return None
    # Imported here: scipy.stats is a quarter of the app's import time, which every server
    # worker (and every replacement of a killed one) pays before it serves.
    from scipy.stats import binomtest

    interval = binomtest(successes, trials).proportion_ci(method="wilson")
    return float(interval.low), float(interval.high)


def newcombe(a: Arm, b: Arm) -> tuple[float | None, tuple[float, float] | None]:
    if not a.labels or not b.labels:
        return None, None
    p1, p2 = a.with_error / a.labels, b.with_error / b.labels
    (l1, u1), (l2, u2) = wilson(a.with_error, a.labels), wilson(b.with_error, b.labels)  # type: ignore[misc]
    difference = p1 - p2
    return difference, (difference - math.hypot(p1 - l1, u2 - p2), difference + math.hypot(u1 - p1, p2 - l2))


def _arm(picks: list[tuple[RoundPick, list[Label]]]) -> Arm:
    labels = [label for _, found in picks for label in found if label.finish_reason not in UNRATED]
    first_errors = []
    for label in labels:
        ratings = [rating for rating, _ in step_ratings(label.steps)]
        if -1 in ratings:
            first_errors.append(ratings.index(-1) + 1)
    scores = [pick.score for pick, _ in picks if pick.score is not None]
    return Arm(
        picks=len(picks), labeled=sum(1 for _, found in picks if found), labels=len(labels),
        with_error=len(first_errors),
        first_error_step=statistics.median(first_errors) if first_errors else None,
        mean_score=statistics.fmean(scores) if scores else None,
    )


def _gain(next_round: Round | None, metric: PromoteMetric) -> float | None:
    if next_round is None or not next_round.metrics:
        return None
    candidate = metric_value(next_round.metrics.get("candidate"), metric)
    served = metric_value(next_round.metrics.get("served"), metric)
    return None if candidate is None or served is None else candidate - served


def selection_payoff(session: Session, project_id: int, metric: PromoteMetric) -> list[RoundPayoff]:
    """Per round that picked with a model, newest first: the rule's picks against the control."""
    rounds = list(session.scalars(select(Round).where(Round.project_id == project_id).order_by(Round.number)))
    rows = session.execute(
        select(RoundPick, Label)
        .join(Round, Round.id == RoundPick.round_id)
        .outerjoin(Label, (Label.solution_id == RoundPick.solution_id) & Label.superseded_at.is_(None)
                   & Label.user_id.is_not(None) & (Label.project_id == project_id))
        .where(Round.project_id == project_id, RoundPick.reason.in_(ACTIVE + CONTROL))
        .order_by(RoundPick.id)
    ).all()
    by_round: dict[int, dict[int, tuple[RoundPick, list[Label]]]] = defaultdict(dict)
    for pick, label in rows:
        _, found = by_round[pick.round_id].setdefault(pick.id, (pick, []))
        if label is not None:
            found.append(label)
    payoffs = []
    for i, round_ in enumerate(rounds):
        picks = list(by_round.get(round_.id, {}).values())
        if not picks:
            continue
        active = _arm([p for p in picks if p[0].reason in ACTIVE])
        control = _arm([p for p in picks if p[0].reason in CONTROL])
        difference, interval = newcombe(active, control)
        next_round = rounds[i + 1] if i + 1 < len(rounds) else None
        payoffs.append(RoundPayoff(round_.number, round_.id, active, control, difference, interval,
                                   _gain(next_round, metric)))
    return payoffs[::-1]
