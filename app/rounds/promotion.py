"""The project's promotion rule: which held-out metric, how high, and against what."""

from __future__ import annotations

from app.models import PromoteMetric, RoundSettings


def metric_value(metrics: dict | None, metric: PromoteMetric) -> float | None:
    if not metrics:
        return None
    if metric == PromoteMetric.best_of_n:
        bon = metrics.get("best_of_n")
        return bon["prm_accuracy"] if bon else None
    return metrics.get(metric.value)


def passes(settings: RoundSettings, candidate: dict | None, served: dict | None) -> tuple[bool, str]:
    """The project's promotion rule, and a sentence saying why it passed or not."""
    metric = settings.promote_metric
    value, incumbent = metric_value(candidate, metric), metric_value(served, metric)
    if value is None:
        return False, f"no held-out {metric.value} to judge by"
    if value < settings.promote_min:
        return False, f"{metric.value} {value:.3f} is below the minimum {settings.promote_min:.3f}"
    if incumbent is not None and value < incumbent - settings.promote_margin:
        return False, f"{metric.value} {value:.3f} is below the served model's {incumbent:.3f}"
    return True, f"{metric.value} {value:.3f} passes" + (
        f" (served model: {incumbent:.3f})" if incumbent is not None else ""
    )
