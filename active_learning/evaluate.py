"""Held-out metrics: step AUROC/F1, first-error F1 (ProcessBench), best-of-N against majority vote.

A step counts as correct when rated 0 or +1 (a neutral step is not an error); the error class
(-1) is the positive class for F1, since finding errors is the PRM's job.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from sklearn.metrics import f1_score, roc_auc_score

from active_learning.data import Example, Solution, load_examples, load_solutions
from active_learning.grading import grade, is_equivalent
from active_learning.score import SolutionScore, score_solutions


def step_metrics(ratings: list[int], p_correct: list[float], threshold: float = 0.5) -> dict:
    correct = [r >= 0 for r in ratings]
    predicted_error = [p < threshold for p in p_correct]
    both_classes = 0 < sum(correct) < len(correct)
    return {
        "step_auroc": roc_auc_score(correct, p_correct) if both_classes else None,
        "step_f1": f1_score([not c for c in correct], predicted_error, zero_division=0.0),
        "step_accuracy": sum(c != e for c, e in zip(correct, predicted_error)) / max(len(correct), 1),
        "n_steps": len(ratings),
    }


def first_error_f1(gold: list[int | None], predicted: list[int | None]) -> dict:
    """ProcessBench: accuracy of the first-error index on erroneous solutions and of "no error"
    on correct ones, combined by harmonic mean so neither can be bought with the other."""
    erroneous = [p == g for g, p in zip(gold, predicted) if g is not None]
    clean = [p is None for g, p in zip(gold, predicted) if g is None]
    acc_err = sum(erroneous) / len(erroneous) if erroneous else 0.0
    acc_ok = sum(clean) / len(clean) if clean else 0.0
    f1 = 2 * acc_err * acc_ok / (acc_err + acc_ok) if acc_err + acc_ok else 0.0
    return {"first_error_f1": f1, "first_error_acc_erroneous": acc_err,
            "first_error_acc_correct": acc_ok, "n_solutions": len(gold)}


def _majority_answer(answers: list[str]) -> str:
    """The most frequent answer, counting mathematically equivalent answers as one."""
    clusters: list[list[str]] = []
    for answer in answers:
        home = next((c for c in clusters if c[0] == answer or is_equivalent(answer, c[0])), None)
        (home.append(answer) if home else clusters.append([answer]))
    return max(clusters, key=len)[0]


def best_of_n(solutions: list[Solution], scores: list[SolutionScore]) -> dict | None:
    """Per problem: is the PRM's top solution right, and is the majority answer right?"""
    groups = defaultdict(list)
    for solution, score in zip(solutions, scores):
        if solution.answer is not None and solution.ground_truth_answer is not None:
            groups[solution.problem_id].append((solution, score))
    groups = {pid: g for pid, g in groups.items() if len(g) >= 2}
    if not groups:
        return None
    prm_right = majority_right = 0
    for group in groups.values():
        truth = group[0][0].ground_truth_answer
        top = max(group, key=lambda pair: pair[1].product)[0]
        prm_right += grade(top.answer, truth) == "right"
        majority = _majority_answer([s.answer for s, _ in group])
        majority_right += grade(majority, truth) == "right"
    n = Counter(len(g) for g in groups.values()).most_common(1)[0][0]
    return {"problems": len(groups), "n": n, "prm_accuracy": prm_right / len(groups),
            "majority_accuracy": majority_right / len(groups)}


def evaluate_examples(model, tokenizer, examples: list[Example], *, threshold: float = 0.5,
                      neutral_as_correct: bool = True, **score_options) -> dict:
    """Step and first-error metrics on labeled examples."""
    scored = score_solutions(model, tokenizer,
                             [Solution(e.problem_id, e.prompt, e.steps) for e in examples],
                             neutral_as_correct=neutral_as_correct, **score_options)
    ratings, p_correct, gold_first, predicted_first = [], [], [], []
    for example, score in zip(examples, scored):
        labeled = [(i, r) for i, r in enumerate(example.labels)
                   if r is not None and score.step_scores[i] is not None]
        ratings += [r for _, r in labeled]
        p_correct += [score.step_scores[i] for i, _ in labeled]
        if len(labeled) == len(example.labels):  # a whole trajectory, not an alternative step
            gold_first.append(next((i for i, r in labeled if r == -1), None))
            predicted_first.append(next((i for i, _ in labeled if score.step_scores[i] < threshold), None))
    return step_metrics(ratings, p_correct, threshold) | first_error_f1(gold_first, predicted_first)


def evaluate(model, tokenizer, source: str | Path | Iterable[dict], *, threshold: float = 0.5,
             neutral_as_correct: bool = True, **score_options) -> dict:
    """All metrics for one labeled file (PRM800K or TRL) or list of records; best-of-N is None
    unless the records hold answers and several solutions per problem."""
    records = list(source) if not isinstance(source, (str, Path)) else source
    options = dict(neutral_as_correct=neutral_as_correct, **score_options)
    metrics = evaluate_examples(model, tokenizer, load_examples(records), threshold=threshold, **options)
    solutions = load_solutions(records)
    metrics["best_of_n"] = best_of_n(solutions, score_solutions(model, tokenizer, solutions, **options))
    return metrics
