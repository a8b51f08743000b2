import pytest

from active_learning.data import Solution
from active_learning.evaluate import best_of_n, bootstrap_ci, first_error_f1, step_metrics
from active_learning.score import SolutionScore, correct_probability


def test_step_metrics():
    metrics = step_metrics([1, 0, -1, -1], [0.9, 0.8, 0.3, 0.6])
    assert metrics["step_auroc"] == 1.0
    assert metrics["step_f1"] == pytest.approx(2 / 3)  # one of two errors found, no false alarm
    assert metrics["n_steps"] == 4
    assert step_metrics([1, 1], [0.2, 0.9])["step_auroc"] is None


def test_first_error_f1_is_harmonic_mean():
    # Two erroneous solutions (one located), two correct ones (both accepted).
    metrics = first_error_f1([2, 0, None, None], [2, 1, None, None])
    assert metrics["first_error_acc_erroneous"] == 0.5
    assert metrics["first_error_acc_correct"] == 1.0
    assert metrics["first_error_f1"] == pytest.approx(2 * 0.5 / 1.5)
    assert first_error_f1([1], [None])["first_error_f1"] == 0.0


def test_neutral_handling():
    assert correct_probability([0.2, 0.3, 0.5]) == pytest.approx(0.8)
    assert correct_probability([0.2, 0.3, 0.5], neutral_as_correct=False) == pytest.approx(0.5)


def _score(product):
    return SolutionScore([[0, 0, 1]], [product], product, product, False)


def test_best_of_n_against_majority():
    # Problem p: the majority (4, twice) is wrong, the PRM's favourite (5) is right.
    solutions = [Solution("p", "Q", ["s"], answer, "5") for answer in ["4", "4", "5"]]
    solutions += [Solution("q", "R", ["s"], answer, "\\frac12") for answer in ["0.5", "1"]]
    scores = [_score(p) for p in [0.1, 0.2, 0.9, 0.8, 0.3]]
    result = best_of_n(solutions, scores)
    assert result == {"problems": 2, "n": 3, "prm_accuracy": 1.0, "majority_accuracy": 0.5}
    assert best_of_n(solutions[:1], scores[:1]) is None


def test_bootstrap_interval_narrows_with_more_units():
    share = lambda rows: {"share": sum(rows) / len(rows)}  # noqa: E731
    small = bootstrap_ci([1, 0, 1, 1, 0, 1], share, samples=500)["share"]
    large = bootstrap_ci([1, 0, 1, 1, 0, 1] * 50, share, samples=500)["share"]
    assert small[0] < 4 / 6 < small[1] and large[0] < 4 / 6 < large[1]
    assert large[1] - large[0] < (small[1] - small[0]) / 3
    assert bootstrap_ci([1] * 20, share, samples=100) == {"share": [1.0, 1.0]}
    assert bootstrap_ci([1], share, samples=100) == {"share": None}
    # Undefined on most resamples (a rate of an empty class, say): no interval, not a guess.
    rare = lambda rows: {"x": 1.0 if rows.count(1) > len(rows) * 0.9 else None}  # noqa: E731
    assert bootstrap_ci([1, 0] * 10, rare, samples=100) == {"x": None}
