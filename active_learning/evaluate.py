"""Held-out metrics: step AUROC/F1, first-error F1 (ProcessBench), best-of-N against majority vote.

A step counts as correct when rated 0 or +1 (a neutral step is not an error), unless neutral
steps count as wrong (`neutral_as_correct=False`), as the model's score P(correct) then does too:
`is_wrong` is the one rule for both. The error class is the positive class for F1, since finding
errors is the PRM's job.

A metric whose class the labels lack is None, not 0: step F1 without a wrong step, accuracy on
erroneous (or correct) solutions without one, first-error F1 without both. Such labels say
nothing of that metric, as labels without both classes say nothing of AUROC; a 0 would read as a
model that failed.

Held-out sets in a labeling project are small, so the platform asks for bootstrap intervals:
problems are resampled with replacement, each with all its labeled solutions, and the metric
recomputed; the 2.5th and 97.5th percentiles bound it. Steps of one solution are not
independent, nor are solutions of one problem (alike in difficulty, often in their mistakes), so
the problem is the unit that is resampled: resampling solutions made the intervals of a project
labeling several solutions a problem too narrow.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score

from active_learning.data import Example, Solution, load_examples, load_processbench, load_solutions
from active_learning.grading import grade, is_equivalent
from active_learning.score import SolutionScore, best_of_n_order, on_common_steps, score_solutions


def is_wrong(rating: int, neutral_as_correct: bool = True) -> bool:
    """Whether a rated step is an error in the truth that P(correct) is measured against."""
    return rating < (0 if neutral_as_correct else 1)


def step_metrics(ratings: list[int], p_correct: list[float], threshold: float = 0.5,
                 neutral_as_correct: bool = True) -> dict:
    """AUROC, F1 and accuracy of P(correct) against the ratings; None where undefined (AUROC
    without both classes, F1 without a wrong step, anything without a rated step)."""
    correct = [not is_wrong(r, neutral_as_correct) for r in ratings]
    predicted_error = [p < threshold for p in p_correct]
    both_classes = 0 < sum(correct) < len(correct)
    return {
        "step_auroc": roc_auc_score(correct, p_correct) if both_classes else None,
        "step_f1": f1_score([not c for c in correct], predicted_error) if not all(correct) else None,
        "step_accuracy": sum(c != e for c, e in zip(correct, predicted_error)) / len(correct) if correct else None,
        "n_steps": len(ratings),
    }


def first_error_f1(gold: list[int | None], predicted: list[int | None]) -> dict:
    """ProcessBench: accuracy of the first-error index on erroneous solutions and of "no error"
    on correct ones, combined by harmonic mean so neither can be bought with the other."""
    if not gold:
        return {"first_error_f1": None, "first_error_acc_erroneous": None, "first_error_acc_correct": None,
                "n_solutions": 0}
    erroneous = [p == g for g, p in zip(gold, predicted) if g is not None]
    clean = [p is None for g, p in zip(gold, predicted) if g is None]
    acc_err = sum(erroneous) / len(erroneous) if erroneous else None
    acc_ok = sum(clean) / len(clean) if clean else None
    return {"first_error_f1": _harmonic_mean(acc_err, acc_ok), "first_error_acc_erroneous": acc_err,
            "first_error_acc_correct": acc_ok, "n_solutions": len(gold)}


def _harmonic_mean(acc_err: float | None, acc_ok: float | None) -> float | None:
    if acc_err is None or acc_ok is None:
        return None
    return 2 * acc_err * acc_ok / (acc_err + acc_ok) if acc_err + acc_ok else 0.0


def bootstrap_ci(n_units: int, statistic: Callable[[np.ndarray], dict[str, float | None]],
                 samples: int, seed: int = 0) -> dict[str, list[float] | None]:
    """95% percentile interval of each value `statistic` returns, over resamples of `n_units`
    units. The statistic is given each unit's count in a resample (ones: the sample itself), so
    that it weighs units instead of copying them. None for a value undefined on most resamples
    (or with fewer than two units)."""
    keys = list(statistic(np.ones(n_units, dtype=np.int64)))
    if samples <= 0 or n_units < 2:
        return dict.fromkeys(keys)
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {key: [] for key in keys}
    for _ in range(samples):
        resample = statistic(np.bincount(rng.integers(0, n_units, n_units), minlength=n_units))
        for key in keys:
            if resample[key] is not None:
                values[key].append(resample[key])
    return {key: [float(v) for v in np.percentile(found, [2.5, 97.5])] if len(found) >= samples / 2 else None
            for key, found in values.items()}


def by_problem(examples: list[Example], statistic: Callable[[np.ndarray], dict[str, float | None]]
               ) -> tuple[int, Callable[[np.ndarray], dict[str, float | None]]]:
    """(number of problems, `statistic` over examples given each problem's count): for
    bootstrap_ci to resample problems, each with all its examples."""
    index: dict[str, int] = {}
    owner = np.array([index.setdefault(e.problem_id, len(index)) for e in examples], dtype=np.int64)
    return len(index), lambda counts: statistic(counts[owner])


def _majority_answer(answers: list[str]) -> str:
    """The most frequent answer, counting mathematically equivalent answers as one."""
    clusters: list[list[str]] = []
    for answer in answers:
        home = next((c for c in clusters if c[0] == answer or is_equivalent(answer, c[0])), None)
        (home.append(answer) if home else clusters.append([answer]))
    return max(clusters, key=len)[0]


def _best_of_n_outcomes(solutions: list[Solution], scores: list[SolutionScore]) -> tuple[list[tuple[bool, bool]], int]:
    """Per problem with two graded solutions or more: (is the PRM's top solution right, is the
    majority answer right); and the most common number of candidates. Candidates rank in
    best_of_n_order."""
    groups = defaultdict(list)
    for solution, score in zip(solutions, scores):
        if solution.answer is not None and solution.ground_truth_answer is not None:
            groups[solution.problem_id].append((solution, score))
    groups = {pid: g for pid, g in groups.items() if len(g) >= 2}
    outcomes = []
    for group in groups.values():
        truth = group[0][0].ground_truth_answer
        top = max(group, key=lambda pair: best_of_n_order(pair[1]))[0]
        majority = _majority_answer([s.answer for s, _ in group])
        outcomes.append((grade(top.answer, truth) == "right", grade(majority, truth) == "right"))
    n = Counter(len(g) for g in groups.values()).most_common(1)[0][0] if groups else 0
    return outcomes, n


def best_of_n(solutions: list[Solution], scores: list[SolutionScore], *, bootstrap: int = 0) -> dict | None:
    """Per problem: is the PRM's top solution right, and is the majority answer right?"""
    outcomes, n = _best_of_n_outcomes(solutions, scores)
    if not outcomes:
        return None
    result = {"problems": len(outcomes), "n": n,
              "prm_accuracy": sum(prm for prm, _ in outcomes) / len(outcomes),
              "majority_accuracy": sum(m for _, m in outcomes) / len(outcomes)}
    if bootstrap:
        prm_right = np.array([prm for prm, _ in outcomes], dtype=np.float64)
        share = lambda counts: {"prm_accuracy": float(counts @ prm_right / counts.sum())}  # noqa: E731
        result["prm_accuracy_ci95"] = bootstrap_ci(len(outcomes), share, bootstrap)["prm_accuracy"]
    return result


def _solution_metrics(units: list[tuple], threshold: float, neutral_as_correct: bool = True) -> dict:
    """Step and first-error metrics from per-solution (ratings, P(correct), gold first error,
    predicted first error, whole trajectory) rows."""
    ratings = [r for unit in units for r in unit[0]]
    p_correct = [p for unit in units for p in unit[1]]
    whole = [unit for unit in units if unit[4]]
    return step_metrics(ratings, p_correct, threshold, neutral_as_correct) | first_error_f1(
        [unit[2] for unit in whole], [unit[3] for unit in whole])


class WeightedMetrics:
    """`_solution_metrics` of a resample of the same rows, given each row's count in it. A
    metric the resample leaves undefined is None, so the interval is taken over the resamples
    that define it: counted as 0, the 3.5% of resamples of 40 solutions (3 erroneous) that drew
    no erroneous one put a perfect model's lower ends at 0.

    Written out over arrays, not by calling scikit-learn on copied rows, which took 7 s for the
    intervals of 240 held-out solutions (0.04 s this way), at every checkpoint.
    Here the steps are sorted by score once, and a resample costs a few weighted sums (AUROC as
    the weighted Mann-Whitney statistic, a tie counting half, as scikit-learn counts it). Tests
    hold it equal to `_solution_metrics` on resamples.
    """

    def __init__(self, units: list[tuple], threshold: float, neutral_as_correct: bool = True):
        owner = np.repeat(np.arange(len(units)), [len(unit[0]) for unit in units])
        correct = np.array([not is_wrong(r, neutral_as_correct) for unit in units for r in unit[0]], dtype=bool)
        p_correct = np.array([p for unit in units for p in unit[1]], dtype=np.float64)
        order = np.argsort(p_correct, kind="stable")
        self.owner, self.correct, p_correct = owner[order], correct[order], p_correct[order]
        self.tie_group = np.cumsum(np.diff(p_correct, prepend=p_correct[:1]) != 0)
        predicted_error = p_correct < threshold
        self.found_error = ~self.correct & predicted_error
        self.false_alarm = self.correct & predicted_error
        self.missed_error = ~self.correct & ~predicted_error
        whole = np.array([bool(unit[4]) for unit in units], dtype=bool)
        gold_error = np.array([unit[2] is not None for unit in units], dtype=bool)
        self.erroneous = whole & gold_error
        self.located = self.erroneous & np.array([unit[3] == unit[2] for unit in units], dtype=bool)
        self.clean = whole & ~gold_error
        self.accepted = self.clean & np.array([unit[3] is None for unit in units], dtype=bool)

    def __call__(self, counts: np.ndarray) -> dict[str, float | None]:
        return self._steps(counts[self.owner].astype(np.float64)) | self._first_errors(counts)

    def _steps(self, weight: np.ndarray) -> dict[str, float | None]:
        total = weight.sum()
        if not total:
            return {"step_auroc": None, "step_f1": None, "step_accuracy": None}
        groups = int(self.tie_group[-1]) + 1
        right = np.bincount(self.tie_group, weight * self.correct, groups)
        wrong = np.bincount(self.tie_group, weight * ~self.correct, groups)
        n_right, n_wrong = right.sum(), wrong.sum()
        # Each right step against the wrong ones scored below it, and half those scored level.
        auroc = float(right @ (np.cumsum(wrong) - wrong / 2) / (n_right * n_wrong)) if n_right and n_wrong else None
        tp, fp, fn = (weight @ self.found_error, weight @ self.false_alarm, weight @ self.missed_error)
        f1 = float(2 * tp / (2 * tp + fp + fn)) if n_wrong else None
        return {"step_auroc": auroc, "step_f1": f1, "step_accuracy": float(1 - (fp + fn) / total)}

    def _first_errors(self, counts: np.ndarray) -> dict[str, float | None]:
        erroneous, clean = counts @ self.erroneous, counts @ self.clean
        acc_err = float(counts @ self.located / erroneous) if erroneous else None
        acc_ok = float(counts @ self.accepted / clean) if clean else None
        return {"first_error_f1": _harmonic_mean(acc_err, acc_ok), "first_error_acc_erroneous": acc_err,
                "first_error_acc_correct": acc_ok}


def _scored(model, tokenizer, examples: list[Example], neutral_as_correct: bool, **score_options) -> list[SolutionScore]:
    return score_solutions(model, tokenizer, [Solution(e.problem_id, e.prompt, e.steps) for e in examples],
                           neutral_as_correct=neutral_as_correct, **score_options)


def _units(examples: list[Example], scores: list[SolutionScore], threshold: float, neutral_as_correct: bool,
           *, also_scored_by: list[SolutionScore] | None = None) -> list[tuple]:
    """Per example: (ratings, P(correct) of the rated steps, gold first error, predicted first
    error, whole trajectory), the rows the metrics are computed from. A step the model did not
    score (past its token limit) is left out; with `also_scored_by`, so is one the other model
    did not score, so that two models are measured on the same steps."""
    units = []
    for j, (example, score) in enumerate(zip(examples, scores)):
        labeled = [(i, r) for i, r in enumerate(example.labels)
                   if r is not None and score.step_scores[i] is not None
                   and (also_scored_by is None or also_scored_by[j].step_scores[i] is not None)]
        units.append((
            [r for _, r in labeled],
            [score.step_scores[i] for i, _ in labeled],
            next((i for i, r in labeled if is_wrong(r, neutral_as_correct)), None),
            next((i for i, _ in labeled if score.step_scores[i] < threshold), None),
            len(labeled) == len(example.labels),  # a whole trajectory, not an alternative step
        ))
    return units


def evaluate_examples(model, tokenizer, examples: list[Example], *, threshold: float = 0.5,
                      neutral_as_correct: bool = True, bootstrap: int = 0, **score_options) -> dict:
    """Step and first-error metrics on labeled examples; with `bootstrap` resamples, also their
    95% intervals under `ci95`."""
    units = _units(examples, _scored(model, tokenizer, examples, neutral_as_correct, **score_options),
                   threshold, neutral_as_correct)
    metrics = _solution_metrics(units, threshold, neutral_as_correct) | {"n_labels": len(units)}
    if bootstrap:
        metrics["ci95"] = bootstrap_ci(*by_problem(examples, WeightedMetrics(units, threshold, neutral_as_correct)),
                                       bootstrap)
    return metrics


COMPARED = ("step_auroc", "step_f1", "step_accuracy", "first_error_f1", "first_error_acc_erroneous",
            "first_error_acc_correct")


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def compare_examples(a: tuple, b: tuple, examples: list[Example], *, threshold: float = 0.5,
                     neutral_as_correct: bool = True, bootstrap: int = 0, **score_options) -> dict:
    """Two (model, tokenizer) pairs on the same labeled examples: each one's metrics, and each
    metric's difference a − b with its 95% interval over paired resamples. A resample draws the
    same problems for both models, so the interval measures how they differ on the same labels:
    two models' own intervals overlap far more often than their difference is in doubt. Each is
    measured on the steps both scored: models with different tokenizers or token limits can leave
    different over-long steps unscored."""
    scores_a = _scored(*a, examples, neutral_as_correct, **score_options)
    scores_b = _scored(*b, examples, neutral_as_correct, **score_options)
    units_a = _units(examples, scores_a, threshold, neutral_as_correct, also_scored_by=scores_b)
    units_b = _units(examples, scores_b, threshold, neutral_as_correct, also_scored_by=scores_a)
    result: dict = {"n_labels": len(examples)}
    for name, units in (("a", units_a), ("b", units_b)):
        result[name] = _solution_metrics(units, threshold, neutral_as_correct)
    result["difference"] = {key: _minus(result["a"][key], result["b"][key]) for key in COMPARED}
    if bootstrap:
        weighed_a = WeightedMetrics(units_a, threshold, neutral_as_correct)
        weighed_b = WeightedMetrics(units_b, threshold, neutral_as_correct)

        def difference(counts: np.ndarray) -> dict[str, float | None]:
            one, other = weighed_a(counts), weighed_b(counts)
            return {key: _minus(one[key], other[key]) for key in COMPARED}

        result["difference_ci95"] = bootstrap_ci(*by_problem(examples, difference), bootstrap)
    return result


def compare_best_of_n(solutions: list[Solution], scores_a: list[SolutionScore], scores_b: list[SolutionScore],
                      *, bootstrap: int = 0) -> dict | None:
    """Best-of-N accuracy of two models' picks on the same problems, and its difference a − b
    with a 95% interval over paired resamples of the problems. Each candidate is ranked on the
    steps both models scored."""
    scores_a, scores_b = zip(*map(on_common_steps, scores_a, scores_b)) if scores_a else ([], [])
    outcomes_a, n = _best_of_n_outcomes(solutions, scores_a)
    outcomes_b, _ = _best_of_n_outcomes(solutions, scores_b)
    if not outcomes_a:
        return None
    right_a = np.array([prm for prm, _ in outcomes_a], dtype=np.float64)
    right_b = np.array([prm for prm, _ in outcomes_b], dtype=np.float64)
    result = {"problems": len(outcomes_a), "n": n, "a": float(right_a.mean()), "b": float(right_b.mean()),
              "majority_accuracy": sum(m for _, m in outcomes_a) / len(outcomes_a),
              "difference": float(right_a.mean() - right_b.mean())}
    if bootstrap:
        gap = lambda counts: {"difference": float(counts @ (right_a - right_b) / counts.sum())}  # noqa: E731
        result["difference_ci95"] = bootstrap_ci(len(outcomes_a), gap, bootstrap)["difference"]
    return result


def evaluate_processbench(model, tokenizer, source: str | Path | Iterable[dict], *, threshold: float = 0.5,
                          neutral_as_correct: bool = True, bootstrap: int = 0, **score_options) -> dict:
    """ProcessBench's metric on its records: the predicted first error is the first step whose
    P(correct) is below `threshold` (none: the solution is called correct); accuracy on the
    erroneous solutions, on the correct ones, and their harmonic mean (F1); with `bootstrap`
    resamples of the records, their 95% intervals under `ci95`."""
    solutions, gold = load_processbench(source)
    scores = score_solutions(model, tokenizer, solutions, neutral_as_correct=neutral_as_correct,
                             **score_options)
    # A step past max_length has no score and is not called wrong.
    predicted = [next((i for i, p in enumerate(score.step_scores) if p is not None and p < threshold), None)
                 for score in scores]
    metrics = {"format": "processbench", "threshold": threshold,
               **first_error_f1(gold, predicted),
               "n_erroneous": sum(g is not None for g in gold), "n_correct": sum(g is None for g in gold),
               "n_truncated": sum(score.truncated for score in scores)}
    if bootstrap:
        # Records as whole solutions with no rated steps: only the first-error metrics are defined.
        statistic = WeightedMetrics([([], [], g, p, True) for g, p in zip(gold, predicted)], threshold)
        intervals = bootstrap_ci(len(gold), statistic, bootstrap)
        metrics["ci95"] = {key: value for key, value in intervals.items() if key.startswith("first_error")}
    return metrics


def evaluate(model, tokenizer, source: str | Path | Iterable[dict], *, threshold: float = 0.5,
             neutral_as_correct: bool = True, bootstrap: int = 0, **score_options) -> dict:
    """All metrics for one labeled file (PRM800K or TRL) or list of records, with intervals from
    `bootstrap` resamples; best-of-N is None unless the records hold answers and several
    solutions per problem."""
    records = list(source) if not isinstance(source, (str, Path)) else source
    options = dict(neutral_as_correct=neutral_as_correct, **score_options)
    metrics = evaluate_examples(model, tokenizer, load_examples(records), threshold=threshold,
                                bootstrap=bootstrap, **options)
    solutions = load_solutions(records)
    scores = score_solutions(model, tokenizer, solutions, **options)
    metrics["best_of_n"] = best_of_n(solutions, scores, bootstrap=bootstrap)
    metrics["n_truncated"] = sum(score.truncated for score in scores)
    return metrics
