"""The data-efficiency ratio of the paper-protocol experiment, from fitted lines, with a bootstrap.

Lightman et al. fitted a line of PRM quality against log(labels) for each arm and read how many
more labels uniform selection needs for the quality active learning reaches. Here both arms get
one line each with a shared slope (an analysis of covariance: one slope `b` from the points of
both arms, each centred on its own mean; an intercept per arm):

    quality = a_arm + b * ln(labels)

Uniform reaches the active arm's quality at `labels` when a_u + b ln(L_u) = a_a + b ln(labels),
so the ratio L_u / labels is the same at every `labels`:

    ratio = exp((a_active - a_uniform) / b)

It is undefined when the fitted slope is not positive (more labels did not help: no number of
them "reaches" anything), and marked `extrapolated` when it exceeds the ladder's span (largest
over smallest labels), where no rung's answer lies within the labels measured. Points of every
seed are pooled into the fit.

The interval is a percentile bootstrap over seeds, and within each drawn seed over its test
problems where the curve points carry per-problem outcomes (`outcomes`: best-of-N right or not
per test problem, drawn once per seed for every arm and rung alike, since the arms share the
test set). Metrics without outcomes (step AUROC, first-error F1) are resampled over seeds only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MAX_LOG_RATIO = math.log(1e6)
# The metric a point's `outcomes` belong to: best-of-N, right or not per test problem.
OUTCOME_METRIC = "best_of_n"

# A curve: one point per rung, each {"labels": int, metric: float | None, "outcomes": [0/1, ...]}.
Curve = Sequence[Mapping[str, Any]]


def _points(curves: Sequence[Curve], metric: str) -> list[tuple[float, float]]:
    return [(math.log(p["labels"]), float(p[metric])) for curve in curves for p in curve
            if p.get(metric) is not None and p["labels"] > 0]


def fitted_ratio(active: Sequence[Curve], uniform: Sequence[Curve], metric: str) -> float | None:
    """Labels uniform needs for the active arm's quality, per active label, along parallel
    fitted lines of `metric` on ln(labels) (see the module docstring); None if undefined."""
    groups = [_points(active, metric), _points(uniform, metric)]
    if any(len(g) < 2 for g in groups):
        return None
    sxy = sxx = 0.0
    intercepts = []
    for group in groups:
        mx = sum(x for x, _ in group) / len(group)
        my = sum(y for _, y in group) / len(group)
        sxy += sum((x - mx) * (y - my) for x, y in group)
        sxx += sum((x - mx) ** 2 for x, _ in group)
        intercepts.append((mx, my))
    if sxx == 0 or sxy <= 0:
        return None
    slope = sxy / sxx
    (mx_a, my_a), (mx_u, my_u) = intercepts
    gap = (my_a - slope * mx_a) - (my_u - slope * mx_u)
    exponent = gap / slope
    # A nearly flat fit turns any gap between the arms into an astronomical ratio (the first
    # full run overflowed a float): beyond a millionfold the lines say only that they are flat.
    if abs(exponent) > MAX_LOG_RATIO:
        return None
    return math.exp(exponent)


def _resampled(curve: Curve, metric: str, problems: np.ndarray | None) -> list[dict]:
    if problems is None:
        return [dict(p) for p in curve]
    out = []
    for p in curve:
        outcomes = p.get("outcomes")
        quality = float(np.mean(np.asarray(outcomes)[problems])) if outcomes else p.get(metric)
        out.append({**p, metric: quality})
    return out


def bootstrap_ratio(active: Mapping[Any, Curve], uniform: Mapping[Any, Curve], metric: str,
                    samples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The fitted ratio on all seeds' curves (keyed by seed, the same keys in both arms) and
    its 95% percentile interval over resampled seeds and test problems (module docstring)."""
    seeds = sorted(active, key=str)
    ratio = fitted_ratio([active[s] for s in seeds], [uniform[s] for s in seeds], metric)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(samples if len(seeds) >= 2 else 0):
        drawn_a, drawn_u = [], []
        for s in rng.choice(len(seeds), len(seeds)):
            key = seeds[s]
            # The outcomes are best-of-N's: any other metric is resampled over seeds only.
            count = (len(next((p["outcomes"] for p in active[key] if p.get("outcomes")), []))
                     if metric == OUTCOME_METRIC else 0)
            problems = rng.integers(0, count, count) if count else None
            drawn_a.append(_resampled(active[key], metric, problems))
            drawn_u.append(_resampled(uniform[key], metric, problems))
        value = fitted_ratio(drawn_a, drawn_u, metric)
        if value is not None:
            values.append(value)
    # Resamples where the fit is flat have no ratio; an interval that silently drops most of
    # them would describe the lucky few, so it is given only when most have one.
    ci95 = ([float(v) for v in np.percentile(values, [2.5, 97.5])]
            if samples and len(values) >= samples / 2 else None)
    labels = [p["labels"] for curve in (*active.values(), *uniform.values()) for p in curve if p["labels"] > 0]
    # A ratio beyond the ladder's span puts every rung's answer outside the labels measured: the
    # lines are followed past the data, as with a nearly flat fit.
    span = max(labels) / min(labels) if labels else 1.0
    return {"ratio": ratio, "ci95": ci95, "seeds": len(seeds), "resamples_with_ratio": len(values),
            "extrapolated": None if ratio is None else not 1 / span <= ratio <= span}
