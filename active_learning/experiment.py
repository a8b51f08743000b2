"""The paper-protocol experiment: does choosing what to label pay, measured as Lightman et al. did?

"Let's Verify Step by Step" (section 4.2) measured active learning like this, and so does this
module, on synthetic verifiable data (active_learning.synthetic) with an oracle labeler:

1. Every pool problem gets K candidates (`pool_size`, 64 by default): room to choose.
2. A FIXED selector PRM is trained once, on `selector_labels` uniformly drawn candidates per
   problem, and scores every candidate once. Its labels are counted in no arm.
3. For each rung of a ladder of samples per problem (1, 2, 4 by default), each arm picks that many
   candidates per problem, the oracle labels them (stopping at the first wrong step, as PRM800K
   labelers did), and a fresh PRM is trained on them from the same base with the same recipe and
   the same number of optimizer steps (`train_steps`, whatever the number of labels). The arms:
   - `active`: active_learning.select's rule on the fixed selector's scores: per problem
     `wrong_share` of the picks are the most convincing wrong-answer candidates, the rest the
     most convincing of the others (`score`: product of step probabilities, or their minimum);
   - `uniform`: a uniform draw per problem (nested: each rung's draw holds the previous one);
   - `retrain`: the platform's iterative rounds: between rungs the selector is retrained on the
     labels so far (its seed labels and the arm's) and picks the rung's new candidates;
   - `uncertainty`: per problem the candidates whose least certain step is closest to 0.5
     under the fixed selector (ActPRM, 2025), so that it differs from `active` in the rule only;
   - `mixed` (not in the default run): `active` with `control_share` of each set drawn
     uniformly first, as the platform's rounds draw their control slice, so that a set keeps
     some of what a uniform one shows (clean solutions, right answers with a slip);
   - `warm` (not in the default run): the uniform arm's own draw up to `warm_labels` a problem,
     then, above it, those labels plus `active` picks among the rest by a fixed selector trained
     on them: rounds that draw uniformly until the PRM ranks, then choose. Up to `warm_labels`
     it is the uniform arm's set, so it differs from uniform only in the picks above it.
4. Each PRM is measured on held-out problems with `test_candidates` candidates each: best-of-N
   accuracy (N = test_candidates, the candidate with the highest product score), step AUROC and
   first-error F1, all from one scoring pass of the test set.
5. The data-efficiency ratio (active_learning.efficiency) comes from parallel fitted lines of
   `metric` against ln(labels) over every seed, with a bootstrap 95% interval over seeds and,
   for best-of-N, over test problems within each seed. Each seed has its own pool, test set,
   pretrained base and training seed.
6. Ablations (ABLATIONS: pool size, selector labels, wrong-answer share, minimum score) run in
   each seed's job after the main arms, on the active and uniform arms, reusing the seed's
   pretrained base and every model whose labels they do not change. Seeds run in processes of
   their own (`jobs`), so the default three share a 2-core machine to the end.

The mistakes are those the tiny model learns to find on CPU: `carry` (an equation starts from a
miscopy of the previous result, off by 1 to 3; the slip runs on, so the answer is wrong) and
`restate` (a remark restates the current value wrongly, off by 1 to 3 or by 10 to 30; the value
runs on intact, so the answer stays right). Both ask the model to compare a number with the
previous step's result, the one check bench/prm_learning.py found a tiny pretrained model
learns (step AUROC 0.97 on miscopies, against chance for wrong results, wrong operands and false
remainders). The grades of difficulty: far miscopies look different, near ones do not; carried
slips make convincing wrong answers (the selector's product score must catch the step), while
restated slips sit in right-answer solutions that best-of-N cannot tell from clean ones; and the
hazard puts a slip at any step with the same chance, early or late. `restate` measured on its
own (bench/results/prm_learning_restate.json: bench/prm_learning.py --errors restate, 300 s a
model on one thread): step AUROC 0.93 after 144 optimizer steps, against 0.62 for the
position-only baseline trained the same way, so the tiny model learns to see it.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from active_learning.config import PretrainConfig, TrainConfig
from active_learning.data import Solution
from active_learning.efficiency import bootstrap_ratio
from active_learning.evaluate import first_error_f1, step_metrics
from active_learning.files import replace_whole
from active_learning.model import PRESETS, is_preset, load_checkpoint, resolve_device
from active_learning.plot import experiment_svg
from active_learning.pretrain import pretrain
from active_learning.score import best_of_n_order, iter_scores
from active_learning.select import Candidate, SelectionRule, select, select_uniform
from active_learning.synthetic import Candidate as Synthetic
from active_learning.synthetic import ERRORS, error_kinds, iter_candidates, to_prm800k
from active_learning.threads import use_cpu_threads
from active_learning.train import train

ARMS = ("active", "uniform", "retrain", "uncertainty", "mixed", "warm")
# Four arms fit the default run in 90 minutes on two cores; `mixed` is asked for by name.
DEFAULT_ARMS = ("active", "uniform", "retrain", "uncertainty")
HEADLINE_ARMS = ("active", "mixed", "warm")
# Arms whose picks come from the fixed selector trained on `selector_labels` a problem.
SELECTOR_ARMS = ("active", "mixed", "uncertainty", "retrain")
METRICS = ("best_of_n", "step_auroc", "first_error_f1")

# Named ablations: config overrides the bench script runs beside the main configuration, on the
# two arms the ratio compares (the others would only add time), or on the arms they name.
ABLATIONS: dict[str, dict[str, Any]] = {
    "pool_16": {"pool_size": 16},
    "selector_4_labels": {"selector_labels": 4},
    "wrong_share_half": {"wrong_share": 0.5},
    "minimum_score": {"score": "minimum"},
    "control_half": {"control_share": 0.5, "arms": "mixed,uniform"},
}
ABLATION_ARMS = "active,uniform"


def ablation_overrides(name: str) -> dict[str, Any]:
    """What the named ablation changes in the main configuration, its arms included."""
    return {"arms": ABLATION_ARMS, **ABLATIONS[name]}


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class ExperimentConfig:
    seed: int = field(default=0, metadata={
        "help": "First seed; seed s draws the pool, the test set (s + 10000), the pretraining "
                "data (s + 20000) and initialises training."})
    seeds: int = field(default=3, metadata={"help": "Seeds run, from `seed` on; the interval is over them."})
    pool_problems: int = field(default=100, metadata={"help": "Problems whose candidates can be labeled."})
    pool_size: int = field(default=64, metadata={"help": "Candidates per pool problem (K)."})
    test_problems: int = field(default=100, metadata={"help": "Held-out problems the PRMs are measured on."})
    test_candidates: int = field(default=16, metadata={"help": "Candidates per test problem (best-of-N's N)."})
    error_rate: float = field(default=0.6, metadata={"help": "Share of candidates with an injected error."})
    errors: str = field(default="carry,restate", metadata={
        "help": f"Kinds of injected mistakes, comma-separated, from {','.join(ERRORS)} (see the "
                "module docstring for why these two)."})
    # 1 to 4 a problem is where a tiny PRM of `train_steps` goes from chance to ranking well (seed
    # 0, uniform: best-of-16 0.37, 0.58, 0.89, then 0.94 at 16); higher rungs add time, not slope.
    ladder: str = field(default="1,2,4", metadata={
        "help": "Samples per problem at each rung, increasing, comma-separated."})
    arms: str = field(default=",".join(DEFAULT_ARMS), metadata={
        "help": f"Arms to run, comma-separated, from {','.join(ARMS)}."})
    selector_labels: int = field(default=1, metadata={
        "help": "Uniform samples per problem the fixed selector is trained on."})
    wrong_share: float = field(default=0.8, metadata={
        "help": "Share of the active picks that are convincing wrong-answer candidates."})
    warm_labels: int = field(default=4, metadata={
        "help": "Uniform samples per problem the warm arm draws before it picks by a selector "
                "trained on them."})
    control_share: float = field(default=0.1, metadata={
        "help": "Share of the mixed arm's picks drawn uniformly first (the platform's control slice; "
                "its round default)."})
    score: str = field(default="product", metadata={
        "help": "Selector score of a candidate: product (the paper's) or minimum of its step "
                "probabilities."})
    metric: str = field(default="best_of_n", metadata={
        "help": f"Quality the headline ratio is read from: {', '.join(METRICS)}."})
    # 160 steps left every PRM at chance whatever its labels (the first full run); 320 is the
    # fewest measured that learn (seed 0, docs/prm.md); 2e-3 at 320 steps diverged.
    train_steps: int = field(default=320, metadata={
        "help": "Optimizer steps of every PRM, selectors included, whatever its labels."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak learning rate (1e-3 suits tiny)."})
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step."})
    max_length: int = field(default=384, metadata={"help": "Tokens per sequence."})
    base: str = field(default="tiny", metadata={"help": "PRM backbone: a preset (tiny, 100m, 500m) or a directory."})
    device: str = field(default="auto", metadata={"help": "auto (CUDA when present), cpu or cuda."})
    pretrain_steps: int = field(default=400, metadata={
        "help": "Pretrain the preset `base` this many steps on error-free solutions of other "
                "problems, once a seed, and train every PRM from it with the recipe of "
                "bench/prm_learning.py. 0 trains from `base` as it is."})
    bases: str = field(default="", metadata={
        "help": "Directory that keeps each seed's pretrained base for later runs, which reuse it "
                "when base, pretrain_steps, max_length, errors and seed match; empty keeps none."})
    bootstrap: int = field(default=2000, metadata={"help": "Bootstrap resamples of the ratio's interval."})
    threads: int = field(default=1, metadata={"help": "CPU threads for torch and the tokenizer, in each job."})
    jobs: int = field(default=3, metadata={
        "help": "Seeds run at once, each in a process of its own with `threads` threads; as many as "
                "the default seeds, since with fewer the last seed runs alone while a core idles."})

    def __post_init__(self) -> None:
        error_kinds(self.errors)
        rungs = self.rungs
        if not rungs or rungs[0] < 1 or list(rungs) != sorted(set(rungs)):
            raise ValueError("ladder: increasing positive samples per problem, e.g. 1,2,4")
        if max(rungs[-1], self.selector_labels) > self.pool_size:
            raise ValueError("ladder and selector_labels cannot ask for more than pool_size candidates a problem")
        # The warm selector is the uniform arm's PRM at that rung, and the arm differs from
        # uniform only above it.
        if "warm" in self.arm_names and self.warm_labels not in rungs[:-1]:
            raise ValueError("warm_labels must be a rung of the ladder below its last")
        if not self.arm_names or not set(self.arm_names) <= set(ARMS):
            raise ValueError(f"arms: choose from {', '.join(ARMS)}")
        if self.score not in ("product", "minimum"):
            raise ValueError("score must be product or minimum")
        if self.metric not in METRICS:
            raise ValueError(f"metric: choose from {', '.join(METRICS)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError("device must be auto, cpu or cuda")
        if not 0 <= self.wrong_share <= 1:
            raise ValueError("wrong_share must be between 0 and 1")
        if not 0 <= self.control_share <= 1:
            raise ValueError("control_share must be between 0 and 1")
        if min(self.seeds, self.pool_problems, self.test_problems, self.selector_labels,
               self.train_steps, self.jobs, self.threads) < 1 or self.test_candidates < 2:
            raise ValueError("seeds, problems, selector_labels, train_steps, jobs and threads must be "
                             "positive, test_candidates at least 2")

    @property
    def rungs(self) -> tuple[int, ...]:
        return _ints(self.ladder)

    @property
    def arm_names(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.arms.split(",") if a.strip())

    def replace(self, **changes: Any) -> ExperimentConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def quick(cls, seed: int = 0) -> ExperimentConfig:
        """Seconds to a minute, not a measurement: for tests and for trying the command."""
        return cls(seed=seed, seeds=2, pool_problems=6, pool_size=8, test_problems=4,
                   test_candidates=4, ladder="1,2", train_steps=2, pretrain_steps=1,
                   batch_size=8, max_length=192, bootstrap=200, jobs=1)


# ---- the sets each arm labels: pure functions on select.Candidate lists ----

def _rule(per_problem: int, problems: int, seed: int, wrong_share: float = 0.0,
          control_share: float = 0.0) -> SelectionRule:
    # Identical candidates are distinct samples of the pool, labeled as such in every arm, so the
    # near-duplicate check is off; it would otherwise cap clean solutions at one a problem.
    return SelectionRule(budget=per_problem * problems, wrong_share=wrong_share, control_share=control_share,
                         per_problem_cap=per_problem, duplicate_similarity=2.0, seed=seed)


def _problems(candidates: Sequence[Candidate]) -> int:
    return len({c.problem_id for c in candidates})


def active_set(scored: Sequence[Candidate], per_problem: int, wrong_share: float, seed: int,
               control_share: float = 0.0) -> list[int]:
    """Per problem `per_problem` picks by the platform's rule: `control_share` of the whole set
    drawn uniformly first, then the most convincing wrong-answer candidates for `wrong_share` of
    the others, the most convincing of the rest after."""
    rule = _rule(per_problem, _problems(scored), seed, wrong_share, control_share)
    return [p.solution_id for p in select(scored, rule)]


def uniform_set(candidates: Sequence[Candidate], per_problem: int, seed: int) -> list[int]:
    """Per problem `per_problem` candidates drawn uniformly; one seed draws nested sets."""
    rule = _rule(per_problem, _problems(candidates), seed)
    return [p.solution_id for p in select_uniform(candidates, rule)]


def uncertainty_set(candidates: Sequence[Candidate], uncertainty: Sequence[float], per_problem: int,
                    seed: int) -> list[int]:
    """Per problem the `per_problem` candidates with the highest uncertainty."""
    ranked = [dataclasses.replace(c, score=u) for c, u in zip(candidates, uncertainty)]
    rule = _rule(per_problem, _problems(ranked), seed)
    return [p.solution_id for p in select(ranked, rule)]


def step_uncertainty(step_scores: Sequence[float | None]) -> float:
    """1 when some step's P(correct) is 0.5, 0 when every step is certain either way."""
    known = [p for p in step_scores if p is not None]
    return max((1 - abs(2 * p - 1) for p in known), default=0.0)


# ---- training and measuring ----

@dataclass
class PoolScores:
    product: list[float]
    minimum: list[float]
    uncertainty: list[float]

    def score(self, kind: str) -> list[float]:
        """The selector's solution score: product (the paper's) or minimum."""
        return self.product if kind == "product" else self.minimum


def _device_name(config: ExperimentConfig) -> str:
    """What the results name: the card on CUDA, as the other benchmarks do."""
    device = resolve_device(config.device)
    return torch.cuda.get_device_name() if device == "cuda" else device


def _solutions(candidates: Sequence[Synthetic]) -> list[Solution]:
    return [Solution(c.problem.problem_id, c.problem.text, c.steps) for c in candidates]


def _kept_base(config: ExperimentConfig, seed: int) -> Path:
    """Where `bases` keeps a seed's pretrained base: named by everything that shapes it."""
    errors = "+".join(error_kinds(config.errors))
    rate = PRESETS[config.base].pretrain_learning_rate
    return Path(config.bases) / (f"{config.base}-steps{config.pretrain_steps}-length{config.max_length}"
                                 f"-lr{rate:g}-{errors}-seed{seed}")


def _pretrained_base(config: ExperimentConfig, seed: int, work: Path) -> str:
    if not config.pretrain_steps or not is_preset(config.base):
        return config.base
    output = work / "base"
    if config.bases:
        # A seed's base costs a fifth of a default run, and an ablation or a rerun of the seed
        # needs exactly the same one. pretrain() renames a finished base into place, so a base
        # found here is whole.
        output = _kept_base(config, seed)
        if output.is_dir():
            return str(output)
        output.parent.mkdir(parents=True, exist_ok=True)
    settings = PretrainConfig(output=str(output), base=config.base, steps=config.pretrain_steps,
                              max_length=config.max_length, seed=seed, device=config.device)
    # Problems of a seed of their own; the simulation's count, but never more than pretraining reads.
    count = min(max(2000, config.pretrain_steps * 8), config.pretrain_steps * settings.batch_size)
    solutions = [to_prm800k(c) for c in iter_candidates(count, 1, seed + 20_000, 0.0, error_kinds(config.errors))]
    return str(pretrain(settings, solutions))


def _train_prm(config: ExperimentConfig, base: str, seed: int, records: list[dict], probe: list[dict],
               output: Path) -> Path:
    recipe = ({"step_token_labels": True, "lm_loss_weight": 1.0}
              if config.pretrain_steps and base != config.base else {})
    settings = TrainConfig(output=str(output), base=base, steps=config.train_steps,
                           learning_rate=config.learning_rate, batch_size=config.batch_size,
                           max_length=config.max_length, seed=seed, device=config.device,
                           log_every=10**9, save_every=10**9, **recipe)
    # The trainer's own end-of-training check runs on `probe` (one test problem) to stay cheap;
    # the measurement is _measure's, on the whole test set.
    return train(settings, records, probe)


def _score_pool(config: ExperimentConfig, checkpoint: Path, pool: Sequence[Synthetic]) -> PoolScores:
    model, tokenizer, _ = load_checkpoint(checkpoint, resolve_device(config.device))
    scores = list(iter_scores(model, tokenizer, _solutions(pool), max_length=config.max_length))
    return PoolScores([s.product for s in scores], [s.minimum for s in scores],
                      [step_uncertainty(s.step_scores) for s in scores])


def _measure(config: ExperimentConfig, checkpoint: Path, test: Sequence[Synthetic]) -> dict[str, Any]:
    """Step AUROC and F1, first-error F1 and best-of-N (with its per-problem outcomes)."""
    model, tokenizer, _ = load_checkpoint(checkpoint, resolve_device(config.device))
    scores = list(iter_scores(model, tokenizer, _solutions(test), max_length=config.max_length))
    ratings, p_correct, gold, predicted = [], [], [], []
    groups: dict[str, list[tuple[tuple[bool, float], Synthetic]]] = defaultdict(list)
    for candidate, score in zip(test, scores):
        read = [(r, p) for r, p in zip(candidate.ratings, score.step_scores) if p is not None]
        ratings += [r for r, _ in read]
        p_correct += [p for _, p in read]
        gold.append(candidate.first_error)
        predicted.append(next((i for i, p in enumerate(score.step_scores) if p is not None and p < 0.5), None))
        groups[candidate.problem.problem_id].append((best_of_n_order(score), candidate))
    outcomes, majority = [], []
    for group in groups.values():
        truth = str(group[0][1].problem.answer)
        outcomes.append(int(max(group, key=lambda pair: pair[0])[1].answer == truth))
        majority.append(int(Counter(c.answer for _, c in group).most_common(1)[0][0] == truth))
    steps = step_metrics(ratings, p_correct)
    return {"step_auroc": steps["step_auroc"], "step_f1": steps["step_f1"],
            "first_error_f1": first_error_f1(gold, predicted)["first_error_f1"],
            "best_of_n": sum(outcomes) / len(outcomes), "majority": sum(majority) / len(majority),
            "outcomes": outcomes}


class _Seed:
    """One seed's pool, test set, base and selector, and the PRMs trained on its arms' sets.

    A model is trained once per set of labels (same base, recipe and seed: the same model), and
    a selector once per set of seed labels, so that an ablation on this pool retrains only what
    it changes: `minimum_score` and `wrong_share_half` train only their active arm."""

    def __init__(self, config: ExperimentConfig, seed: int, work: Path, base: str | None = None) -> None:
        self.config, self.seed, self.work = config, seed, work
        kinds = error_kinds(config.errors)
        self.pool = list(iter_candidates(config.pool_problems, config.pool_size, seed, config.error_rate, kinds))
        self.test = list(iter_candidates(config.test_problems, config.test_candidates, seed + 10_000,
                                         config.error_rate, kinds))
        self.probe = [to_prm800k(c, first_error_only=False) for c in self.test[:config.test_candidates]]
        self.candidates = [Candidate(i, c.problem.problem_id, None, "right" if c.is_correct else "wrong")
                           for i, c in enumerate(self.pool)]
        self.base = base if base is not None else _pretrained_base(config, seed, work)
        self._measured: dict[frozenset[int], dict[str, Any]] = {}
        self._selectors: dict[frozenset[int], PoolScores] = {}

    def train(self, ids: Sequence[int], name: str) -> Path:
        records = [to_prm800k(self.pool[i]) for i in sorted(ids)]
        return _train_prm(self.config, self.base, self.seed, records, self.probe, self.work / name)

    def point(self, ids: Sequence[int], per_problem: int, name: str) -> dict[str, Any]:
        started = time.monotonic()
        key = frozenset(ids)
        if key not in self._measured:
            checkpoint = self.train(ids, name)
            self._measured[key] = _measure(self.config, checkpoint, self.test)
            # A 100m checkpoint is 0.4 GB and a seed trains two dozen: keep none once measured.
            shutil.rmtree(checkpoint)
        measured = self._measured[key]
        picked = [self.pool[i] for i in ids]
        return {
            "per_problem": per_problem, "labels": len(ids),
            "wrong_answer_labels": sum(1 for c in picked if not c.is_correct),
            # What a set shows the PRM: the second run's active sets held a tenth clean solutions.
            "clean_labels": sum(1 for c in picked if c.first_error is None),
            # Labelers stop at the first error: a label rates the steps up to it, or all.
            "rated_steps": sum(len(c.steps) if c.first_error is None else c.first_error + 1 for c in picked),
            **{k: measured[k] for k in ("step_auroc", "step_f1", "first_error_f1", "best_of_n", "majority")},
            "outcomes": measured["outcomes"], "seconds": round(time.monotonic() - started, 1),
        }

    def selector_scores(self, ids: Sequence[int], name: str, measure: bool = False) -> PoolScores:
        """The pool scored by a PRM trained on `ids`; with `measure`, that PRM is also measured
        for point(), which then need not train the same model again."""
        key = frozenset(ids)
        if key not in self._selectors:
            checkpoint = self.train(ids, name)
            self._selectors[key] = _score_pool(self.config, checkpoint, self.pool)
            if measure and key not in self._measured:
                self._measured[key] = _measure(self.config, checkpoint, self.test)
            shutil.rmtree(checkpoint)
        return self._selectors[key]

    def scored(self, scores: Sequence[float], among: set[int] | None = None) -> list[Candidate]:
        return [dataclasses.replace(c, score=scores[c.solution_id]) for c in self.candidates
                if among is None or c.solution_id in among]


def _progress_file(work: Path, seed: int) -> Path:
    """Where a seed keeps the curves it has so far, beside (not in) its work folder, which goes
    when the seed ends however it ends."""
    return work.parent / f"progress-seed-{seed}.json"


def _progress(work: Path, seed: int) -> dict[str, dict[str, list[dict]]]:
    path = _progress_file(work, seed)
    return json.loads(path.read_text()) if path.exists() else {}


def _finished_rungs(parts: dict[str, dict[str, list[dict]]]) -> dict[str, dict[str, list[dict]]]:
    """A stopped seed's curves cut back, in each part, to the rungs every arm finished: a ratio
    fitted on one arm's extra rung would compare unequal ladders."""
    return {part: {arm: points[:min(map(len, curves.values()))] for arm, points in curves.items()}
            for part, curves in parts.items()}


def _run_seed(config: ExperimentConfig, seed: int, work: Path, log: Callable[[str], None],
              ablations: Sequence[str] = ()) -> dict[str, dict[str, list[dict]]]:
    """The curves of every arm, under "main", and of the active and uniform arms under each
    ablation's name; rewritten to the seed's progress file after every point."""
    run = _Seed(config, seed, work)
    curves: dict[str, dict[str, list[dict]]] = {}
    progress = _progress_file(work, seed)

    def keep(part: str, so_far: dict[str, list[dict]]) -> None:
        curves[part] = so_far
        replace_whole(progress, json.dumps(curves))

    _curves(run, config, seed, log, lambda so_far: keep("main", so_far))
    for name in ablations:
        changed = config.replace(**ablation_overrides(name))
        same_pool = changed.pool_size == config.pool_size
        on = run if same_pool else _Seed(changed, seed, work / name, base=run.base)
        _curves(on, changed, seed, lambda line, name=name: log(f"[{name}] {line}"),
                lambda so_far, name=name: keep(name, so_far))
    return curves


def _curves(run: _Seed, config: ExperimentConfig, seed: int, log: Callable[[str], None],
            keep: Callable[[dict[str, list[dict]]], None]) -> dict[str, list[dict]]:
    arms = config.arm_names
    selector_ids = uniform_set(run.candidates, config.selector_labels, seed * 1000 + 7)
    selector, fixed_score = None, []
    if set(arms) & set(SELECTOR_ARMS):
        selector = run.selector_scores(selector_ids, "selector")
        fixed_score = selector.score(config.score)
    curves: dict[str, list[dict]] = {arm: [] for arm in arms}
    retrain_ids: list[int] = []
    previous = 0
    for rung in config.rungs:
        sets: dict[str, list[int]] = {}
        if "active" in arms:
            sets["active"] = active_set(run.scored(fixed_score), rung, config.wrong_share, seed)
        if "mixed" in arms:
            sets["mixed"] = active_set(run.scored(fixed_score), rung, config.wrong_share, seed,
                                       config.control_share)
        if "uniform" in arms:
            sets["uniform"] = uniform_set(run.candidates, rung, seed * 1000 + 1)
        if "warm" in arms:
            sets["warm"] = _warm_set(run, config, rung, seed)
        if "uncertainty" in arms:
            assert selector is not None
            sets["uncertainty"] = uncertainty_set(run.candidates, selector.uncertainty, rung, seed)
        if "retrain" in arms:
            scores = fixed_score
            if retrain_ids:
                labeled = sorted(set(selector_ids) | set(retrain_ids))
                scores = run.selector_scores(labeled, f"retrain-selector-{rung}").score(config.score)
            unlabeled = set(range(len(run.pool))) - set(retrain_ids)
            retrain_ids += active_set(run.scored(scores, unlabeled), rung - previous, config.wrong_share, seed)
            sets["retrain"] = list(retrain_ids)
        for arm, ids in sets.items():
            curves[arm].append(run.point(ids, rung, f"{arm}-{rung}"))
            keep(curves)
            log(f"seed {seed} {arm} {rung}/problem: {config.metric} {curves[arm][-1][config.metric]}")
        previous = rung
    return curves


def _warm_set(run: _Seed, config: ExperimentConfig, rung: int, seed: int) -> list[int]:
    drawn = uniform_set(run.candidates, min(rung, config.warm_labels), seed * 1000 + 1)
    if rung < config.warm_labels:
        return drawn
    # From the warm rung on, the selector is the PRM the uniform arm trains on the same draw:
    # trained once, it scores the pool and is measured as that arm's point.
    scores = run.selector_scores(drawn, "warm-selector", measure=True).score(config.score)
    if rung == config.warm_labels:
        return drawn
    unlabeled = set(range(len(run.pool))) - set(drawn)
    return drawn + active_set(run.scored(scores, unlabeled), rung - config.warm_labels, config.wrong_share, seed)


def _efficiency(config: ExperimentConfig, arms: dict[str, dict[str, list[dict]]]) -> dict[str, Any]:
    def ratio(arm: str, metric: str) -> dict[str, Any]:
        return bootstrap_ratio(arms[arm], arms["uniform"], metric, config.bootstrap, config.seed)

    others = [arm for arm in arms if arm != "uniform"] if "uniform" in arms else []
    # The headline is the paper's active arm against uniform; without it (the control_half
    # ablation), the platform's mixed arm. Every other arm's ratio is under by_arm.
    chosen = next((arm for arm in HEADLINE_ARMS if arm in others), None)
    headline = (ratio(chosen, config.metric) if chosen
                else {"ratio": None, "ci95": None, "seeds": config.seeds, "extrapolated": None})
    return {
        **headline, "arm": chosen, "metric": config.metric, "protocol": "paper",
        "formula": f"exp((a_{chosen or 'arm'} - a_uniform) / b) from quality = a_arm + b ln(labels), one "
                   "slope for both arms, fitted on every seed's rungs",
        "bootstrap": "percentile, over seeds and, for best_of_n, over test problems within a seed",
        "by_arm": {arm: {m: ratio(arm, m) for m in METRICS} for arm in others},
    }


def _seed_job(config: ExperimentConfig, seed: int, work: Path,
              ablations: Sequence[str]) -> dict[str, dict[str, list[dict]]]:
    """One seed in a process of its own; its lines go to this process's stderr."""
    if resolve_device(config.device) == "cpu":
        use_cpu_threads(config.threads)
    try:
        return _run_seed(config, seed, work, lambda line: print(line, file=sys.stderr, flush=True), ablations)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_experiment(config: ExperimentConfig, log: Callable[[str], None] = lambda _: None,
                   ablations: Sequence[str] = ()) -> dict[str, Any]:
    """Every seed and arm of `config`, and the named ablations (ABLATIONS) on the active and
    uniform arms; returns the curves and the data-efficiency ratios. Interrupted, it returns
    what every seed had finished, with `stopped` true."""
    check_ablations(ablations)
    started = time.monotonic()
    if resolve_device(config.device) == "cpu":
        use_cpu_threads(config.threads)
    seeds = range(config.seed, config.seed + config.seeds)
    work = Path(tempfile.mkdtemp(prefix="stepwise-experiment-"))
    stopped = False
    try:
        try:
            runs = _run_seeds(config, seeds, work, log, ablations)
        except KeyboardInterrupt:
            # Stopped (Ctrl-C, or the SIGTERM run_and_report turns into one): the results are
            # the points every seed had finished, marked as stopped.
            stopped = True
            runs = [_finished_rungs(_progress(work / f"seed-{seed}", seed)) for seed in seeds]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def by_arm(part: str, names: Sequence[str]) -> dict[str, dict[str, list[dict]]]:
        return {arm: {str(seed): run.get(part, {}).get(arm, []) for seed, run in zip(seeds, runs)}
                for arm in names}

    arms = by_arm("main", config.arm_names)
    out_ablations = {}
    for name in ablations:
        changed = config.replace(**ablation_overrides(name))
        curves = by_arm(name, changed.arm_names)
        out_ablations[name] = {"overrides": ablation_overrides(name),
                               "data_efficiency": _efficiency(changed, curves), "arms": curves}
    return {
        "data_efficiency": _efficiency(config, arms),
        "stopped": stopped,
        "arms": arms,
        "config": dataclasses.asdict(config),
        "ablations": out_ablations,
        "environment": {"torch": torch.__version__, "device": _device_name(config),
                        "threads": config.threads, "jobs": min(config.jobs, config.seeds),
                        "machine": platform.machine(),
                        "python": platform.python_version(), "base_parameters": _parameters(config.base),
                        "load_average_1m": round(os.getloadavg()[0], 1), "date": time.strftime("%Y-%m-%d")},
        "seconds": round(time.monotonic() - started, 1),
    }


def _run_seeds(config: ExperimentConfig, seeds: range, work: Path, log: Callable[[str], None],
               ablations: Sequence[str]) -> list[dict[str, dict[str, list[dict]]]]:
    """Every seed's curves, in seed order."""
    if config.jobs > 1 and config.seeds > 1:
        # Spawned, not forked: a forked child inherits torch's thread pools in whatever state
        # the parent left them. Seeds share nothing, so each job runs one whole seed.
        pool = ProcessPoolExecutor(min(config.jobs, config.seeds), mp_context=multiprocessing.get_context("spawn"))
        try:
            futures = [pool.submit(_seed_job, config, seed, work / f"seed-{seed}", ablations) for seed in seeds]
            return [future.result() for future in futures]
        except BaseException:
            # Stopped or failed: no queued seed starts, and running ones end now rather than
            # when they finish (a SIGTERM to this process alone does not reach them).
            pool.shutdown(wait=False, cancel_futures=True)
            for child in multiprocessing.active_children():
                child.terminate()
            raise
        finally:
            pool.shutdown()
    runs = []
    for seed in seeds:
        runs.append(_run_seed(config, seed, work / f"seed-{seed}", log, ablations))
        shutil.rmtree(work / f"seed-{seed}", ignore_errors=True)
    return runs


def _parameters(base: str) -> str | None:
    preset = PRESETS.get(base)
    return None if preset is None else f"{preset.layers} layers x {preset.hidden}"


def check_ablations(names: Sequence[str]) -> None:
    if set(names) - set(ABLATIONS):
        raise ValueError(f"ablations: choose from {', '.join(ABLATIONS)}")


def summary(results: dict[str, Any]) -> str:
    eff = results["data_efficiency"]
    lines = ["STOPPED before the end: in each seed, the rungs all its arms had finished"] if results.get("stopped") else []
    if eff["ratio"] is None:
        lines.append(f"{eff['metric']}: no ratio (the fitted lines do not rise, or an arm is missing)")
    else:
        ci = eff["ci95"]
        shown = "no interval" if ci is None else f"95% interval {ci[0]:.2f}-{ci[1]:.2f}"
        beyond = ", beyond the ladder's span" if eff["extrapolated"] else ""
        lines.append(f"{eff['metric']}: {eff['arm']}/uniform data efficiency {eff['ratio']:.2f}x "
                     f"({shown}, {eff['seeds']} seeds{beyond})")
    for arm, seeds in results["arms"].items():
        by_rung: dict[int, list[float]] = defaultdict(list)
        for curve in seeds.values():
            for p in curve:
                if p[eff["metric"]] is not None:
                    by_rung[p["per_problem"]].append(p[eff["metric"]])
        shown = ", ".join(f"{n}: {sum(v) / len(v):.3f}" for n, v in sorted(by_rung.items()))
        lines.append(f"{arm} mean {eff['metric']} by samples per problem: {shown}")
    for name, ablation in results["ablations"].items():
        eff = ablation["data_efficiency"]
        lines.append(f"ablation {name}: {eff['arm']}/uniform ratio "
                     f"{'none' if eff['ratio'] is None else format(eff['ratio'], '.2f') + 'x'}")
    lines.append(f"{results['seconds']:.0f} s on {results['environment']['device']}")
    return "\n".join(lines)


def run_and_report(config: ExperimentConfig, output: Path, ablations: Sequence[str] = (),
                   log: Callable[[str], None] = lambda _: None) -> str:
    """Run (and the named ablations), write the JSON and an SVG beside it; returns a summary.
    A SIGTERM (a time limit, as the GPU suite's) stops it as Ctrl-C does: what was finished is
    written, marked as stopped."""
    # Only the main thread may set a handler; elsewhere a SIGTERM ends the process as it did.
    # Each file is written whole or not at all, whatever signal comes while it is written.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    try:
        results = run_experiment(config, log, ablations)
        output.parent.mkdir(parents=True, exist_ok=True)
        plot = output.with_suffix(".svg")
        replace_whole(output, json.dumps(results, indent=2) + "\n")
        replace_whole(plot, experiment_svg(results))
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    return f"{summary(results)}\nwrote {output} and {plot}"

