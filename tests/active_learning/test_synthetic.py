import json
import re
from collections import defaultdict

from sklearn.metrics import roc_auc_score

from active_learning.synthetic import iter_candidates, to_prm800k, write_prm800k

EQUATION = re.compile(r"^\$(-?\d+) (\+|-|\\times) (-?\d+) = (-?\d+)\$\.")


def _recheck(candidate) -> list[int]:
    """Rate the steps again from the text alone, as an independent oracle would."""
    ops = iter(candidate.problem.ops)
    value, ratings = candidate.problem.start, []
    for step in candidate.steps:
        match = EQUATION.match(step)
        if match:
            a, op, b, c = match.groups()
            want_op, want_b = next(ops)
            result = {"+": int(a) + int(b), "-": int(a) - int(b), "\\times": int(a) * int(b)}[op]
            ok = int(a) == value and int(b) == want_b and result == int(c) and {
                "add": "+", "subtract": "-", "multiply": "\\times"}[want_op] == op
            value = int(c)
            rating = 1 if ok else -1
        elif step.startswith("The remainder"):
            n, d, r = map(int, re.findall(r"\$(\d+)\$", step))
            rating = 0 if n % d == r else -1
        else:
            rating = 0
        if "# Answer" in step and step.rsplit("\n", 1)[-1] != str(value):
            rating = -1
        ratings.append(rating)
    return ratings


def test_ratings_are_exact():
    candidates = list(iter_candidates(150, 4, seed=7))
    for candidate in candidates:
        assert candidate.ratings == _recheck(candidate), candidate.steps


def test_mix_of_outcomes():
    candidates = list(iter_candidates(150, 4, seed=7))
    kinds = {(c.first_error is not None, c.is_correct) for c in candidates}
    # clean and right, wrong step but right answer, wrong step and wrong answer
    assert kinds == {(False, True), (True, True), (True, False)}
    assert all(c.steps[-1].endswith(f"# Answer\n\n{c.answer}") for c in candidates)
    assert {r for c in candidates for r in c.ratings} == {-1, 0, 1}


def _labeled_steps(seed: int) -> list[tuple[int, int, bool]]:
    """(index, length, is wrong) of every step a PRM800K labeler would rate: up to the first -1."""
    rows = []
    for candidate in iter_candidates(1500, 4, seed=seed):
        last = candidate.first_error if candidate.first_error is not None else len(candidate.steps) - 1
        rows += [(i, len(candidate.steps[i]), candidate.ratings[i] == -1) for i in range(last + 1)]
    return rows


def test_place_and_length_do_not_tell_wrong_steps():
    # The best any position-only model can do: the wrong-step rate of each (index, length)
    # seen on one sample, used as its score on another.
    rate = defaultdict(lambda: [0, 0])
    for index, length, wrong in _labeled_steps(seed=11):
        rate[index, length][0] += wrong
        rate[index, length][1] += 1
    held_out = _labeled_steps(seed=12)
    overall = sum(wrong for _, _, wrong in held_out) / len(held_out)
    scores = [(rate[i, n][0] + overall) / (rate[i, n][1] + 1) for i, n, _ in held_out]
    assert 0.1 < overall < 0.3
    assert roc_auc_score([wrong for _, _, wrong in held_out], scores) < 0.55
    for index in range(6):
        at_index = [wrong for i, _, wrong in held_out if i == index]
        assert abs(sum(at_index) / len(at_index) - overall) < 0.03, index


def test_remarks_do_not_tell_wrong_steps():
    # Among the steps a labeler rates, a remark is as likely to be wrong as an equation, and a
    # step after a remark as likely as one after none: a remark's presence says nothing.
    rate = defaultdict(lambda: [0, 0])
    for candidate in iter_candidates(1500, 4, seed=5):
        last = candidate.first_error if candidate.first_error is not None else len(candidate.steps) - 1
        for i in range(last + 1):
            remark = candidate.steps[i].startswith("The remainder")
            after_remark = any(s.startswith("The remainder") for s in candidate.steps[:i])
            for key in (("remark", remark), ("after_remark", after_remark)):
                rate[key][0] += candidate.ratings[i] == -1
                rate[key][1] += 1
    share = {key: wrong / total for key, (wrong, total) in rate.items()}
    for kind in ("remark", "after_remark"):
        assert abs(share[kind, True] - share[kind, False]) < 0.03, share


def test_reproducible_and_seeded():
    first = [c.steps for c in iter_candidates(5, 3, seed=1)]
    assert first == [c.steps for c in iter_candidates(5, 3, seed=1)]
    assert first != [c.steps for c in iter_candidates(5, 3, seed=2)]


def test_prm800k_record_stops_at_first_error(tmp_path):
    candidate = next(c for c in iter_candidates(50, 4, seed=3) if c.first_error not in (None, len(c.steps) - 1))
    record = to_prm800k(candidate)
    steps = record["label"]["steps"]
    assert len(steps) == candidate.first_error + 1
    assert steps[-1]["completions"][0]["rating"] == -1 and steps[-1]["chosen_completion"] is None
    assert record["label"]["finish_reason"] == "found_error"
    assert record["question"]["pre_generated_steps"] == candidate.steps
    full = to_prm800k(candidate, first_error_only=False)
    assert [s["completions"][0]["rating"] for s in full["label"]["steps"]] == candidate.ratings

    path = tmp_path / "syn.jsonl"
    assert write_prm800k(str(path), iter_candidates(3, 2, seed=3)) == 6
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(rows[0]) == {"labeler", "timestamp", "generation", "is_quality_control_question",
                            "is_initial_screening_question", "question", "label"}


def test_a_miscopied_restatement_is_wrong_but_keeps_the_answer():
    candidates = list(iter_candidates(400, 4, seed=11, errors=("carry", "restate")))
    restated = [(c, i) for c in candidates for i, s in enumerate(c.steps) if s.startswith("We now have")]
    assert restated
    for candidate, i in restated:
        value = int(re.search(r"= (-?\d+)\$", candidate.steps[i - 1]).group(1))
        said = int(re.search(r"\$(-?\d+)\$", candidate.steps[i]).group(1))
        assert candidate.ratings[i] == (0 if said == value else -1)
    slips = [c for c, i in restated if c.ratings[i] == -1 and c.first_error == i]
    # The restated slip leaves the carried value alone, so the answer is still right; carried
    # slips are not, so the mix holds both outcomes of a wrong step.
    assert slips and all(c.is_correct for c in slips)
    assert any(not c.is_correct for c in candidates)
    gaps = {abs(int(re.search(r"\$(-?\d+)\$", c.steps[i]).group(1))
                - int(re.search(r"= (-?\d+)\$", c.steps[i - 1]).group(1))) for c, i in restated
            if c.ratings[i] == -1}
    assert min(gaps) <= 3 and max(gaps) >= 10  # near and far miscopies


def test_restatements_appear_only_when_asked_for():
    assert not any(s.startswith("We now have") for c in iter_candidates(100, 4, seed=11) for s in c.steps)
