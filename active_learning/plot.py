"""The simulations' learning curves as standalone SVGs (no plotting library needed): the iterative
simulation's (`learning_curves_svg`) and the paper-protocol experiment's (`experiment_svg`)."""

from __future__ import annotations

import math
from typing import Any

PANELS = [("step_auroc", "Step AUROC"), ("first_error_f1", "First-error F1"), ("best_of_n", "Best-of-N accuracy")]
COLORS = {"active": "#c8322b", "uniform": "#4f46e5"}
W, H, LEFT, RIGHT, TOP, BOTTOM = 330, 260, 46, 14, 34, 40


def _value_range(values: list[float]) -> tuple[float, float]:
    """The y range of a panel: the values padded by a tenth, kept inside [0, 1]."""
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.1, 0.02)
    return max(0.0, lo - pad), min(1.0, hi + pad)

def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _panel(results: dict[str, Any], metric: str, title: str, x0: float) -> list[str]:
    curves = results["curves"]
    points = {arm: [(p["labels"], p[metric]) for p in curve if p.get(metric) is not None]
              for arm, curve in curves.items()}
    # Best-of-N is worth reporting only against majority voting over the same candidates: the
    # test set is fixed, so that is one level for every round.
    majority = next((p["majority"] for curve in curves.values() for p in curve
                     if metric == "best_of_n" and p.get("majority") is not None), None)
    values = [q for pts in points.values() for _, q in pts] + ([majority] if majority is not None else [])
    labels = [lab for pts in points.values() for lab, _ in pts]
    out = [f'<text x="{x0 + W / 2:.1f}" y="18" class="title">{title}</text>']
    if not values:
        out.append(f'<text x="{x0 + W / 2:.1f}" y="{H / 2:.1f}" class="note">no data</text>')
        return out
    lo, hi = _value_range(values)
    lmax = max(labels)

    def x(labels_: float) -> float:
        return x0 + LEFT + (W - LEFT - RIGHT) * labels_ / lmax

    def y(value: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - (value - lo) / (hi - lo or 1))

    digits = 3 if hi - lo < 0.1 else 2
    for v in _ticks(lo, hi):
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>')
        out.append(f'<text x="{x0 + LEFT - 6}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:.{digits}f}</text>')
    for lab in sorted({lab for lab in labels}):
        out.append(f'<text x="{x(lab):.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">{lab}</text>')
    out.append(f'<text x="{x0 + (W + LEFT) / 2:.1f}" y="{H - 8}" class="axis">labels</text>')
    if metric == "step_auroc" and lo <= 0.5 <= hi:
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - RIGHT}" y1="{y(0.5):.1f}" y2="{y(0.5):.1f}" class="chance"/>'
                   f'<text x="{x0 + LEFT + 4}" y="{y(0.5) - 4:.1f}" class="tick">chance</text>')
    if majority is not None:
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - RIGHT}" y1="{y(majority):.1f}" y2="{y(majority):.1f}" class="chance"/>'
                   f'<text x="{x0 + LEFT + 4}" y="{y(majority) - 4:.1f}" class="tick">majority voting</text>')
    final = (results["data_efficiency"].get(metric) or {}).get("final")
    if final and final.get("quality") is not None:
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - RIGHT}" y1="{y(final["quality"]):.1f}" '
                   f'y2="{y(final["quality"]):.1f}" class="target"/>')
        if final.get("ratio") is not None:
            note = f'{final["ratio"]:.2f}x' + (" (extrapolated)" if final["extrapolated"] else "")
            out.append(f'<text x="{x0 + W - RIGHT}" y="{y(final["quality"]) - 5:.1f}" class="note" '
                       f'text-anchor="end">{note}</text>')
    for arm, pts in points.items():
        line = " ".join(f"{x(lab):.1f},{y(q):.1f}" for lab, q in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLORS.get(arm, "#333")}" stroke-width="2"/>')
        out += [f'<circle cx="{x(lab):.1f}" cy="{y(q):.1f}" r="3" fill="{COLORS.get(arm, "#333")}"/>'
                for lab, q in pts]
    return out


def learning_curves_svg(results: dict[str, Any]) -> str:
    width = W * len(PANELS)
    body = []
    for i, (metric, title) in enumerate(PANELS):
        body += _panel(results, metric, title, i * W)
    legend_y = H + 16
    legend = []
    for i, (arm, color) in enumerate(COLORS.items()):
        name = "active (convincing wrong answers)" if arm == "active" else "uniform"
        legend.append(f'<rect x="{LEFT + i * 260}" y="{legend_y - 9}" width="14" height="4" fill="{color}"/>'
                      f'<text x="{LEFT + 20 + i * 260}" y="{legend_y - 4}" class="axis">{name}</text>')
    config = results["config"]
    caption = (f'seed {config["seed"]}: {config["seed_labels"]} seed labels + {config["rounds"]} rounds of '
               f'{config["labels_per_round"]}; pool {results["pool"]["solutions"]} solutions; dashed: '
               f'quality the active arm reached, with the labels ratio uniform needs for it; y axes zoomed')
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {H + 40}" width="{width}" height="{H + 40}">',
        "<style>text{font-family:system-ui,sans-serif;fill:#333}.title{font-size:14px;font-weight:600;"
        "text-anchor:middle}.tick{font-size:10px;fill:#666}.axis{font-size:11px}.note{font-size:11px;"
        "fill:#c8322b}.grid{stroke:#e3e5ea}.target{stroke:#c8322b;stroke-dasharray:4 4}.chance{stroke:#999;stroke-dasharray:1 3}</style>",
        '<rect width="100%" height="100%" fill="#fff"/>',
        *body, *legend,
        f'<text x="{LEFT}" y="{H + 32}" class="tick">{caption}</text>',
        "</svg>",
    ]) + "\n"


EXPERIMENT_COLORS = {"active": "#c8322b", "uniform": "#4f46e5", "retrain": "#d97706", "uncertainty": "#059669",
                     "mixed": "#0891b2", "warm": "#db2777"}
EXPERIMENT_NAMES = {"active": "active (fixed selector)", "uniform": "uniform",
                    "retrain": "active, selector retrained", "uncertainty": "uncertainty"}


def _experiment_panel(results: dict[str, Any], metric: str, title: str, x0: float,
                      colors: dict[str, str]) -> list[str]:
    """One metric against labels on a log axis: each seed's points, and each arm's mean by rung."""
    seeds = {arm: [[(p["labels"], p[metric]) for p in curve if p.get(metric) is not None and p["labels"] > 0]
                   for curve in by_seed.values()] for arm, by_seed in results["arms"].items()}
    means = {}
    for arm, curves in seeds.items():
        rungs: dict[int, list[tuple[int, float]]] = {}
        for curve in curves:
            for i, point in enumerate(curve):
                rungs.setdefault(i, []).append(point)
        means[arm] = [(sum(l for l, _ in pts) / len(pts), sum(q for _, q in pts) / len(pts))
                      for _, pts in sorted(rungs.items())]
    values = [q for curves in seeds.values() for curve in curves for _, q in curve]
    labels = [lab for curves in seeds.values() for curve in curves for lab, _ in curve]
    out = [f'<text x="{x0 + W / 2:.1f}" y="18" class="title">{title}</text>']
    if not values:
        out.append(f'<text x="{x0 + W / 2:.1f}" y="{H / 2:.1f}" class="note">no data</text>')
        return out
    lo, hi = _value_range(values)
    lmin, lmax = math.log(min(labels)), math.log(max(labels))

    def x(labels_: float) -> float:
        return x0 + LEFT + (W - LEFT - RIGHT) * (math.log(labels_) - lmin) / (lmax - lmin or 1)

    def y(value: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - (value - lo) / (hi - lo or 1))

    digits = 3 if hi - lo < 0.1 else 2
    for v in _ticks(lo, hi):
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>')
        out.append(f'<text x="{x0 + LEFT - 6}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:.{digits}f}</text>')
    ticks = sorted({round(lab) for _, pts in means.items() for lab, _ in pts})
    for lab in ticks:
        out.append(f'<text x="{x(lab):.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">{lab}</text>')
    out.append(f'<text x="{x0 + (W + LEFT) / 2:.1f}" y="{H - 8}" class="axis">labels (log scale)</text>')
    for arm, curves in seeds.items():
        color = colors[arm]
        out += [f'<circle cx="{x(lab):.1f}" cy="{y(q):.1f}" r="2" fill="{color}" fill-opacity="0.35"/>'
                for curve in curves for lab, q in curve]
        line = " ".join(f"{x(lab):.1f},{y(q):.1f}" for lab, q in means[arm])
        out.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
    return out


EXPERIMENT_METRICS = {"best_of_n": "Best-of-N accuracy", "step_auroc": "Step AUROC", "first_error_f1": "First-error F1"}
# Ablation arms, in the order drawn; a run holds at most a few.
ABLATION_COLORS = ["#a16207", "#65a30d", "#9333ea", "#475569"]
LEGEND_COLUMNS = 4


def _with_ablations(results: dict[str, Any]) -> dict[str, dict]:
    """The main part's arms, then each ablation's (`active [wrong_share_half]`); an ablation's
    uniform arm is drawn only where it differs from one drawn already (an ablation on the same
    pool trains the same uniform models)."""
    def quality(curves: dict[str, list[dict]]) -> dict:
        return {seed: [(p["labels"], *(p.get(m) for m in EXPERIMENT_METRICS)) for p in points]
                for seed, points in curves.items()}

    arms = dict(results["arms"])
    for name, ablation in (results.get("ablations") or {}).items():
        for arm, curves in ablation["arms"].items():
            if arm == "uniform" and any(quality(curves) == quality(drawn)
                                        for key, drawn in arms.items() if key.split(" ")[0] == "uniform"):
                continue
            arms[arm if arm == "uniform" and "uniform" not in arms else f"{arm} [{name}]"] = curves
    return arms


def _ratio(eff: dict) -> str:
    return "no ratio" if eff["ratio"] is None else f'ratio {eff["ratio"]:.2f}x' + (
        "" if eff["ci95"] is None else f' (95% {eff["ci95"][0]:.2f}-{eff["ci95"][1]:.2f})')


def experiment_svg(results: dict[str, Any]) -> str:
    """The paper-protocol experiment: quality against labels (log x) per arm, ablations' arms
    included, one panel a metric."""
    arms = _with_ablations(results)
    drawn = {**results, "arms": arms}
    panels = list(EXPERIMENT_METRICS.items())
    width = W * len(panels)
    extra = [arm for arm in arms if arm not in EXPERIMENT_COLORS]
    colors = {**EXPERIMENT_COLORS, **{arm: ABLATION_COLORS[i % len(ABLATION_COLORS)] for i, arm in enumerate(extra)}}
    body = []
    for i, (metric, title) in enumerate(panels):
        body += _experiment_panel(drawn, metric, title, i * W, colors)
    eff, config = results["data_efficiency"], results["config"]
    # The mixed arm is named by its share: runs compare it at more than one.
    names = {**EXPERIMENT_NAMES, "mixed": f'mixed ({config.get("control_share", 0.1):.0%} uniform first)',
             "warm": f'warm (uniform to {config.get("warm_labels", 4)} a problem, then active)'}
    legend = []
    for i, arm in enumerate(arms):
        row, column = divmod(i, LEGEND_COLUMNS)
        x, y = LEFT + column * 230, H + 7 + row * 16
        legend.append(f'<rect x="{x}" y="{y}" width="14" height="4" fill="{colors[arm]}"/>'
                      f'<text x="{x + 20}" y="{y + 5}" class="axis">{names.get(arm, arm)}</text>')
    ratios = [f'{eff["metric"]} {eff.get("arm") or "active"}/uniform {_ratio(eff)}'] + [
        f'[{name}] {_ratio(ablation["data_efficiency"])}' for name, ablation in (results.get("ablations") or {}).items()]
    captions = [f'{eff["seeds"]} seeds, {config["pool_size"]} candidates a pool problem, '
                f'{config["test_candidates"]} a test problem; dots: seeds, lines: means by rung; y axes zoomed'
                + ("; STOPPED early: the rungs finished" if results.get("stopped") else ""),
                "; ".join(ratios)]
    height = H + 40 + 16 * ((len(arms) - 1) // LEGEND_COLUMNS) + 14
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        "<style>text{font-family:system-ui,sans-serif;fill:#333}.title{font-size:14px;font-weight:600;"
        "text-anchor:middle}.tick{font-size:10px;fill:#666}.axis{font-size:11px}.note{font-size:11px;"
        "fill:#c8322b}.grid{stroke:#e3e5ea}</style>",
        '<rect width="100%" height="100%" fill="#fff"/>',
        *body, *legend,
        *(f'<text x="{LEFT}" y="{height - 22 + 14 * i}" class="tick">{line}</text>' for i, line in enumerate(captions)),
        "</svg>",
    ]) + "\n"
