"""Per-round metrics, and a round model's training loss, laid out for the SVG charts of the
research pages (drawn by their templates, so the pages need no chart library and no script)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from app.models import Round

WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 640, 200, 40, 16, 12, 28

# (key, legend, how to read it from a round's metrics, how to read its 95% interval); every
# value lies in [0, 1].
QUALITY = [
    ("step_auroc", "step AUROC", lambda m: _candidate(m).get("step_auroc"),
     lambda m: (_candidate(m).get("ci95") or {}).get("step_auroc")),
    ("first_error_f1", "first-error F1", lambda m: _candidate(m).get("first_error_f1"),
     lambda m: (_candidate(m).get("ci95") or {}).get("first_error_f1")),
    ("best_of_n", "best-of-N (PRM)", lambda m: (_candidate(m).get("best_of_n") or {}).get("prm_accuracy"),
     lambda m: (_candidate(m).get("best_of_n") or {}).get("prm_accuracy_ci95")),
    ("majority", "majority voting", lambda m: (_candidate(m).get("best_of_n") or {}).get("majority_accuracy"),
     lambda m: None),
    ("wrong_share", "wrong-answer picks", lambda m: (m.get("selection") or {}).get("wrong_answer_share"),
     lambda m: None),
]


def _candidate(metrics: dict[str, Any]) -> dict[str, Any]:
    return metrics.get("candidate") or {}


@dataclass
class Series:
    key: str
    label: str
    points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def polyline(self) -> str:
        return " ".join(f"{p['x']:.1f},{p['y']:.1f}" for p in self.points)


@dataclass
class Chart:
    width: int
    height: int
    rounds: list[dict[str, Any]]
    series: list[Series]
    gridlines: list[dict[str, Any]]

    @property
    def empty(self) -> bool:
        return not any(s.points for s in self.series)


def _x(index: int, count: int) -> float:
    inner = WIDTH - PAD_LEFT - PAD_RIGHT
    return PAD_LEFT + (inner * (index + 0.5) / count if count else 0)


def _y(value: float, top: float) -> float:
    inner = HEIGHT - PAD_TOP - PAD_BOTTOM
    return PAD_TOP + inner * (1 - value / top if top else 1)


def quality_chart(rounds: list[Round]) -> Chart:
    ordered = sorted(rounds, key=lambda r: r.number)
    series = [Series(key, label) for key, label, *_ in QUALITY]
    for i, round_ in enumerate(ordered):
        for s, (_, _, read, read_interval) in zip(series, QUALITY):
            value = read(round_.metrics or {})
            if value is None:
                continue
            point = {"x": _x(i, len(ordered)), "y": _y(value, 1.0), "value": value,
                     "round": round_.number, "interval": read_interval(round_.metrics or {})}
            if point["interval"]:
                point["low_y"], point["high_y"] = (_y(v, 1.0) for v in point["interval"])
            s.points.append(point)
    return Chart(WIDTH, HEIGHT, _round_ticks(ordered), series,
                 [{"y": _y(v, 1.0), "label": f"{v:.2f}"} for v in (0.0, 0.25, 0.5, 0.75, 1.0)])


def labels_chart(rounds: list[Round]) -> Chart:
    ordered = sorted(rounds, key=lambda r: r.number)
    most = max((r.snapshot_labels or 0 for r in ordered), default=0)
    # Gridlines at 0, half and top, each a whole count (0.5 was shown rounded, as a second 0).
    half = max(1, math.ceil(_nice_ceiling(most / 2)))
    top = 2 * half
    bars = Series("labels", "labels in the snapshot")
    for i, round_ in enumerate(ordered):
        if round_.snapshot_labels is not None:
            bars.points.append({"x": _x(i, len(ordered)), "y": _y(round_.snapshot_labels, top),
                                "value": round_.snapshot_labels, "round": round_.number})
    return Chart(WIDTH, HEIGHT, _round_ticks(ordered), [bars],
                 [{"y": _y(v, top), "label": str(v)} for v in (0, half, top)])


def _round_ticks(ordered: list[Round]) -> list[dict[str, Any]]:
    return [{"x": _x(i, len(ordered)), "number": r.number} for i, r in enumerate(ordered)]


LOSS_HEIGHT = 160


@dataclass
class LossChart:
    """A training run's loss by optimizer step, from the checkpoint's training_log.json."""

    width: int
    height: int
    # The loss trained on, then, where the run also learnt next tokens, its step loss alone.
    series: list[Series]
    gridlines: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    evals: list[dict[str, Any]]


def loss_chart(log: dict[str, Any] | None) -> LossChart | None:
    """None when there is no log or nothing in it to draw."""
    log = log or {}
    # A diverged run logs NaN or infinite losses (json writes them); they cannot be drawn.
    entries = [e for e in log.get("train", []) if isinstance(e, dict) and _step(e)
               and isinstance(e.get("loss"), (int, float)) and math.isfinite(e["loss"])]
    if not entries:
        return None
    planned = log.get("total_steps")
    last = max(planned if isinstance(planned, int) else 0, max(e["step"] for e in entries), 1)
    stepwise = [e for e in entries if isinstance(e.get("step_loss"), (int, float)) and math.isfinite(e["step_loss"])]
    top = _nice_ceiling(max(e["loss"] for e in entries))
    inner_w, inner_h = WIDTH - PAD_LEFT - PAD_RIGHT, LOSS_HEIGHT - PAD_TOP - PAD_BOTTOM

    def x(step: int) -> float:
        return PAD_LEFT + inner_w * step / last

    def y(value: float) -> float:
        return PAD_TOP + inner_h * (1 - value / top)

    series = [
        Series(key, label, [{"x": x(e["step"]), "y": y(max(e[key], 0.0)), "value": e[key], "step": e["step"]}
                            for e in points])
        for key, label, points in [
            ("loss", "step loss + next-token loss" if stepwise else "loss", entries),
            ("step_loss", "step loss", stepwise),
        ] if points
    ]
    evals = [{"x": x(e["step"]), "step": e["step"]} for e in log.get("eval") or []
             if isinstance(e, dict) and _step(e) and e["step"] <= last]
    return LossChart(
        WIDTH, LOSS_HEIGHT, series,
        [{"y": y(v), "label": f"{v:g}"} for v in (0.0, top / 2, top)],
        [{"x": x(s), "label": str(s)} for s in sorted({0, last // 2, last})],
        evals,
    )


def _step(entry: dict[str, Any]) -> bool:
    step = entry.get("step")
    return isinstance(step, int) and 0 <= step < 2**53  # what a float holds exactly


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value`, so gridlines
    read as round numbers."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)
