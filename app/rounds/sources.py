"""Where a round's labels came from, and how machine labels compare with labelers' on the same
solutions: the evidence for trusting a machine source with training data.

Per machine source, every (machine label, labeler's label) pair on one of the round's picks is
compared: first-error agreement is the share of pairs that put the first -1 on the same step
(or both nowhere); precision and recall of -1 count the steps both rated (a label stops at its
first -1), a machine -1 on a step the labeler also rated -1 being a hit. Each share carries a
Wilson 95% interval, as the payoff card's do.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from active_learning.disagreement import first_error_of_ratings
from app.labeling.review import step_ratings
from app.models import Label, LabelSource, Round, RoundPick
from app.rounds.payoff import UNRATED, wilson


@dataclass(frozen=True)
class Share:
    hits: int
    n: int

    @property
    def value(self) -> float | None:
        return self.hits / self.n if self.n else None

    @property
    def ci95(self) -> tuple[float, float] | None:
        return wilson(self.hits, self.n)


@dataclass(frozen=True)
class SourceComparison:
    source: str
    solutions: int  # picks with both this source's label and a labeler's
    first_error_agreement: Share  # over label pairs
    negative_precision: Share  # over steps the machine rated -1 (and the labeler rated)
    negative_recall: Share  # over steps the labeler rated -1 (and the machine rated)


@dataclass(frozen=True)
class RoundSources:
    # Current labels on the round's picks, per source.
    pick_labels: dict[str, int]
    # Machine labels the round trained on without a human (accept_agreeing_machine_labels).
    accepted_for_training: int
    comparisons: list[SourceComparison]


def round_sources(session: Session, round_: Round) -> RoundSources:
    labels = list(session.scalars(
        select(Label)
        .join(RoundPick, RoundPick.solution_id == Label.solution_id)
        .where(RoundPick.round_id == round_.id, Label.superseded_at.is_(None),
               Label.project_id == round_.project_id)
        .order_by(Label.id)
    ))
    counts: dict[str, int] = defaultdict(int)
    for label in labels:
        counts[label.source.value] += 1
    accepted = (round_.metrics.get("machine_labels") or {}).get("accepted") or 0
    return RoundSources(dict(sorted(counts.items())), accepted, compare(labels))


def compare(labels: list[Label]) -> list[SourceComparison]:
    """Machine labels against labelers' labels of the same solutions, per machine source."""
    human: dict[int, list[list[int | None]]] = defaultdict(list)
    machine: dict[str, dict[int, list[list[int | None]]]] = defaultdict(lambda: defaultdict(list))
    for label in labels:
        ratings = [rating for rating, _ in step_ratings(label.steps)]
        if label.source == LabelSource.human:
            if label.finish_reason not in UNRATED:
                human[label.solution_id].append(ratings)
        else:
            machine[label.source.value][label.solution_id].append(ratings)
    return [_compare(source, by_solution, human) for source, by_solution in sorted(machine.items())]


def _compare(
    source: str, machine: dict[int, list[list[int | None]]], human: dict[int, list[list[int | None]]]
) -> SourceComparison:
    agreed = pairs = hits = said_negative = were_negative = solutions = 0
    for sid, machine_labels in machine.items():
        if not human.get(sid):
            continue
        solutions += 1
        for ours in machine_labels:
            for theirs in human[sid]:
                pairs += 1
                agreed += first_error_of_ratings(ours) == first_error_of_ratings(theirs)
                for a, b in zip(ours, theirs):
                    hits += a == -1 and b == -1
                    said_negative += a == -1
                    were_negative += b == -1
    return SourceComparison(
        source=source, solutions=solutions, first_error_agreement=Share(agreed, pairs),
        negative_precision=Share(hits, said_negative), negative_recall=Share(hits, were_negative),
    )

