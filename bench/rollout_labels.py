"""Rollout labels on synthetic verifiable data: how well they match the oracle, by K, and what
they add to a PRM trained on a fixed human budget.

The generator is the tiny causal LM `stepwise prm pretrain` builds, pretrained here on error-free
solutions of problems of its own: it has only seen right solutions, so from a prefix that holds a
mistake it carries the wrong value on, and from a right prefix it reaches the answer as often as
its arithmetic allows. Pool candidates carry injected mistakes whose place the oracle knows
(active_learning.synthetic). active_learning.rollouts labels them with K completions a prefix,
`mc` (every step) and `binary` (binary search for the first error), and each K is scored against
the oracle: first-error accuracy, agreement on the steps both rate, precision and recall of -1,
rollouts spent. A mistake that leaves the value intact (a false remark) cannot change where a
rollout ends, so rollouts cannot see it: recall is reported by kind of mistake.

Every prefix is sampled once with the largest K and each smaller K reads the first K of those
samples, so the rungs differ only in K, as nested subsets of the same draws.

Then PRMs are trained from the same pretrained base with the same recipe and number of steps on
a fixed human budget (one oracle-labeled solution for each of `human_problems` problems) with
and without the pool's rollout labels added, and with the pool labeled by the oracle instead (a
ceiling: what the same solutions would be worth labeled by people), and measured on held-out
problems: step AUROC, first-error F1 and best-of-N.

    nice python bench/rollout_labels.py                 # about 20 minutes on two CPU cores
    nice python bench/rollout_labels.py --seed 1 --output bench/results/rollout_labels_seed1.json
    python bench/rollout_labels.py --quick              # a smoke run, not a measurement
    python bench/rollout_labels.py --device cuda --generator /models/Qwen2.5-Math-1.5B \\
        --base 100m --pretrain-steps 2000 --train-steps 1000   # a real generator on a GPU

`--generator` takes whatever active_learning.rollouts.open_generator takes: a local directory
(transformers), vllm:MODEL, or http://host:port/v1#MODEL (an OpenAI-compatible server), and here
also `simulated:P`: a stand-in for a generator that can do the task, which continues every prefix
from the value it last computed and slips on each remaining operation with chance P. It asks how
good rollout labels are once the generator solves the task, which the tiny LM does not:

    nice python bench/rollout_labels.py --generator simulated:0.1 --prms 0 \
        --output bench/results/rollout_labels_simulated.json   # labels only, seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from active_learning import experiment
from active_learning.config import PretrainConfig
from active_learning.evaluate import first_error_f1
from active_learning.model import is_preset, resolve_device
from active_learning.pretrain import pretrain
from active_learning.generate import PROMPT
from active_learning.rollouts import RolloutLabel, RolloutSettings, RolloutTask, autolabel, open_generator
from active_learning.synthetic import _OPS, Candidate, Problem, _apply, _off_by, error_kinds, iter_candidates, to_prm800k
from active_learning.threads import use_cpu_threads

RESULTS = Path(__file__).parent / "results" / "rollout_labels.json"
METHODS = ("mc", "binary")
PRM_METRICS = ("step_auroc", "first_error_f1", "best_of_n")


@dataclass(frozen=True)
class BenchConfig:
    seed: int = field(default=0, metadata={
        "help": "Seed s draws the pool (s), the human set (s + 5000), the test set (s + 10000) and "
                "the pretraining data (s + 20000), and seeds sampling and training."})
    pool_problems: int = field(default=40, metadata={"help": "Problems of the rollout-labeled pool."})
    solutions_per_problem: int = field(default=3, metadata={"help": "Pool candidates a problem."})
    human_problems: int = field(default=40, metadata={
        "help": "The human budget: one oracle-labeled solution for each of this many other problems."})
    test_problems: int = field(default=30, metadata={"help": "Held-out problems the PRMs are measured on."})
    test_solutions: int = field(default=8, metadata={"help": "Candidates a test problem (best-of-N's N)."})
    error_rate: float = field(default=0.6, metadata={"help": "Share of candidates with a mistake."})
    errors: str = field(default="result,operand,carry,remark", metadata={
        "help": "Kinds of injected mistakes, comma-separated (active_learning.synthetic.ERRORS)."})
    ladder: str = field(default="1,2,4,8", metadata={"help": "Rollouts a prefix (K), increasing."})
    prm_rollouts: int = field(default=8, metadata={"help": "K of the rollout labels the PRMs train on."})
    threshold: float = field(default=0.0, metadata={"help": "A step is +1 when its share exceeds this."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature of the rollouts."})
    max_new_tokens: int = field(default=128, metadata={"help": "Tokens a rollout at most."})
    batch_size: int = field(default=16, metadata={"help": "Prefixes a generator call."})
    pretrain_steps: int = field(default=400, metadata={
        "help": "Pretraining steps of the preset base (the generator unless --generator, and the "
                "PRMs' backbone)."})
    pretrain_seconds: float = field(default=0.0, metadata={
        "help": "Pretraining stops after this long if its steps are not done (0: no limit)."})
    train_steps: int = field(default=150, metadata={"help": "Optimizer steps of every PRM."})
    learning_rate: float = field(default=1e-3, metadata={"help": "PRM peak learning rate."})
    prm_batch_size: int = field(default=16, metadata={"help": "PRM sequences an optimizer step."})
    max_length: int = field(default=256, metadata={"help": "Tokens a training sequence."})
    base: str = field(default="tiny", metadata={"help": "Preset (pretrained here) or directory of the base."})
    generator: str = field(default="", metadata={
        "help": "Generator spec (directory, vllm:MODEL, http://host:port/v1#MODEL); default: the "
                "pretrained base."})
    device: str = field(default="auto", metadata={"help": "auto, cpu or cuda."})
    threads: int = field(default=1, metadata={"help": "CPU threads for torch and the tokenizer."})
    prms: int = field(default=1, metadata={
        "help": "1 trains the PRM arms; 0 measures the labels alone (and pretrains nothing when the "
                "generator is simulated)."})

    @property
    def rungs(self) -> list[int]:
        return [int(k) for k in self.ladder.split(",") if k.strip()]

    @classmethod
    def quick(cls, seed: int = 0) -> BenchConfig:
        return cls(seed=seed, pool_problems=4, solutions_per_problem=2, human_problems=4, test_problems=3,
                   test_solutions=3, ladder="1,2", prm_rollouts=2, max_new_tokens=48, pretrain_steps=3,
                   pretrain_seconds=0, train_steps=2, prm_batch_size=4)


class SampleCache:
    """Samples `most` completions of a prefix once and gives every later request the first K, so
    that each (K, method) run reads nested subsets of the same draws."""

    def __init__(self, generator, most: int) -> None:
        self.generator, self.most = generator, most
        self.description = generator.description
        self.store: dict[str, list[str]] = {}
        self.seconds = 0.0

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]:
        missing = [p for p in dict.fromkeys(prompts) if p not in self.store]
        if missing:
            started = time.monotonic()
            texts = self.generator.complete(missing, dataclasses.replace(settings, rollouts=self.most))
            self.store.update(zip(missing, texts))
            self.seconds += time.monotonic() - started
        return [self.store[p][:settings.rollouts] for p in prompts]


_EQUATION = re.compile(r"^\$(-?\d+) (\+|-|\\times) (\d+) = (-?\d+)\$")
SIMULATED = "simulated:"


class SimulatedGenerator:
    """A generator that can do the task, for asking what rollout labels are worth once one can.

    It reads the problem and the prefix (PROMPT's plain format) and continues from the value the
    prefix last computed, as a model that only ever saw right solutions would: a carried or
    wrong result runs on to a wrong answer, a false remark or restatement changes nothing. Each
    remaining operation slips (a result off by 1 to 3) with chance `slip`, so that a right
    prefix reaches the answer with chance (1 - slip) ** (operations left)."""

    def __init__(self, problems: list[Problem], slip: float, seed: int) -> None:
        if not 0 <= slip < 1:
            raise ValueError(f"{SIMULATED}P needs 0 <= P < 1, not {slip}")
        self.bases = {PROMPT.format(problem=p.text): p for p in problems}
        self.slip, self.rng = slip, random.Random(seed)
        self.description = {"backend": "simulated", "model": f"slip {slip}", "format": "plain"}

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]:
        return [[self._rollout(prompt) for _ in range(settings.rollouts)] for prompt in prompts]

    def _rollout(self, prompt: str) -> str:
        base = next(b for b in self.bases if prompt.startswith(b))
        problem = self.bases[base]
        done = [m for m in (_EQUATION.match(line.strip()) for line in prompt[len(base):].splitlines()) if m]
        value = int(done[-1].group(4)) if done else problem.start
        lines = []
        for op, b in problem.ops[len(done):]:
            result = _apply(op, value, b)
            if self.rng.random() < self.slip:
                result = _off_by(self.rng, result)
            lines.append(f"${value} {_OPS[op]} {b} = {result}$.")
            value = result
        return "\n".join([*lines, f"# Answer\n\n{value}"])


def error_kind(candidate: Candidate) -> str | None:
    """The kind of the candidate's mistake, read back from its text (synthetic.make_candidate
    does not keep it): the first wrong step against the problem and the value before it."""
    wrong = candidate.first_error
    if wrong is None:
        return None
    text = candidate.steps[wrong]
    if text.startswith("The remainder"):
        return "remark"
    if text.startswith("We now have"):
        return "restate"
    equations = [m for m in (_EQUATION.match(s) for s in candidate.steps[:wrong]) if m]
    previous = int(equations[-1].group(4)) if equations else candidate.problem.start
    a, _, b, _ = _EQUATION.match(text).groups()
    if int(a) != previous:
        return "carry"
    return "operand" if int(b) != candidate.problem.ops[len(equations)][1] else "result"


def agreement(labels: list[RolloutLabel], pool: list[Candidate]) -> dict[str, Any]:
    """Rollout labels against the oracle. Steps count up to the oracle's first error, as
    PRM800K's labels do; a neutral step (0) counts as right, since a rollout cannot rate 0."""
    both, rated_by_oracle, claimed_wrong, hits = [], 0, 0, 0
    found_by_kind: dict[str, list[bool]] = {}
    early = late = 0
    for label, candidate in zip(labels, pool):
        truth = candidate.first_error
        last = len(candidate.steps) - 1 if truth is None else truth
        rated_by_oracle += last + 1
        for i in range(last + 1):
            if label.steps[i].rating is not None:
                both.append(label.steps[i].rating == (1 if candidate.ratings[i] >= 0 else -1))
        for estimate in label.steps:
            if estimate.rating == -1:
                claimed_wrong += 1
                hits += candidate.ratings[estimate.step] == -1
        if truth is not None:
            found_by_kind.setdefault(error_kind(candidate), []).append(label.first_error == truth)
        found = label.first_error
        early += found is not None and (truth is None or found < truth)
        late += truth is not None and (found is None or found > truth)
    erroneous = sum(c.first_error is not None for c in pool)
    f1 = first_error_f1([c.first_error for c in pool], [label.first_error for label in labels])
    return {
        "first_error_accuracy": sum(l.first_error == c.first_error for l, c in zip(labels, pool)) / len(pool),
        "first_error_f1": f1["first_error_f1"],
        "first_error_acc_erroneous": f1["first_error_acc_erroneous"],
        "first_error_acc_correct": f1["first_error_acc_correct"],
        "step_accuracy": sum(both) / len(both) if both else None,
        "steps_rated_share": len(both) / rated_by_oracle,
        "precision_wrong": hits / claimed_wrong if claimed_wrong else None,
        "recall_wrong": hits / erroneous if erroneous else None,
        "flagged_too_early": early / len(pool), "missed_or_late": late / len(pool),
        "recall_by_kind": {kind: round(sum(v) / len(v), 4) for kind, v in sorted(found_by_kind.items())},
        "rollouts_per_solution": sum(l.rollouts for l in labels) / len(labels),
    }


def share_separation(labels: list[RolloutLabel], pool: list[Candidate]) -> dict[str, float | None]:
    """Mean estimated share on prefixes before the oracle's first error and from it on: how
    well the generator's outcomes separate right prefixes from wrong ones."""
    before, after = [], []
    for label, candidate in zip(labels, pool):
        truth = candidate.first_error
        for estimate in label.steps:
            if estimate.share is not None and estimate.rollouts:
                (before if truth is None or estimate.step < truth else after).append(estimate.share)
    mean = lambda values: round(sum(values) / len(values), 4) if values else None  # noqa: E731
    return {"right_prefix": mean(before), "wrong_prefix": mean(after),
            "right_prefixes": len(before), "wrong_prefixes": len(after)}


def rollout_record(candidate: Candidate, label: RolloutLabel) -> dict:
    """A PRM800K record of the candidate rated by its rollout label; to_prm800k stops at the
    label's first -1, so the unrated steps after it are never written."""
    ratings = [1 if s.rating is None else s.rating for s in label.steps]
    return to_prm800k(dataclasses.replace(candidate, ratings=ratings), labeler="rollouts")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _pretrained_base(config: BenchConfig, work: Path) -> tuple[str, dict | None]:
    if not is_preset(config.base):
        return config.base, None
    settings = PretrainConfig(output=str(work / "base"), base=config.base, steps=config.pretrain_steps,
                              time_budget_s=config.pretrain_seconds or None, max_length=config.max_length,
                              seed=config.seed, device=config.device)
    count = max(2000, config.pretrain_steps * 8)
    solutions = [to_prm800k(c) for c in iter_candidates(count, 1, config.seed + 20_000, 0.0,
                                                       error_kinds(config.errors))]
    output = pretrain(settings, solutions)
    meta = json.loads((output / "stepwise.json").read_text())
    return str(output), {k: meta[k] for k in ("steps", "last_loss", "train_seconds", "solutions")}


def label_ladder(config: BenchConfig, generator, pool: list[Candidate]) -> tuple[list[dict], dict]:
    """Every (K, method) of the ladder against the oracle; returns the rows and the labels the
    PRMs train on (method -> labels at `prm_rollouts`)."""
    tasks = [RolloutTask(str(i), c.problem.text, c.steps, str(c.problem.answer)) for i, c in enumerate(pool)]
    cache = SampleCache(generator, max(config.rungs))
    rows, kept = [], {}
    for k in sorted(config.rungs, reverse=True):
        for method in METHODS:
            settings = RolloutSettings(rollouts=k, method=method, threshold=config.threshold,
                                       temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                                       batch_size=config.batch_size, seed=config.seed)
            labels = sorted(autolabel(cache, tasks, settings), key=lambda label: int(label.key))
            row = {"rollouts": k, "method": method, **agreement(labels, pool)}
            if method == "mc":
                row["share"] = share_separation(labels, pool)
            rows.append(row)
            _log(f"K={k} {method}: first-error accuracy {row['first_error_accuracy']:.3f}, "
                 f"{row['rollouts_per_solution']:.1f} rollouts a solution ({cache.seconds:.0f} s sampling)")
            if k == config.prm_rollouts:
                kept[method] = labels
    rows.sort(key=lambda row: (row["method"], row["rollouts"]))
    return rows, {"labels": kept, "sampling_seconds": round(cache.seconds, 1),
                  "prefixes_sampled": len(cache.store), "completions_sampled": len(cache.store) * cache.most}


def prm_arms(config: BenchConfig, base: str, pool: list[Candidate], human: list[Candidate],
             test: list[Candidate], kept: dict[str, list[RolloutLabel]], work: Path) -> dict[str, dict]:
    """PRMs on the human budget alone, with the pool's rollout labels added, and with the
    pool labeled by the oracle instead (the ceiling)."""
    settings = experiment.ExperimentConfig(
        seed=config.seed, train_steps=config.train_steps, learning_rate=config.learning_rate,
        batch_size=config.prm_batch_size, max_length=config.max_length, base=config.base,
        device=config.device, pretrain_steps=config.pretrain_steps, errors=config.errors)
    human_records = [to_prm800k(c) for c in human]
    arms = {"human": human_records}
    for method, labels in kept.items():
        arms[f"human+rollouts_{method}"] = human_records + [rollout_record(c, l) for c, l in zip(pool, labels)]
    arms["human+oracle"] = human_records + [to_prm800k(c) for c in pool]
    probe = [to_prm800k(c, first_error_only=False) for c in test[:config.test_solutions]]
    out = {}
    for name, records in arms.items():
        started = time.monotonic()
        checkpoint = experiment._train_prm(settings, base, config.seed, records, probe, work / name)
        measured = experiment._measure(settings, checkpoint, test)
        shutil.rmtree(checkpoint)
        out[name] = {"labeled_solutions": len(records), "human_labels": len(human_records),
                     **{k: measured[k] for k in (*PRM_METRICS, "step_f1", "majority")},
                     "seconds": round(time.monotonic() - started, 1)}
        _log(f"PRM {name}: " + ", ".join(f"{k} {out[name][k]}" for k in PRM_METRICS))
    return out


def run(config: BenchConfig) -> dict[str, Any]:
    started = time.monotonic()
    device = resolve_device(config.device)
    if device == "cpu":
        use_cpu_threads(config.threads)
    kinds = error_kinds(config.errors)
    pool = list(iter_candidates(config.pool_problems, config.solutions_per_problem, config.seed,
                                config.error_rate, kinds))
    human = list(iter_candidates(config.human_problems, 1, config.seed + 5_000, config.error_rate, kinds))
    test = list(iter_candidates(config.test_problems, config.test_solutions, config.seed + 10_000,
                                config.error_rate, kinds))
    work = Path(tempfile.mkdtemp(prefix="stepwise-rollouts-"))
    simulated = config.generator.startswith(SIMULATED)
    try:
        base, pretrained = config.base, None
        if config.prms or not simulated:
            base, pretrained = _pretrained_base(config, work)
            _log(f"base ready: {pretrained}")
        if simulated:
            slip = float(config.generator.removeprefix(SIMULATED))
            generator = SimulatedGenerator([c.problem for c in pool], slip, config.seed)
        else:
            generator = open_generator(config.generator or base, device=device)
        rows, sampled = label_ladder(config, generator, pool)
        kept = sampled.pop("labels")
        del generator
        prms = prm_arms(config, base, pool, human, test, kept, work) if config.prms else {}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "config": dataclasses.asdict(config),
        "pool": {"solutions": len(pool), "erroneous": sum(c.first_error is not None for c in pool),
                 "wrong_answer": sum(not c.is_correct for c in pool),
                 "kinds": dict(Counter(error_kind(c) for c in pool if c.first_error is not None))},
        "generator": {"spec": config.generator or f"{config.base} pretrained here", "pretraining": pretrained,
                      **sampled},
        "labels": rows,
        "prm": prms,
        "environment": {"torch": torch.__version__, "device": device, "threads": torch.get_num_threads(),
                        "machine": platform.machine(), "python": platform.python_version(),
                        "load_average_1m": round(os.getloadavg()[0], 1), "date": time.strftime("%Y-%m-%d")},
        "seconds": round(time.monotonic() - started, 1),
    }


# ---- the figure: a standalone SVG, as active_learning.plot draws the simulations' ----

W, H, LEFT, TOP, BOTTOM = 320, 250, 46, 34, 44
COLORS = {"mc": "#c8322b", "binary": "#4f46e5"}
ARM_COLORS = ["#9ca3af", "#c8322b", "#4f46e5", "#15803d"]


def _line_panel(rows: list[dict], metric: str, title: str, x0: float, top: float | None = None) -> list[str]:
    ks = sorted({r["rollouts"] for r in rows})
    values = [r[metric] for r in rows if r[metric] is not None]
    lo, hi = (0.0, 1.0) if top is None else (0.0, top)
    x = lambda k: x0 + LEFT + (W - LEFT - 14) * (ks.index(k) / max(len(ks) - 1, 1))  # noqa: E731
    y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - (v - lo) / (hi - lo or 1))  # noqa: E731
    out = [f'<text x="{x0 + W / 2:.1f}" y="18" class="title">{title}</text>']
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        shown = f"{v:.2f}" if top is None else f"{v:.1f}" if hi < 10 else f"{v:.0f}"
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - 14}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                   f'<text x="{x0 + LEFT - 5}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{shown}</text>')
    for k in ks:
        out.append(f'<text x="{x(k):.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{x0 + W / 2:.1f}" y="{H - 10}" class="axis">rollouts a prefix (K)</text>')
    for method, color in COLORS.items():
        points = [(r["rollouts"], r[metric]) for r in rows if r["method"] == method and r[metric] is not None]
        path = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle cx="{x(k):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>' for k, v in points]
    if not values:
        out.append(f'<text x="{x0 + W / 2:.1f}" y="{H / 2}" class="axis">no data</text>')
    return out


def _bar_panel(prm: dict[str, dict], x0: float) -> list[str]:
    arms = list(prm)
    y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - v)  # noqa: E731
    out = [f'<text x="{x0 + W / 2:.1f}" y="18" class="title">PRM on held-out problems</text>']
    if not arms:
        return out + [f'<text x="{x0 + W / 2:.1f}" y="{H / 2:.1f}" class="tick" text-anchor="middle">'
                      'not trained in this run (--prms 0)</text>']
    for i in range(5):
        v = i / 4
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + W - 14}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                   f'<text x="{x0 + LEFT - 5}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:.2f}</text>')
    group = (W - LEFT - 14) / len(PRM_METRICS)
    bar = (group - 12) / len(arms)
    for g, metric in enumerate(PRM_METRICS):
        gx = x0 + LEFT + g * group + 6
        for a, arm in enumerate(arms):
            value = prm[arm][metric] or 0.0
            out.append(f'<rect x="{gx + a * bar:.1f}" y="{y(value):.1f}" width="{bar - 1:.1f}" '
                       f'height="{y(0) - y(value):.1f}" fill="{ARM_COLORS[a % len(ARM_COLORS)]}">'
                       f'<title>{arm} {metric} {value:.3f}</title></rect>')
        name = {"step_auroc": "step AUROC", "first_error_f1": "first-error F1", "best_of_n": "best-of-N"}[metric]
        out.append(f'<text x="{gx + group / 2 - 6:.1f}" y="{H - BOTTOM + 16}" class="tick" '
                   f'text-anchor="middle">{name}</text>')
    return out


def svg(results: dict[str, Any]) -> str:
    rows, prm = results["labels"], results["prm"]
    most = max(r["rollouts_per_solution"] for r in rows)
    panels = (_line_panel(rows, "first_error_accuracy", "First-error accuracy vs oracle", 0)
              + _line_panel(rows, "step_accuracy", "Step agreement vs oracle", W)
              + _line_panel(rows, "rollouts_per_solution", "Rollouts a solution", 2 * W, top=max(most * 1.1, 1))
              + _bar_panel(prm, 3 * W))
    legend = [f'<text x="{12 + 110 * i}" y="{H + 18}" class="legend" fill="{color}">&#9632; {method}</text>'
              for i, (method, color) in enumerate(COLORS.items())]
    legend += [f'<text x="{3 * W + 10 + 150 * (i % 2)}" y="{H + 18 + 16 * (i // 2)}" class="legend" '
               f'fill="{ARM_COLORS[i % len(ARM_COLORS)]}">&#9632; {arm}</text>' for i, arm in enumerate(prm)]
    config = results["config"]
    note = (f"seed {config['seed']}: {results['pool']['solutions']} pool solutions, generator "
            f"{results['generator']['spec']}, threshold {config['threshold']}"
            + (f"; human budget {config['human_problems']}, PRMs use K={config['prm_rollouts']}" if prm else ""))
    height = H + 60
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{4 * W}" height="{height}" '
        f'viewBox="0 0 {4 * W} {height}" font-family="sans-serif">',
        "<style>.title{font-size:13px;font-weight:600;text-anchor:middle}.tick{font-size:10px;fill:#555}"
        ".axis{font-size:11px;fill:#333;text-anchor:middle}.grid{stroke:#e5e7eb}.legend{font-size:11px}"
        ".note{font-size:10px;fill:#555}</style>",
        f'<rect width="{4 * W}" height="{height}" fill="white"/>',
        *panels, *legend,
        f'<text x="12" y="{height - 8}" class="note">{note}</text>',
        "</svg>", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(BenchConfig):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None,
                            help=f"{f.metadata['help']} (default {f.default!r})")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    args = vars(parser.parse_args())
    output, quick = args.pop("output"), args.pop("quick")
    seed = args["seed"] if args["seed"] is not None else 0
    config = BenchConfig.quick(seed) if quick else BenchConfig(seed=seed)
    config = dataclasses.replace(config, **{k: v for k, v in args.items() if v is not None})
    if config.prm_rollouts not in config.rungs:
        parser.error("--prm-rollouts must be one of the ladder's K")
    results = run(config)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    output.with_suffix(".svg").write_text(svg(results))
    for row in results["labels"]:
        print(f"K={row['rollouts']:>2} {row['method']:<6} first-error acc {row['first_error_accuracy']:.3f} "
              f"step agreement {row['step_accuracy'] or 0:.3f} recall(-1) {row['recall_wrong'] or 0:.3f} "
              f"precision(-1) {row['precision_wrong'] or 0:.3f} rollouts/solution {row['rollouts_per_solution']:.1f}")
    for arm, m in results["prm"].items():
        print(f"{arm:<22} " + " ".join(f"{k} {m[k]:.3f}" if m[k] is not None else f"{k} -" for k in PRM_METRICS))
    print(f"{results['seconds']:.0f} s; wrote {output} and {output.with_suffix('.svg')}")


if __name__ == "__main__":
    main()
