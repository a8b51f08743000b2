"""The promotion rule judges the lower end of a bootstrap interval, on enough held-out data."""

from __future__ import annotations

from app.models import PromoteMetric, Round, RoundSettings
from app.rounds.charts import quality_chart
from app.rounds.promotion import passes, selector_ready


def _settings(**overrides) -> RoundSettings:
    values = {"promote_metric": PromoteMetric.step_auroc, "promote_min": 0.6, "promote_margin": 0.0,
              "promote_min_heldout": 50} | overrides
    return RoundSettings(**values)


def _metrics(value: float | None, interval: list[float] | None, labels: int) -> dict:
    return {"step_auroc": value, "ci95": {"step_auroc": interval}, "n_labels": labels}


def test_a_selector_ranks_only_once_its_interval_clears_the_bar_on_enough_labels() -> None:
    settings = _settings(selector_min_step_auroc=0.9)
    ok, why = selector_ready(settings, _metrics(0.93, [0.86, 0.97], 400))
    assert not ok and why == ("the selector: step_auroc 0.930 (95% interval 0.860 to 0.970, 400 labels): "
                              "its lower end is below the minimum 0.900")
    ok, why = selector_ready(settings, _metrics(0.95, [0.91, 0.98], 400))
    assert ok and why == "the selector's step_auroc 0.950 (95% interval 0.910 to 0.980, 400 labels)"
    ok, why = selector_ready(settings, _metrics(0.99, [0.95, 1.0], 6))
    assert not ok and why == "the selector: step_auroc was measured on 6 held-out labels, fewer than the 50 needed"
    for metrics, reason in ((None, "no held-out step_auroc to judge by"), ({}, "no held-out step_auroc to judge by"),
                            (_metrics(0.95, None, 400), "step_auroc 0.950 has no 95% interval on this held-out set")):
        assert selector_ready(settings, metrics) == (False, f"the selector: {reason}")
    assert selector_ready(_settings(selector_min_step_auroc=None), None) == (True, "any served model ranks the pool")


def test_six_held_out_labels_promote_nothing() -> None:
    ok, why = passes(_settings(), _metrics(0.95, [0.7, 1.0], 6), None)
    assert not ok and "measured on 6 held-out labels, fewer than the 50 needed" in why


def test_the_lower_end_of_the_interval_decides() -> None:
    ok, why = passes(_settings(), _metrics(0.66, [0.52, 0.79], 80), None)
    assert not ok and "lower end is below the minimum 0.600" in why and "0.520 to 0.790" in why
    ok, why = passes(_settings(), _metrics(0.72, [0.64, 0.80], 80), None)
    assert ok and why.startswith("step_auroc 0.720 (95% interval 0.640 to 0.800, 80 labels) passes")


def test_no_interval_no_promotion_and_the_served_model_still_counts() -> None:
    ok, why = passes(_settings(), _metrics(0.9, None, 80), None)
    assert not ok and "no 95% interval" in why
    served = _metrics(0.85, [0.8, 0.9], 80)
    ok, why = passes(_settings(), _metrics(0.8, [0.7, 0.88], 80), served)
    assert not ok and "below the served model's 0.850" in why


def test_best_of_n_counts_problems() -> None:
    settings = _settings(promote_metric=PromoteMetric.best_of_n, promote_min=0.3, promote_min_heldout=20)
    candidate = {"best_of_n": {"problems": 12, "prm_accuracy": 0.7, "prm_accuracy_ci95": [0.45, 0.9]}}
    ok, why = passes(settings, candidate, None)
    assert not ok and "12 held-out problems" in why
    candidate["best_of_n"]["problems"] = 40
    assert passes(settings, candidate, None)[0]


def test_charts_carry_the_intervals() -> None:
    rounds = [Round(number=1, metrics={"candidate": _metrics(0.7, [0.6, 0.8], 80)}),
              Round(number=2, metrics={"candidate": _metrics(0.75, None, 80)})]
    auroc = next(s for s in quality_chart(rounds).series if s.key == "step_auroc")
    first, second = auroc.points
    assert first["interval"] == [0.6, 0.8] and first["high_y"] < first["y"] < first["low_y"]
    assert second["interval"] is None and "low_y" not in second


def test_an_undefined_metric_promotes_nothing_and_says_why() -> None:
    """Held-out labels without an erroneous solution leave first-error F1 undefined (None), for
    the served model too: nothing to judge by, and the round says so rather than 'no held-out'."""
    settings = _settings(promote_metric=PromoteMetric.first_error_f1, promote_min=0.0)
    undefined = {"first_error_f1": None, "ci95": {"first_error_f1": None}, "n_labels": 80}
    assert passes(settings, undefined, undefined) == (
        False, "first_error_f1 is undefined on these 80 held-out labels: "
               "it needs whole solutions both with an error and without")
    ok, why = selector_ready(_settings(selector_min_step_auroc=0.9), _metrics(None, None, 80))
    assert not ok and why == ("the selector: step_auroc is undefined on these 80 held-out labels: "
                              "it needs both right and wrong steps")


def test_a_served_model_without_the_metric_is_not_compared_in_silence() -> None:
    ok, why = passes(_settings(), _metrics(0.72, [0.64, 0.80], 80), _metrics(None, None, 80))
    assert ok and why.endswith("passes (served model: no step_auroc to compare with)")
