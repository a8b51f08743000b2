"""Does active learning pay? A simulation on synthetic verifiable data with an oracle labeler.

Two arms start from the same pool, the same held-out test set and the same uniformly drawn seed
labels. Every round each arm trains a PRM from the base model on all its labels (as the
platform's rounds do), is measured on the held-out set, and asks the oracle for the same number
of new labels: the *active* arm picks with the platform's rule (active_learning.select: per
problem the top-scored wrong-answer solutions, then the top-scored of the rest), the *uniform*
arm picks uniformly under the same per-problem cap. The data-efficiency ratio is how many labels
the uniform arm needs to reach the quality the active arm reached (Lightman et al. measured 2.6x).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from active_learning.config import PretrainConfig, TrainConfig
from active_learning.data import Solution
from active_learning.model import META_FILE, load_checkpoint, resolve_device
from active_learning.plot import learning_curves_svg
from active_learning.pretrain import pretrain
from active_learning.score import iter_scores
from active_learning.select import Candidate, SelectionRule, select, select_uniform
from active_learning.synthetic import Candidate as Synthetic
from active_learning.synthetic import DEFAULT_ERRORS, ERRORS, error_kinds, iter_candidates, to_prm800k
from active_learning.threads import use_cpu_threads
from active_learning.train import train


@dataclass(frozen=True)
class SimulationConfig:
    seed: int = field(default=0, metadata={"help": "Seed of the pool, the test set, selection and training."})
    pool_problems: int = field(default=500, metadata={"help": "Problems whose candidates can be labeled."})
    solutions_per_problem: int = field(default=6, metadata={"help": "Candidates per pool problem."})
    error_rate: float = field(default=0.6, metadata={"help": "Share of candidates with an injected error."})
    test_problems: int = field(default=80, metadata={"help": "Held-out problems the PRMs are measured on."})
    test_solutions_per_problem: int = field(default=6, metadata={"help": "Candidates per test problem (best-of-N's N)."})
    seed_labels: int = field(default=256, metadata={"help": "Uniform labels both arms start from."})
    labels_per_round: int = field(default=128, metadata={"help": "New labels each round, in both arms."})
    rounds: int = field(default=6, metadata={"help": "Rounds after the seed round."})
    per_problem_cap: int = field(default=2, metadata={"help": "Most picks from one problem in a round."})
    wrong_share: float = field(default=0.8, metadata={"help": "Wrong-answer share of the active arm's picks."})
    score: str = field(default="product", metadata={
        "help": "Solution score the active arm ranks by: product (the paper's) or minimum of the "
                "step probabilities."})
    epochs: float = field(default=4.0, metadata={"help": "Training passes over an arm's labels each round."})
    train_steps: int = field(default=320, metadata={
        "help": "Optimizer steps of every round's training, whatever its number of labels "
                "(replaces `epochs`). With a fixed number of passes the early rounds, with few "
                "labels, train too few steps to beat chance, and the active arm then picks at "
                "random. 0 uses `epochs`."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak learning rate (tiny preset)."})
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step."})
    max_length: int = field(default=384, metadata={"help": "Tokens per sequence."})
    base: str = field(default="tiny", metadata={"help": "PRM backbone (a preset, directory or hub id)."})
    # The kinds a tiny model learns to spot in CPU minutes (bench/prm_learning.py): with the
    # others the PRMs of both arms stay at chance and selection compares nothing.
    errors: str = field(default="carry,remark", metadata={
        "help": f"Kinds of injected mistakes, comma-separated, from {','.join(ERRORS)}."})
    pretrain_steps: int = field(default=400, metadata={
        "help": "Pretrain the preset `base` this many steps on error-free solutions of other "
                "problems first, once for both arms, and train every round's PRM from it with "
                "targets at every token of a step and the next-token loss (the recipe of "
                "bench/prm_learning.py). 0 trains from `base` as it is."})
    threads: int = field(default=1, metadata={
        "help": "CPU threads for torch and the tokenizer. The tiny model's matrices are too small for a second "
                "thread to pay on a loaded two-core machine: one is faster there."})

    def __post_init__(self) -> None:
        if self.score not in ("product", "minimum"):
            raise ValueError("score must be product or minimum")
        error_kinds(self.errors)  # a bad list fails here, not after minutes of pretraining

    def replace(self, **changes: Any) -> SimulationConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def quick(cls, seed: int = 0) -> SimulationConfig:
        """Minutes, not a measurement: for tests and for trying the command."""
        return cls(seed=seed, pool_problems=30, solutions_per_problem=4, test_problems=8,
                   test_solutions_per_problem=4, seed_labels=24, labels_per_round=24, rounds=2,
                   epochs=1.0, train_steps=0, pretrain_steps=0, errors=",".join(DEFAULT_ERRORS),
                   max_length=256)


@dataclass
class _Arm:
    name: str
    labeled: set[int]
    curve: list[dict[str, Any]] = field(default_factory=list)


def _records(pool: list[Synthetic], ids: set[int]) -> list[dict]:
    return [to_prm800k(pool[i]) for i in sorted(ids)]


def _candidates(pool: list[Synthetic], unlabeled: list[int], scores: list[float] | None) -> list[Candidate]:
    return [
        Candidate(i, pool[i].problem.problem_id, None if scores is None else scores[k],
                  "right" if pool[i].is_correct else "wrong", "\n".join(pool[i].steps))
        for k, i in enumerate(unlabeled)
    ]


def _pretrained_base(config: SimulationConfig, work_dir: Path) -> str:
    if not config.pretrain_steps:
        return config.base
    # Problems from a seed of their own, never the pool's or the test set's.
    solutions = [to_prm800k(c) for c in iter_candidates(
        max(2000, config.pretrain_steps * 8), 1, config.seed + 20_000, 0.0, error_kinds(config.errors))]
    settings = PretrainConfig(output=str(work_dir / "base"), base=config.base,
                              steps=config.pretrain_steps, max_length=config.max_length,
                              seed=config.seed)
    return str(pretrain(settings, solutions))


def _train(config: SimulationConfig, base: str, records: list[dict], test: list[dict],
           output: Path) -> tuple[Path, dict]:
    recipe = {"step_token_labels": True, "lm_loss_weight": 1.0} if config.pretrain_steps else {}
    settings = TrainConfig(output=str(output), base=base, epochs=config.epochs, steps=config.train_steps,
                           learning_rate=config.learning_rate, batch_size=config.batch_size,
                           max_length=config.max_length, seed=config.seed, log_every=10**9,
                           save_every=10**9, **recipe)
    train(settings, records, test)
    return output, json.loads((output / META_FILE).read_text())["metrics"]


def _score(config: SimulationConfig, checkpoint: Path, pool: list[Synthetic], ids: list[int]) -> list[float]:
    model, tokenizer, _ = load_checkpoint(checkpoint, resolve_device("auto"))
    solutions = [Solution(pool[i].problem.problem_id, pool[i].problem.text, pool[i].steps) for i in ids]
    scores = iter_scores(model, tokenizer, solutions, max_length=config.max_length)
    return [s.product if config.score == "product" else s.minimum for s in scores]


def _point(round_: int, labels: set[int], pool: list[Synthetic], metrics: dict, seconds: float) -> dict:
    bon = metrics.get("best_of_n") or {}
    wrong = sum(1 for i in labels if not pool[i].is_correct)
    # Labelers stop at the first error: a label rates the steps up to it, or all of them.
    steps = sum(len(pool[i].steps) if pool[i].first_error is None else pool[i].first_error + 1
                for i in labels)
    return {
        "round": round_, "labels": len(labels), "wrong_answer_labels": wrong, "rated_steps": steps,
        "step_auroc": metrics.get("step_auroc"), "step_f1": metrics.get("step_f1"),
        "first_error_f1": metrics.get("first_error_f1"),
        "best_of_n": bon.get("prm_accuracy"), "majority": bon.get("majority_accuracy"),
        "seconds": round(seconds, 1),
    }


def run(config: SimulationConfig, work_dir: Path) -> dict[str, Any]:
    """Both arms, every round; returns the curves and the data-efficiency figures."""
    started = time.monotonic()
    pool = list(iter_candidates(config.pool_problems, config.solutions_per_problem, config.seed,
                                config.error_rate, error_kinds(config.errors)))
    test = [to_prm800k(c, first_error_only=False) for c in iter_candidates(
        config.test_problems, config.test_solutions_per_problem, config.seed + 10_000,
        config.error_rate, error_kinds(config.errors))]
    base = _pretrained_base(config, work_dir)
    everything = [Candidate(i, c.problem.problem_id, None, "", "\n".join(c.steps)) for i, c in enumerate(pool)]
    seed_rule = SelectionRule(budget=config.seed_labels, per_problem_cap=config.per_problem_cap, seed=config.seed)
    seed_ids = {p.solution_id for p in select_uniform(everything, seed_rule)}
    arms = [_Arm("active", set(seed_ids)), _Arm("uniform", set(seed_ids))]
    shared: tuple[Path, dict, float] | None = None
    for round_ in range(config.rounds + 1):
        for arm in arms:
            t0 = time.monotonic()
            if round_ == 0 and shared is not None:
                checkpoint, metrics, seconds = shared  # the same labels train the same model
            else:
                checkpoint, metrics = _train(config, base, _records(pool, arm.labeled), test,
                                             work_dir / arm.name / f"round-{round_}")
                seconds = time.monotonic() - t0
                shared = shared or (checkpoint, metrics, seconds)
            arm.curve.append(_point(round_, arm.labeled, pool, metrics, seconds))
            if round_ == config.rounds:
                continue
            unlabeled = [i for i in range(len(pool)) if i not in arm.labeled]
            rule = SelectionRule(budget=config.labels_per_round, wrong_share=config.wrong_share,
                                 control_share=0.0, per_problem_cap=config.per_problem_cap,
                                 seed=config.seed * 1000 + round_ + 1)
            if arm.name == "active":
                scores = _score(config, checkpoint, pool, unlabeled)
                picks = select(_candidates(pool, unlabeled, scores), rule)
            else:
                picks = select_uniform(_candidates(pool, unlabeled, None), rule, "uniform")
            arm.labeled |= {p.solution_id for p in picks}
            arm.curve[-1]["seconds"] = round(time.monotonic() - t0, 1)
    curves = {arm.name: arm.curve for arm in arms}
    return {
        "config": dataclasses.asdict(config),
        "curves": curves,
        "data_efficiency": {m: data_efficiency(curves["active"], curves["uniform"], m)
                            for m in ("step_auroc", "first_error_f1", "best_of_n")},
        "pool": {"solutions": len(pool), "wrong_answer": sum(1 for c in pool if not c.is_correct)},
        "environment": {"torch": torch.__version__, "device": resolve_device("auto"),
                        "threads": torch.get_num_threads(), "machine": platform.machine(),
                        "python": platform.python_version(),
                        # Other work on the machine slows the run; the seconds are read with it.
                        "load_average_1m": round(os.getloadavg()[0], 1),
                        "date": time.strftime("%Y-%m-%d")},
        "seconds": round(time.monotonic() - started, 1),
    }


# How far past its last point a fitted curve may be followed: a nearly flat fit would otherwise
# "need" billions of labels, which says nothing but that the curve is flat.
EXTRAPOLATE_AT_MOST = 4.0


def labels_to_reach(curve: list[dict[str, Any]], metric: str, target: float) -> tuple[float | None, bool]:
    """Labels at which `curve` reaches `target`: interpolated linearly in log(labels) between
    the first two points that straddle it, else extrapolated from a least-squares line of the
    metric on log(labels), up to EXTRAPOLATE_AT_MOST times the curve's last labels.
    (labels or None, extrapolated?)."""
    points = [(p["labels"], p[metric]) for p in curve if p.get(metric) is not None and p["labels"] > 0]
    for (l0, q0), (l1, q1) in zip(points, points[1:]):
        if q0 < target <= q1:
            t = (target - q0) / (q1 - q0)
            return math.exp(math.log(l0) + t * (math.log(l1) - math.log(l0))), False
    if points and points[0][1] >= target:
        return float(points[0][0]), False
    if len(points) < 2:
        return None, True
    xs = [math.log(lab) for lab, _ in points]
    ys = [q for _, q in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    needed = math.exp(mx + (target - my) / slope) if slope > 0 else math.inf
    if needed > EXTRAPOLATE_AT_MOST * points[-1][0]:
        return None, True
    return needed, True


def data_efficiency(active: list[dict], uniform: list[dict], metric: str) -> dict[str, Any]:
    """Labels uniform selection needs for the quality active learning reached, divided by the
    labels active learning used; at the last round, and at every round after the seed."""
    per_round = []
    for point in active[1:]:
        quality = point.get(metric)
        if quality is None:
            continue
        needed, extrapolated = labels_to_reach(uniform, metric, quality)
        per_round.append({
            "round": point["round"], "labels": point["labels"], "quality": quality,
            "uniform_labels_needed": None if needed is None else round(needed, 1),
            "ratio": None if needed is None else round(needed / point["labels"], 3),
            "extrapolated": extrapolated,
        })
    final = per_round[-1] if per_round else None
    return {"metric": metric, "final": final, "per_round": per_round}


def summary(results: dict[str, Any]) -> str:
    lines = []
    for metric, eff in results["data_efficiency"].items():
        final = eff["final"]
        if final is None or final["ratio"] is None:
            lines.append(f"{metric}: no data-efficiency ratio: the uniform curve does not reach "
                         f"the active arm's quality within {EXTRAPOLATE_AT_MOST:.0f}x its labels")
            continue
        how = "extrapolated" if final["extrapolated"] else "interpolated"
        lines.append(f"{metric}: active reached {final['quality']:.3f} with {final['labels']} labels; "
                     f"uniform needs ~{final['uniform_labels_needed']:.0f} ({how}): {final['ratio']:.2f}x")
    for name, curve in results["curves"].items():
        shown = ", ".join(f"{p['labels']}: {p['step_auroc'] if p['step_auroc'] is None else round(p['step_auroc'], 3)}"
                          for p in curve)
        lines.append(f"{name} step AUROC by labels: {shown}")
    lines.append(f"{results['seconds']:.0f} s on {results['environment']['device']}")
    return "\n".join(lines)


def run_and_report(config: SimulationConfig, output: Path) -> str:
    """Run, then write the results JSON and an SVG plot beside it; returns a summary."""
    work = Path(tempfile.mkdtemp(prefix="stepwise-simulate-"))
    try:
        random.seed(config.seed)
        torch.manual_seed(config.seed)
        if not torch.cuda.is_available():
            use_cpu_threads(config.threads)
        results = run(config, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    plot = output.with_suffix(".svg")
    plot.write_text(learning_curves_svg(results))
    return f"{summary(results)}\nwrote {output} and {plot}"
