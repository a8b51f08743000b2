"""The project's promotion rule: which held-out metric, how high, judged on how much, and
against what; and the bar a model must pass before it ranks a round's pool.

Held-out sets are small in a labeling project (a few dozen labels in early rounds), and a metric
measured on them swings widely: the rule judges the lower end of the metric's 95% bootstrap
interval, and refuses to judge on fewer held-out labels than the project asks for.
"""

from __future__ import annotations

from app.models import PromoteMetric, RoundSettings

# Why a measured metric can be None: the held-out labels lack a class it needs, and then it says
# nothing of the model (a 0 would read as a model that failed).
_UNDEFINED_WITHOUT = {
    PromoteMetric.step_auroc: "it needs both right and wrong steps",
    PromoteMetric.first_error_f1: "it needs whole solutions both with an error and without",
}


def metric_value(metrics: dict | None, metric: PromoteMetric) -> float | None:
    if not metrics:
        return None
    if metric == PromoteMetric.best_of_n:
        bon = metrics.get("best_of_n")
        return bon["prm_accuracy"] if bon else None
    return metrics.get(metric.value)


def metric_interval(metrics: dict | None, metric: PromoteMetric) -> list[float] | None:
    if not metrics:
        return None
    if metric == PromoteMetric.best_of_n:
        return (metrics.get("best_of_n") or {}).get("prm_accuracy_ci95")
    return (metrics.get("ci95") or {}).get(metric.value)


def heldout_size(metrics: dict, metric: PromoteMetric) -> tuple[int, str]:
    """How much held-out data the metric was measured on, and its unit."""
    if metric == PromoteMetric.best_of_n:
        return (metrics.get("best_of_n") or {}).get("problems", 0), "problems"
    return metrics.get("n_labels", 0), "labels"


def lower_end_reaches(metrics: dict | None, metric: PromoteMetric, minimum: float,
                      min_heldout: int) -> tuple[bool, str]:
    """Whether the lower end of the metric's 95% interval reaches `minimum`, measured on at
    least `min_heldout` held-out labels (best-of-N: problems), and a sentence saying what was
    measured or why it cannot be judged."""
    value = metric_value(metrics, metric)
    if value is None and metrics and metric in _UNDEFINED_WITHOUT and metric.value in metrics:
        size, unit = heldout_size(metrics, metric)
        return False, f"{metric.value} is undefined on these {size} held-out {unit}: {_UNDEFINED_WITHOUT[metric]}"
    if metrics is None or value is None:
        return False, f"no held-out {metric.value} to judge by"
    size, unit = heldout_size(metrics, metric)
    if size < min_heldout:
        return False, f"{metric.value} was measured on {size} held-out {unit}, fewer than the {min_heldout} needed"
    interval = metric_interval(metrics, metric)
    if interval is None:
        return False, f"{metric.value} {value:.3f} has no 95% interval on this held-out set"
    low, high = interval
    measured = f"{metric.value} {value:.3f} (95% interval {low:.3f} to {high:.3f}, {size} {unit})"
    if low < minimum:
        return False, f"{measured}: its lower end is below the minimum {minimum:.3f}"
    return True, measured


def passes(settings: RoundSettings, candidate: dict | None, served: dict | None) -> tuple[bool, str]:
    """The project's promotion rule, and a sentence saying why it passed or not."""
    metric = settings.promote_metric
    ok, measured = lower_end_reaches(candidate, metric, settings.promote_min, settings.promote_min_heldout)
    if not ok:
        return False, measured
    value, incumbent = metric_value(candidate, metric), metric_value(served, metric)
    assert value is not None
    if incumbent is not None and value < incumbent - settings.promote_margin:
        return False, f"{measured} is below the served model's {incumbent:.3f}"
    if incumbent is not None:
        return True, f"{measured} passes (served model: {incumbent:.3f})"
    unmatched = "" if served is None else f" (served model: no {metric.value} to compare with)"
    return True, f"{measured} passes{unmatched}"


def selector_ready(settings: RoundSettings, metrics: dict | None) -> tuple[bool, str]:
    """Whether a model ranks well enough on held-out labels to choose a round's picks, judged
    as promotion is, and why."""
    if settings.selector_min_step_auroc is None:
        return True, "any served model ranks the pool"
    ok, measured = lower_end_reaches(metrics, PromoteMetric.step_auroc, settings.selector_min_step_auroc,
                                     settings.promote_min_heldout)
    return ok, f"the selector's {measured}" if ok else f"the selector: {measured}"
