"""Which solutions humans label next: pure functions on lists, no database, no model.

The rule follows "Let's Verify Step by Step": the labels that teach a PRM most are those on
*convincing wrong-answer* solutions, the ones the current PRM rates highly although their final
answer is wrong. A round's budget is split into

- a uniform-random control slice (`control_share`, drawn first so that it is a fair sample of
  the pool), which lets a researcher measure what the rule gains over uniform selection;
- QC items with gold ratings (`qc_share`), to keep measuring labeler accuracy;
- the ranked picks: `wrong_share` of them each problem's top-scored wrong-answer solutions, the
  rest each problem's top-scored of everything left (any answer), so the PRM also sees
  convincing right ones.

Ranked picks are taken per problem, a rank at a time: every problem's best first, then every
problem's second best, visiting problems in a seeded random order. A budget smaller than the
number of problems is so spread over randomly chosen problems instead of being spent on the
problems the model happens to score highest (under a product score, the short ones), which
would shift what is labeled away from the problems the PRM will meet.

Every slice respects the same per-problem cap and skips near-duplicates of solutions already
picked for that problem. The result is interleaved so that any prefix of the queue carries the
slices in proportion, whatever share of it labelers get through.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

CONVINCING_WRONG = "convincing_wrong"
TOP_SCORED = "top_scored"
RANDOM_CONTROL = "random_control"
QC = "qc"
NO_MODEL = "no_model"

_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Candidate:
    solution_id: int
    problem_id: Hashable
    # The PRM's solution score; None when there is no model to score with.
    score: float | None
    # "right", "wrong", "no_answer" or "ungraded".
    answer_grade: str
    # The steps as one text; only near-duplicate detection reads it.
    text: str = ""
    # A step was too long to score: the score lacks its factor, so the solution ranks below
    # every one read whole (as active_learning.score.best_of_n_order has it).
    truncated: bool = False


@dataclass(frozen=True)
class Pick:
    solution_id: int
    problem_id: Hashable
    score: float | None
    reason: str
    rank: int


@dataclass(frozen=True)
class SelectionRule:
    budget: int
    wrong_share: float = 0.8
    control_share: float = 0.1
    qc_share: float = 0.0
    per_problem_cap: int = 4
    # Jaccard similarity of word trigrams at or above which two solutions of the same problem
    # count as one; above 1 turns the check off.
    duplicate_similarity: float = 0.9
    seed: int = 0

    def __post_init__(self) -> None:
        if self.budget < 0 or self.per_problem_cap < 1:
            raise ValueError("budget must be >= 0 and per_problem_cap >= 1")
        for name in ("wrong_share", "control_share", "qc_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.control_share + self.qc_share > 1:
            raise ValueError("control_share + qc_share must not exceed 1")


def shingles(text: str, n: int = 3) -> frozenset[tuple[str, ...]]:
    """Word n-grams of a lower-cased text; numbers and symbols stay, since in math one changed
    number makes a different solution."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset({tuple(words)})
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def similarity(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class _Picker:
    """Accepts candidates under the per-problem cap and the near-duplicate rule."""

    def __init__(self, rule: SelectionRule) -> None:
        self.rule = rule
        self.chosen: dict[int, tuple[Candidate, str]] = {}
        self._per_problem: dict[Hashable, list[frozenset]] = defaultdict(list)

    def try_add(self, candidate: Candidate, reason: str) -> bool:
        if candidate.solution_id in self.chosen:
            return False
        taken = self._per_problem[candidate.problem_id]
        if len(taken) >= self.rule.per_problem_cap:
            return False
        grams = shingles(candidate.text)
        if self.rule.duplicate_similarity <= 1 and any(
            similarity(grams, other) >= self.rule.duplicate_similarity for other in taken
        ):
            return False
        taken.append(grams)
        self.chosen[candidate.solution_id] = (candidate, reason)
        return True

    def fill(self, ordered: Iterable[Candidate], reason: str, count: int) -> int:
        added = 0
        for candidate in ordered:
            if added >= count:
                break
            added += self.try_add(candidate, reason)
        return added

    def slice(self, reason: str) -> list[Candidate]:
        return [c for c, r in self.chosen.values() if r == reason]


def _by_score(candidates: Iterable[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (c.truncated, -(c.score or 0.0), c.solution_id))


def _per_problem(candidates: Iterable[Candidate], seed: int) -> list[Candidate]:
    """Each problem's candidates best-scored first, taken a rank at a time across problems
    visited in a seeded random order."""
    groups: dict[Hashable, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        groups[candidate.problem_id].append(candidate)
    problems = sorted(groups, key=str)
    random.Random(seed).shuffle(problems)
    ranked = [_by_score(groups[p]) for p in problems]
    depth = max(map(len, ranked), default=0)
    return [group[level] for level in range(depth) for group in ranked if level < len(group)]


def _shuffled(candidates: Sequence[Candidate], seed: int) -> list[Candidate]:
    order = sorted(candidates, key=lambda c: c.solution_id)
    random.Random(seed).shuffle(order)
    return order


def _counts(rule: SelectionRule, qc_available: int) -> tuple[int, int, int, int]:
    """(control, qc, wrong, rest) shares of the budget."""
    control = round(rule.budget * rule.control_share)
    qc = min(round(rule.budget * rule.qc_share), qc_available)
    ranked = rule.budget - control - qc
    wrong = round(ranked * rule.wrong_share)
    return control, qc, wrong, ranked - wrong


def select(
    candidates: Sequence[Candidate],
    rule: SelectionRule,
    qc_items: Sequence[Candidate] = (),
) -> list[Pick]:
    """The round's picks, best first, from scored candidates (see the module's docstring)."""
    if any(c.score is None for c in candidates):
        raise ValueError("every candidate needs a score; use select_uniform without a model")
    control, qc, wrong, rest = _counts(rule, len(qc_items))
    picker = _Picker(rule)
    picker.fill(_shuffled(candidates, rule.seed), RANDOM_CONTROL, control)
    picker.fill(_shuffled(qc_items, rule.seed + 1), QC, qc)
    wrong_ones = _per_problem((c for c in candidates if c.answer_grade == "wrong"), rule.seed)
    got = picker.fill(wrong_ones, CONVINCING_WRONG, wrong)
    # Too few wrong answers (or all capped): the rest of the budget goes to the top-scored.
    picker.fill(_per_problem(candidates, rule.seed), TOP_SCORED, rest + wrong - got)
    return interleave([
        (CONVINCING_WRONG, _by_score(picker.slice(CONVINCING_WRONG))),
        (TOP_SCORED, _by_score(picker.slice(TOP_SCORED))),
        (RANDOM_CONTROL, picker.slice(RANDOM_CONTROL)),
        (QC, picker.slice(QC)),
    ])


def select_uniform(
    candidates: Sequence[Candidate], rule: SelectionRule, reason: str = NO_MODEL,
    qc_items: Sequence[Candidate] = (),
) -> list[Pick]:
    """The rule's QC share, then a uniform sample of the rest of the budget under the same
    caps: the selection before any model exists or while none ranks, and the uniform arm of
    the simulation."""
    qc = min(round(rule.budget * rule.qc_share), len(qc_items))
    picker = _Picker(rule)
    picker.fill(_shuffled(qc_items, rule.seed + 1), QC, qc)
    picker.fill(_shuffled(candidates, rule.seed), reason, rule.budget - len(picker.slice(QC)))
    return interleave([(reason, picker.slice(reason)), (QC, picker.slice(QC))])


def interleave(slices: Sequence[tuple[str, Sequence[Candidate]]]) -> list[Pick]:
    """Merge (reason, candidates) slices so that every prefix holds each slice in proportion
    to its size; within a slice the given order is kept."""
    keyed = []
    for slice_index, (reason, items) in enumerate(slices):
        for position, candidate in enumerate(items):
            keyed.append(((position + 0.5) / len(items), slice_index, reason, candidate))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [
        Pick(c.solution_id, c.problem_id, c.score, reason, rank)
        for rank, (_, _, reason, c) in enumerate(keyed)
    ]
