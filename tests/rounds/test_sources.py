"""Machine labels against labelers' labels of the same solutions, without a database."""

from __future__ import annotations

from app.models import FinishReason, Label, LabelSource
from app.rounds.sources import compare


def _label(solution_id: int, ratings: list[int], source: LabelSource = LabelSource.human,
           finish: FinishReason | None = None) -> Label:
    steps = [{"completions": [{"rating": r, "flagged": False}], "chosen_completion": 0} for r in ratings]
    return Label(solution_id=solution_id, steps=steps, source=source, finish_reason=finish)


def test_agreement_precision_and_recall_per_machine_source() -> None:
    rollout = LabelSource.rollout
    labels = [
        _label(1, [1, -1], rollout), _label(1, [1, -1]),  # same first error: a hit
        _label(2, [-1], rollout), _label(2, [1, 1, 1]),  # a machine -1 the labeler rated +1
        _label(3, [1, 1, 1], rollout), _label(3, [1, -1]),  # a -1 the machine missed
        _label(4, [-1], rollout),  # no labeler: not compared
        _label(5, [1, -1], rollout), _label(5, [-1], finish=FinishReason.give_up),  # gave up: says nothing
    ]
    [found] = compare(labels)
    assert found.source == "rollout" and found.solutions == 3
    assert (found.first_error_agreement.hits, found.first_error_agreement.n) == (1, 3)
    assert (found.negative_precision.hits, found.negative_precision.n) == (1, 2)
    assert (found.negative_recall.hits, found.negative_recall.n) == (1, 2)
    assert found.negative_recall.value == 0.5
    low, high = found.negative_recall.ci95
    assert 0 < low < 0.5 < high < 1


def test_sources_are_compared_apart_and_without_labelers_there_is_nothing_to_compare() -> None:
    labels = [_label(1, [1, 1], LabelSource.judge), _label(1, [-1], LabelSource.rollout), _label(1, [1, 1])]
    found = {c.source: c for c in compare(labels)}
    assert found["judge"].first_error_agreement.value == 1.0
    assert found["rollout"].first_error_agreement.value == 0.0
    assert compare([_label(1, [1], LabelSource.judge)])[0].first_error_agreement.n == 0
