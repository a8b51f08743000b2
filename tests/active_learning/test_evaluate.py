import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from transformers import PretrainedConfig

from active_learning.cli import prm
from active_learning.data import Example, Solution, load_examples, load_processbench
from active_learning.evaluate import (COMPARED, WeightedMetrics, _solution_metrics, best_of_n, bootstrap_ci, by_problem,
                                     compare_best_of_n, compare_examples, evaluate, evaluate_examples, first_error_f1,
                                     step_metrics)
from active_learning.model import load_base
from active_learning.score import SolutionScore, correct_probability
from active_learning.synthetic import iter_candidates, to_prm800k
from active_learning.tokenizer import build_byte_tokenizer


def test_step_metrics():
    metrics = step_metrics([1, 0, -1, -1], [0.9, 0.8, 0.3, 0.6])
    assert metrics["step_auroc"] == 1.0
    assert metrics["step_f1"] == pytest.approx(2 / 3)  # one of two errors found, no false alarm
    assert metrics["n_steps"] == 4
    assert step_metrics([1, 1], [0.2, 0.9])["step_auroc"] is None


def test_a_neutral_step_is_wrong_in_the_truth_when_it_is_wrong_in_the_score():
    # P(+1): the neutral step scores low, as a wrong one does.
    metrics = step_metrics([1, 0, -1], [0.9, 0.2, 0.1], neutral_as_correct=False)
    assert (metrics["step_auroc"], metrics["step_f1"], metrics["step_accuracy"]) == (1.0, 1.0, 1.0)


def test_first_error_f1_is_harmonic_mean():
    # Two erroneous solutions (one located), two correct ones (both accepted).
    metrics = first_error_f1([2, 0, None, None], [2, 1, None, None])
    assert metrics["first_error_acc_erroneous"] == 0.5
    assert metrics["first_error_acc_correct"] == 1.0
    assert metrics["first_error_f1"] == pytest.approx(2 * 0.5 / 1.5)
    assert first_error_f1([1], [None])["first_error_acc_erroneous"] == 0.0


def test_metrics_of_nothing_are_undefined_not_zero():
    assert step_metrics([], []) == {"step_auroc": None, "step_f1": None, "step_accuracy": None, "n_steps": 0}
    assert first_error_f1([], []) == {"first_error_f1": None, "first_error_acc_erroneous": None,
                                      "first_error_acc_correct": None, "n_solutions": 0}
    # No wrong step, no correct solution, no erroneous one: each leaves its metric undefined.
    no_error = step_metrics([1, 0], [0.9, 0.2])
    assert no_error["step_f1"] is None and no_error["step_accuracy"] == 0.5
    assert first_error_f1([1], [None]) == {"first_error_f1": None, "first_error_acc_erroneous": 0.0,
                                           "first_error_acc_correct": None, "n_solutions": 1}
    assert first_error_f1([None], [None]) == {"first_error_f1": None, "first_error_acc_erroneous": None,
                                              "first_error_acc_correct": 1.0, "n_solutions": 1}


def test_neutral_handling():
    assert correct_probability([0.2, 0.3, 0.5]) == pytest.approx(0.8)
    assert correct_probability([0.2, 0.3, 0.5], neutral_as_correct=False) == pytest.approx(0.5)


def _score(product):
    return SolutionScore([[0, 0, 1]], [product], product, product, False)


def test_best_of_n_against_majority():
    # Problem p: the majority (4, twice) is wrong, the PRM's favourite (5) is right.
    solutions = [Solution("p", "Q", ["s"], answer, "5") for answer in ["4", "4", "5"]]
    solutions += [Solution("q", "R", ["s"], answer, "\\frac12") for answer in ["0.5", "1"]]
    scores = [_score(p) for p in [0.1, 0.2, 0.9, 0.8, 0.3]]
    result = best_of_n(solutions, scores)
    assert result == {"problems": 2, "n": 3, "prm_accuracy": 1.0, "majority_accuracy": 0.5}
    assert best_of_n(solutions[:1], scores[:1]) is None


def test_best_of_n_ranks_a_candidate_read_in_part_below_those_read_whole():
    # The wrong candidate's only step was too long to score: its empty product is 1.
    solutions = [Solution("p", "Q", ["s"], answer, "5") for answer in ["4", "5"]]
    unread = SolutionScore([None], [None], 1.0, 1.0, True)
    assert best_of_n(solutions, [unread, _score(0.6)])["prm_accuracy"] == 1.0


def test_best_of_n_of_two_models_is_compared_problem_by_problem():
    solutions = [Solution("p", "Q", ["s"], answer, "5") for answer in ["4", "4", "5"]]
    solutions += [Solution("q", "R", ["s"], answer, "\\frac12") for answer in ["0.5", "1"]]
    right = [_score(p) for p in [0.1, 0.2, 0.9, 0.8, 0.3]]  # picks 5 and 0.5: both right
    wrong = [_score(p) for p in [0.9, 0.2, 0.1, 0.8, 0.3]]  # picks 4 and 0.5: one right
    compared = compare_best_of_n(solutions, right, wrong, bootstrap=200)
    assert (compared["a"], compared["b"], compared["difference"]) == (1.0, 0.5, 0.5)
    assert compared["problems"] == 2 and compared["majority_accuracy"] == 0.5
    # Paired: problem q, where both pick alike, adds nothing to the difference's spread.
    assert compared["difference_ci95"] == [0.0, 1.0]
    assert compare_best_of_n(solutions, right, right, bootstrap=200)["difference_ci95"] == [0.0, 0.0]
    assert compare_best_of_n(solutions[:1], right[:1], wrong[:1]) is None


def test_intervals_resample_problems_each_with_all_its_solutions():
    # Twenty solutions of a problem the model gets right, twenty of one it gets wrong: forty
    # solutions, but two draws of evidence.
    examples = [Example(pid, pid, ["s"], [1]) for pid in ["p"] * 20 + ["q"] * 20]
    right = np.array([1.0] * 20 + [0.0] * 20)
    share = lambda counts: {"share": float(counts @ right / counts.sum())}  # noqa: E731
    n_problems, by_problems = by_problem(examples, share)
    assert n_problems == 2 and by_problems(np.array([2, 0])) == {"share": 1.0}
    assert bootstrap_ci(n_problems, by_problems, samples=500)["share"] == [0.0, 1.0]
    narrow = bootstrap_ci(len(examples), share, samples=500)["share"]
    assert narrow[1] - narrow[0] < 0.4


def _share_of(values):
    values = np.array(values, dtype=np.float64)
    return lambda counts: {"share": float(counts @ values / counts.sum())}


def test_bootstrap_interval_narrows_with_more_units():
    small = bootstrap_ci(6, _share_of([1, 0, 1, 1, 0, 1]), samples=500)["share"]
    large = bootstrap_ci(300, _share_of([1, 0, 1, 1, 0, 1] * 50), samples=500)["share"]
    assert small[0] < 4 / 6 < small[1] and large[0] < 4 / 6 < large[1]
    assert large[1] - large[0] < (small[1] - small[0]) / 3
    assert bootstrap_ci(20, _share_of([1] * 20), samples=100) == {"share": [1.0, 1.0]}
    assert bootstrap_ci(1, _share_of([1]), samples=100) == {"share": None}
    # Undefined on most resamples (a rate of an empty class, say): no interval, not a guess.
    rare = lambda counts: {"x": 1.0 if counts[::2].sum() > counts.sum() * 0.9 else None}  # noqa: E731
    assert bootstrap_ci(20, rare, samples=100) == {"x": None}


def _held_out_rows(rng, n, neutral_as_correct=True):
    """Rows as evaluate_examples makes them: ratings, P(correct) (coarse, so that scores tie),
    gold and predicted first error, whole or not; some rows have no rated step."""
    rows = []
    wrong = {-1} if neutral_as_correct else {-1, 0}
    for _ in range(n):
        ratings = [int(r) for r in rng.choice([-1, 0, 1], size=rng.integers(0, 5), p=[0.3, 0.2, 0.5])]
        p_correct = [float(p) for p in rng.integers(0, 11, len(ratings)) / 10]
        gold = next((i for i, r in enumerate(ratings) if r in wrong), None)
        predicted = next((i for i, p in enumerate(p_correct) if p < 0.5), None)
        rows.append((ratings, p_correct, gold, predicted, bool(rng.random() < 0.8)))
    return rows


@pytest.mark.parametrize("neutral_as_correct", [True, False])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_weighted_metrics_of_a_resample_are_those_recomputed_on_its_copied_rows(threshold, neutral_as_correct):
    """The bootstrap's fast statistic against scikit-learn on the rows a resample copies: ties,
    neutral steps, alternative (not whole) rows, rows without steps and one-class resamples,
    which leave the same metrics undefined in both."""
    rng = np.random.default_rng(7)
    for n in (1, 3, 40):
        rows = _held_out_rows(rng, n, neutral_as_correct)
        weighted = WeightedMetrics(rows, threshold, neutral_as_correct)
        for draw in [np.arange(n)] + [rng.integers(0, n, n) for _ in range(30)]:
            copied = [rows[i] for i in draw]
            expected = _solution_metrics(copied, threshold, neutral_as_correct)
            got = weighted(np.bincount(draw, minlength=n))
            assert set(got) == {k for k in expected if not k.startswith("n_")}
            for key, value in got.items():
                assert value == (None if expected[key] is None else pytest.approx(expected[key])), key


def test_a_perfect_model_keeps_its_interval_at_the_top_when_errors_are_rare():
    """40 solutions, 3 with an error, every one found: resamples that drew no erroneous solution
    leave the metrics that need one undefined, rather than pulling their lower end to 0."""
    rows = [([1, -1], [0.9, 0.1], 1, 1, True)] * 3 + [([1, 1], [0.9, 0.8], None, None, True)] * 37
    intervals = bootstrap_ci(len(rows), WeightedMetrics(rows, 0.5), samples=1000)
    assert all(intervals[key] == [1.0, 1.0] for key in intervals), intervals


def test_best_of_n_and_file_evaluation_carry_intervals():
    tokenizer = build_byte_tokenizer()
    model = _MarkedSteps(tokenizer)

    def record(n: int, answer: int, mark: str) -> dict:
        """A phase-2 PRM800K record: a right solution, or a wrong one whose first step ends in "!"."""
        steps = [f"{n} + {n} = {answer}{mark}", f"# Answer\n\n{answer}"]
        return {"question": {"problem": f"{n} + {n}?", "ground_truth_answer": str(2 * n),
                             "pre_generated_steps": steps, "pre_generated_answer": str(answer)},
                "label": {"steps": [{"completions": [{"text": text, "rating": -1 if mark else 1}],
                                     "chosen_completion": 0} for text in steps[: 1 if mark else 2]],
                          "finish_reason": "found_error" if mark else "solution"}}

    records = [record(n, answer, mark) for n in range(1, 9) for answer, mark in ((2 * n, ""), (2 * n + 1, "!"))]
    metrics = evaluate(model, tokenizer, records, bootstrap=200)
    assert metrics["step_auroc"] == 1.0 and metrics["ci95"]["step_auroc"] == [1.0, 1.0]
    assert set(metrics["ci95"]) == {"step_auroc", "step_f1", "step_accuracy", "first_error_f1",
                                    "first_error_acc_erroneous", "first_error_acc_correct"}
    best = metrics["best_of_n"]
    assert (best["problems"], best["prm_accuracy"], best["prm_accuracy_ci95"]) == (8, 1.0, [1.0, 1.0])
    # A PRM that picks the wrong one on half the problems: an interval around a half.
    flipped = [_score(0.9 if (i // 2) % 2 == i % 2 else 0.1) for i in range(16)]
    solutions = [Solution(str(i // 2), "Q", ["s"], str(i % 2), "0") for i in range(16)]
    low, high = best_of_n(solutions, flipped, bootstrap=500)["prm_accuracy_ci95"]
    assert 0 <= low < 0.5 < high <= 1


class _MarkedSteps(torch.nn.Module):
    """A stand-in PRM that rates a step -1 exactly when it ends with "!", 0 when it ends with
    "~", +1 otherwise: the class logits at each position depend on the token before it."""

    def __init__(self, tokenizer):
        super().__init__()
        self.bang, self.tilde = tokenizer.convert_tokens_to_ids(["!", "~"])
        self.config = PretrainedConfig(max_position_embeddings=2048)
        self.anchor = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask=None):
        before = torch.nn.functional.pad(input_ids, (1, 0))[:, :-1]
        wrong = (before == self.bang).float()[..., None]
        neutral = (before == self.tilde).float()[..., None]
        logits = (wrong * torch.tensor([10.0, 0.0, 0.0]) + neutral * torch.tensor([0.0, 10.0, 0.0])
                  + (1 - wrong - neutral) * torch.tensor([0.0, 0.0, 10.0]))
        return SimpleNamespace(logits=logits + self.anchor)


def _labeled(problem: str, steps: list[str], ratings: list[int]) -> dict:
    """A PRM800K record rating its steps up to the first -1."""
    return {"question": {"problem": problem, "pre_generated_steps": steps},
            "label": {"steps": [{"completions": [{"text": text, "rating": rating}], "chosen_completion": 0}
                                for text, rating in zip(steps, ratings)],
                      "finish_reason": "found_error" if -1 in ratings else "solution"}}


@pytest.mark.parametrize("neutral", ["--neutral-as-correct", "--neutral-as-wrong"])
def test_a_model_rating_every_step_as_labeled_is_perfect_either_way_neutral_counts(tmp_path, monkeypatch, neutral):
    """With --neutral-as-wrong the model's P(correct) is p(+1), so a 0-rated step must be wrong
    in the truth as well: in step AUROC and F1, in the first error, and in the intervals."""
    tokenizer = build_byte_tokenizer()
    model = _MarkedSteps(tokenizer)
    monkeypatch.setattr("active_learning.model.load_checkpoint", lambda *_: (model, tokenizer, {}))
    records = []
    for n in range(1, 7):
        records += [_labeled(f"{n} + {n}?", [f"{n} + {n} = {2 * n}.", "Done."], [1, 1]),
                    _labeled(f"{n} + {n}?", ["Let me see~", f"{n} + {n} = {2 * n}.", "Done."], [0, 1, 1]),
                    _labeled(f"{n} + {n}?", [f"{n} + {n} = {2 * n + 1}!", "Done."], [-1])]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(prm, ["eval", "--model", str(tmp_path), str(data), neutral, "--device", "cpu",
                                      "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)
    for key in ("step_auroc", "step_f1", "step_accuracy", "first_error_f1", "first_error_acc_erroneous",
                "first_error_acc_correct"):
        assert (metrics[key], metrics["ci95"][key]) == (1.0, [1.0, 1.0]), key


PROCESSBENCH = [
    {"id": "a", "generator": "m", "problem": "1 + 1?", "steps": ["1 + 1 = 2.", "So 2."], "label": -1},
    {"id": "b", "problem": "2 + 2?", "steps": ["2 + 2 = 4.", "So 5!", "Done."], "label": 1},  # found
    {"id": "c", "problem": "3 + 3?", "steps": ["3 + 3 = 7.", "So 7."], "label": 0},  # missed
    {"id": "d", "problem": "4 + 4?", "steps": ["4 + 4 = 8.", "So 8!"], "label": -1},  # false alarm
    {"id": "e", "problem": "5 + 5?", "steps": ["Hm!", "5 + 5 = 11.", "So 11."], "label": 1},  # too early
]


def test_processbench_eval_prints_accuracies_and_f1(tmp_path, monkeypatch):
    tokenizer = build_byte_tokenizer()
    model = _MarkedSteps(tokenizer)
    monkeypatch.setattr("active_learning.model.load_checkpoint", lambda *_: (model, tokenizer, {}))
    data = tmp_path / "processbench.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PROCESSBENCH))
    result = CliRunner().invoke(prm, ["eval", "--model", str(tmp_path), "--format", "processbench", str(data),
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)
    assert metrics["first_error_acc_erroneous"] == pytest.approx(1 / 3)  # b of b, c, e
    assert metrics["first_error_acc_correct"] == pytest.approx(1 / 2)  # a of a, d
    assert metrics["first_error_f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert (metrics["n_erroneous"], metrics["n_correct"], metrics["n_solutions"]) == (3, 2, 5)
    for key in ("first_error_f1", "first_error_acc_erroneous", "first_error_acc_correct"):
        low, high = metrics["ci95"][key]
        assert 0 <= low <= metrics[key] <= high <= 1
    assert set(metrics["ci95"]) == {"first_error_f1", "first_error_acc_erroneous", "first_error_acc_correct"}
    without = CliRunner().invoke(prm, ["eval", "--model", str(tmp_path), "--format", "processbench", str(data),
                                       "--device", "cpu", "--bootstrap", "0"])
    assert without.exit_code == 0 and "ci95" not in json.loads(without.output)


def test_processbench_files_as_published_are_one_json_array(tmp_path):
    """ProcessBench's splits (gsm8k.json, math.json, ...) are each one JSON array of records."""
    data = tmp_path / "math.json"
    data.write_bytes(b"\xef\xbb\xbf\n" + json.dumps(PROCESSBENCH, indent=2).encode())
    solutions, first_errors = load_processbench(data)
    assert [s.problem_id for s in solutions] == ["a", "b", "c", "d", "e"]
    assert first_errors == [None, 1, 0, None, 1]
    data.write_text(json.dumps([PROCESSBENCH[0], ["not", "a", "record"]]))
    with pytest.raises(ValueError, match=re.escape(f"{data}[1]: not a JSON object but list")):
        load_processbench(data)
    data.write_text("[" + json.dumps(PROCESSBENCH[0]))
    with pytest.raises(ValueError, match=re.escape(f"{data}: starts as a JSON array but is not valid JSON")):
        load_processbench(data)


def test_processbench_without_an_erroneous_solution_prints_its_metrics_as_null(tmp_path, monkeypatch):
    tokenizer = build_byte_tokenizer()
    model = _MarkedSteps(tokenizer)
    monkeypatch.setattr("active_learning.model.load_checkpoint", lambda *_: (model, tokenizer, {}))
    data = tmp_path / "processbench.jsonl"
    data.write_text(json.dumps({"id": "x", "problem": "2+3?", "steps": ["2+3=5", "# Answer\n\n5"], "label": -1}))
    result = CliRunner().invoke(prm, ["eval", "--model", str(tmp_path), "--format", "processbench", str(data),
                                      "--device", "cpu", "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)
    assert metrics["first_error_acc_correct"] == 1.0
    assert metrics["first_error_acc_erroneous"] is None and metrics["first_error_f1"] is None


@pytest.mark.parametrize(("change", "message"), [
    ({"label": 3}, "`label` must be -1 or the index of one of its 2 steps, not 3"),
    # As the file wrote it, not as Python shows it.
    ({"label": True}, "of its 2 steps, not true"),
    ({"label": "0"}, 'of its 2 steps, not "0"'),
    ({"label": "1"}, "`label` must be"),
    ({"steps": []}, "`steps` (a non-empty list of texts)"),
    ({"steps": ["2+3=5", " "], "label": -1}, "`steps[1]` is blank: a step needs text"),
    ({"problem": None}, "needs `problem`"),
])
def test_processbench_records_are_checked(change, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        load_processbench([PROCESSBENCH[0], {**PROCESSBENCH[2], **change}])
    assert str(caught.value).startswith("record 2 (id c)")


def test_a_processbench_record_without_a_label_says_so():
    unlabeled = {key: value for key, value in PROCESSBENCH[2].items() if key != "label"}
    with pytest.raises(ValueError, match=re.escape("needs `label`: the index of its first wrong step, or -1")):
        load_processbench([unlabeled])


def test_eval_wants_the_file_once(tmp_path):
    result = CliRunner().invoke(prm, ["eval", "--model", str(tmp_path)])
    assert result.exit_code == 2 and "give the file to evaluate on once" in result.output


def test_an_empty_processbench_file_is_named(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match=re.escape(f"{empty}: no ProcessBench records to evaluate on")):
        load_processbench(empty)


def test_two_models_are_compared_on_the_steps_both_scored():
    """A step one model's tokenizer makes too long to score is left out of both models' metrics,
    so that the difference is over the same labels."""
    long_step = "x" * 300
    torch.manual_seed(0)
    a = load_base("tiny")
    torch.manual_seed(1)
    model_b, tokenizer_b = load_base("tiny")
    # B reads the long step as one token and scores it; A's bytes run past the limit.
    tokenizer_b.add_tokens([long_step])
    model_b.resize_token_embeddings(len(tokenizer_b))
    b = (model_b, tokenizer_b)
    examples = load_examples([to_prm800k(c) for c in iter_candidates(8, 2, seed=3)])
    examples.append(Example("long", "What is x?", ["Write it out.", long_step, "So x."], [1, -1, 1]))
    unscorable = [*examples[:-1], Example("long", "What is x?", ["Write it out.", long_step, "So x."], [1, None, 1])]

    compared = compare_examples(a, b, examples, max_length=256)
    by_b_alone = evaluate_examples(*b, examples, max_length=256)
    assert by_b_alone != evaluate_examples(*b, unscorable, max_length=256)  # B does score the step
    for name, model in (("a", a), ("b", b)):
        alone = evaluate_examples(*model, unscorable, max_length=256)
        for key in COMPARED:
            assert compared[name][key] == pytest.approx(alone[key]), (name, key)


def test_best_of_n_of_two_models_ranks_each_candidate_on_the_steps_both_scored():
    # Model A cannot read the wrong candidate's second step, so it ranks that candidate last and
    # picks the right one; B reads it whole and prefers it (0.81 against 0.64). The difference is
    # the tokenizer's, not the models': restricted to the steps both scored, the candidate is read
    # in part by both, and both rank it last.
    solutions = [Solution("p", "Q", ["s", "t"], answer, "5") for answer in ["4", "5"]]
    solutions += [Solution("q", "R", ["s", "t"], answer, "2") for answer in ["2", "3"]]

    def scored(*steps):
        known = [s for s in steps if s is not None]
        return SolutionScore([None if s is None else [0, 1 - s, s] for s in steps], list(steps),
                             math.prod(known), min(known), None in steps)

    a = [scored(0.9, None), scored(0.8, 0.8), scored(0.9, 0.9), scored(0.1, 0.1)]
    b = [scored(0.9, 0.9), scored(0.8, 0.8), scored(0.9, 0.9), scored(0.1, 0.1)]
    assert (best_of_n(solutions, a)["prm_accuracy"], best_of_n(solutions, b)["prm_accuracy"]) == (1.0, 0.5)
    compared = compare_best_of_n(solutions, a, b)
    assert (compared["a"], compared["b"], compared["difference"]) == (1.0, 1.0, 0.0)
