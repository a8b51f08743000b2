"""Synthetic verifiable solutions: arithmetic chains whose every step has a known rating.

A problem is a start value and a chain of operations ("Start with 7. Add 5, then multiply the
result by 3, ..."). A solution writes one equation per operation, may insert side remarks, and
ends with PRM800K's `# Answer` section. Mistakes are injected at a known step, so an oracle can
rate any candidate exactly, as a careful human labeler would:

- +1: the equation `a op b = c` applies the operation the problem names at this point, to the
  previous result as written, and `c` is computed correctly.
- 0: a true remark that makes no progress ("The remainder of 36 divided by 5 is 1.").
- -1: any other step, namely a wrong result (`12 * 3 = 35`), a wrong operand (`12 * 4`), a
  miscopied previous result (`13 * 3` after `= 12`), a false remark (remainder 2), a
  miscopied restatement of the current value (`We now have 13.` after `= 12`; kind `restate`,
  which leaves the value and so the answer intact), or an answer section that differs from the
  last result.

Each step is rated given the steps before it as written, so a step that correctly carries a
wrong value forward is +1; PRM800K labelers stop at the first -1 anyway. To rate a step a model
must therefore redo one small computation, compare an operand with the problem text, compare a
number with the previous step, or check a remainder; wrong numbers are off by 1 to 3, so a
wrong step has the same form and nearly always the same length as a right one (a far miscopied
restatement, off by 10 to 30, is the exception: the easy grade of that slip, and its number may
have another count of digits). False remarks leave the value intact, so some wrong-step solutions still reach the
right answer, as real ones do.
"""

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

_OPS = {"add": "+", "subtract": "-", "multiply": "\\times"}
_PHRASES = {
    "add": ["add {b}", "add {b} to it"],
    "subtract": ["subtract {b}", "take away {b}"],
    "multiply": ["multiply by {b}", "multiply the result by {b}"],
}
ERRORS = ("result", "operand", "carry", "remark", "restate")
# What a generator writes unless told otherwise; `restate` adds steps of its own, so it is asked
# for by name and leaves the solutions of the other kinds exactly as they were.
DEFAULT_ERRORS = ("result", "operand", "carry", "remark")


@dataclass
class Problem:
    problem_id: str
    text: str
    start: int
    ops: list[tuple[str, int]]
    answer: int


@dataclass
class Candidate:
    """One model-like solution with the oracle's rating of every step."""

    problem: Problem
    steps: list[str]
    ratings: list[int]
    answer: str

    @property
    def first_error(self) -> int | None:
        return next((i for i, r in enumerate(self.ratings) if r == -1), None)

    @property
    def is_correct(self) -> bool:
        return self.answer == str(self.problem.answer)


def error_kinds(text: str) -> tuple[str, ...]:
    """Kinds of mistakes from a comma-separated list, as the CLI and benchmarks take them."""
    kinds = tuple(kind.strip() for kind in text.split(",") if kind.strip())
    if not kinds or not set(kinds) <= set(ERRORS):
        raise ValueError(f"errors: choose from {', '.join(ERRORS)}")
    return kinds


def _apply(op: str, a: int, b: int) -> int:
    return a + b if op == "add" else a - b if op == "subtract" else a * b


def make_problem(rng: random.Random) -> Problem:
    # Values stay between 0 and a few hundred: small enough that a tiny model can learn the
    # arithmetic, and never negative, so that remainders are unambiguous.
    value = rng.randint(2, 20)
    start, ops = value, []
    for _ in range(rng.randint(2, 6)):
        op = rng.choice(["add"] + (["subtract"] if value > 0 else []) + (["multiply"] if value < 30 else []))
        if op == "multiply":
            b = rng.randint(2, 4)
        else:
            b = rng.randint(1, 20 if op == "add" else min(20, value))
        ops.append((op, b))
        value = _apply(op, value, b)
    phrases = [rng.choice(_PHRASES[op]).format(b=b) for op, b in ops]
    text = f"Start with {start}. " + ", then ".join(phrases).capitalize() + ". What number do you get?"
    problem_id = "syn-" + hashlib.sha1(text.encode()).hexdigest()[:12]
    return Problem(problem_id, text, start, ops, value)


def _remark(value: int, rng: random.Random, true: bool) -> str:
    """A remainder claim. True and false claims have the same form and length, so only the
    arithmetic tells them apart."""
    divisor = rng.choice([2, 5, 10])
    remainder = value % divisor
    if not true:
        remainder = rng.choice([r for r in range(divisor) if r != remainder])
    return f"The remainder of ${value}$ divided by ${divisor}$ is ${remainder}$."


def _off_by(rng: random.Random, value: int) -> int:
    """A nearby wrong number, still positive: a slip, not a change of sign or of size."""
    wrong = value + rng.choice([-3, -2, -1, 1, 2, 3])
    return wrong if wrong > 0 else value + 1


def _miscopied(rng: random.Random, value: int) -> int:
    """A restated value gone wrong, near (off by 1 to 3, hard to see) or far (off by 10 to 30,
    a different-looking number) with equal chance: two grades of the same slip."""
    if rng.random() < 0.5:
        return _off_by(rng, value)
    wrong = value + rng.choice([-1, 1]) * rng.randint(10, 30)
    return wrong if wrong > 0 else value + rng.randint(10, 30)


def _hazard(error_rate: float) -> float:
    """The chance that a step is the first wrong one, the same at every step, so that a
    solution of the average five steps holds a mistake with probability `error_rate`."""
    return 1 - (1 - error_rate) ** (1 / 5)


def make_candidate(problem: Problem, rng: random.Random, hazard: float,
                   errors: tuple[str, ...] = DEFAULT_ERRORS) -> Candidate:
    """A solution of `problem` with at most one mistake, of a kind drawn from `errors`.

    Labels stop at the first -1, so what a model learns from a step's place is the chance that
    a step is wrong given that the ones before it are right. Every step that can hold a mistake
    holds it with the same chance `hazard`, whatever its index, its kind and its length; the
    answer section is not a step of its own and never differs from the last result, so the last
    step is no likelier to be wrong than any other.
    """
    equation_errors = [e for e in errors if e in ("result", "operand", "carry")]
    remark_errors = [e for e in errors if e == "remark"]
    restate_errors = [e for e in errors if e == "restate"]
    steps, ratings, erred = [], [], False

    def strike(kinds: list[str]) -> str | None:
        nonlocal erred
        if erred or not kinds or rng.random() >= hazard:
            return None
        erred = True
        return rng.choice(kinds)

    a = problem.start
    for op, b in problem.ops:
        error, rating, written_a, written_b = strike(equation_errors), 1, a, b
        if error == "operand":
            written_b, rating = _off_by(rng, b), -1
        if error == "carry":
            written_a, rating = _off_by(rng, a), -1
        c = _apply(op, written_a, written_b)
        if error == "result":
            c, rating = _off_by(rng, c), -1
        steps.append(f"${written_a} {_OPS[op]} {written_b} = {c}$.")
        ratings.append(rating)
        a = c
        # Drawn only when asked for, so that the other kinds' solutions stay as they were.
        if restate_errors and rng.random() < 0.25:
            wrong = strike(restate_errors) is not None
            steps.append(f"We now have ${_miscopied(rng, a) if wrong else a}$.")
            ratings.append(-1 if wrong else 0)
        # A carried slip can turn the value negative, where "remainder" would be ambiguous.
        if a >= 0 and rng.random() < 0.25:
            false_remark = strike(remark_errors) is not None
            steps.append(_remark(a, rng, true=not false_remark))
            ratings.append(-1 if false_remark else 0)
    steps[-1] += f"\n\n# Answer\n\n{a}"
    return Candidate(problem, steps, ratings, str(a))


def iter_candidates(n_problems: int, solutions_per_problem: int, seed: int = 0,
                    error_rate: float = 0.6,
                    errors: tuple[str, ...] = DEFAULT_ERRORS) -> Iterator[Candidate]:
    """`solutions_per_problem` candidates for each of `n_problems` problems, reproducibly;
    a share of about `error_rate` of them has one mistake of a kind drawn from `errors`."""
    rng = random.Random(seed)
    hazard = _hazard(error_rate)
    for _ in range(n_problems):
        problem = make_problem(rng)
        for _ in range(solutions_per_problem):
            yield make_candidate(problem, rng, hazard, errors)


def to_prm800k(candidate: Candidate, first_error_only: bool = True, labeler: str = "oracle") -> dict:
    """A PRM800K record labeled by the oracle; phase-2 style (stop at the first -1) by default."""
    problem = candidate.problem
    last = len(candidate.steps) - 1
    if first_error_only and candidate.first_error is not None:
        last = candidate.first_error
    steps = []
    for i in range(last + 1):
        rating = candidate.ratings[i]
        steps.append({
            "completions": [{"text": candidate.steps[i], "rating": rating, "flagged": False}],
            "human_completion": None,
            # PRM800K leaves the step with the found error unchosen: the trajectory ends there.
            "chosen_completion": None if rating == -1 and first_error_only else 0,
        })
    # Rated past its error or not, a solution with a wrong step was "found_error": the importer
    # refuses a "solution" whose trajectory holds a -1, as Stepwise's own exports never write one.
    found_error = candidate.first_error is not None
    return {
        "labeler": labeler,
        "timestamp": "2024-01-01T00:00:00",
        "generation": None,
        "is_quality_control_question": False,
        "is_initial_screening_question": False,
        "question": {
            "problem": problem.text,
            "ground_truth_answer": str(problem.answer),
            "ground_truth_solution": None,
            "pre_generated_steps": candidate.steps,
            "pre_generated_answer": candidate.answer,
            "pre_generated_verifier_score": None,
        },
        "label": {
            "steps": steps,
            "total_time": 0,
            "finish_reason": "found_error" if found_error else "solution",
        },
    }


def write_prm800k(path: str, candidates: Iterator[Candidate], first_error_only: bool = True) -> int:
    """Write oracle-labeled PRM800K JSONL; returns the number of records."""
    count = 0
    with open(path, "wb") as f:
        for candidate in candidates:
            f.write(orjson.dumps(to_prm800k(candidate, first_error_only)) + b"\n")
            count += 1
    return count
