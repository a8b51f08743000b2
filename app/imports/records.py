"""What one imported line asks for (a problem, a solution, a label) and their content hashes.

The hashes make a re-import add nothing: problems are the same when statement and answer are,
solutions when problem, steps, final answer and verifier score are, and labels when the whole
record is (a label made in Stepwise, which has no file, is known by labeler, problem and time:
see app.imports.writer). Labels are hashed from their parsed form, so a record that was exported and comes
back with `null` where the original had no key at all is still the same label.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from active_learning.grading import extract_answer
from app.models import FinishReason, StepsSource

MAX_STEPS = 1000
MAX_ANSWER = 1000


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def encode_document(value: Any) -> str:
    """A JSON document as stored: keys in the order given, which an export gives back."""
    return orjson.dumps(value).decode()


def problem_hash(statement: str, answer: str | None) -> str:
    return _digest([statement, answer])


def solution_hash(problem: str, steps: list[str], answer: str | None, verifier_score: float | None) -> str:
    return _digest([problem, steps, answer, verifier_score])


@dataclass(slots=True)
class ProblemIn:
    statement: str
    answer: str | None
    reference_solution: str | None = None
    subject: str | None = None
    level: int | None = None
    source_id: str | None = None
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        self.hash = problem_hash(self.statement, self.answer)


@dataclass(slots=True)
class SolutionIn:
    steps: list[str]
    answer: str | None
    steps_source: StepsSource = StepsSource.given
    verifier_score: float | None = None
    generation: int | None = None
    origin: dict[str, Any] = field(default_factory=dict)

    # The answer given, or else the one the steps reach.
    final_answer: str | None = field(init=False)
    steps_json: str = field(init=False)

    def __post_init__(self) -> None:
        found = self.answer
        if found is None:
            found = extract_answer("\n".join(self.steps))
        self.final_answer = found if found is None or len(found) <= MAX_ANSWER else None
        self.steps_json = encode_document(self.steps)

    def hash_for(self, problem: str) -> str:
        # The final answer, not the given one: a candidate imported with its answer left out
        # and the same solution coming back from a PRM800K export, which spells the answer out,
        # must be one row.
        # solution_hash's, from the steps as encoded for storage (a list of strings has no keys
        # to sort).
        return _digest([problem, orjson.Fragment(self.steps_json), self.final_answer, self.verifier_score])


@dataclass(slots=True)
class QuestionAsGiven:
    """The question fields a shared problem or solution row may hold differently.

    Rows are shared between records (one problem, many solutions and labels), so the row a
    record lands on can carry another record's reference solution, or an answer that was
    extracted rather than given; these originals let the label keep its own.
    """

    ground_truth_solution: Any
    pre_generated_steps: Any
    pre_generated_answer: Any
    pre_generated_verifier_score: Any
    # The optional keys the record did not have (then None above): not hashed, as a record that
    # comes back with nulls for them is the same label.
    absent: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class LabelSteps:
    """A label's steps encoded as stored and as hashed (keys sorted): the same text unless a
    step holds a human completion object, whose keys are stored in the order given, or a
    string, stored as an object and hashed as given."""

    stored: str
    hashed: str


@dataclass(slots=True)
class LabelIn:
    # As the file wrote it, which the hash takes.
    labeler: str | None
    # As stored: None where `labeler` is blank, so that agreement and the labeler filters do not
    # take every label of a blank name for one person's. Worked out once, not per read: the
    # writer reads it several times a label.
    foreign_labeler: str | None
    created_at: datetime
    timestamp: Any
    generation: int | None
    is_quality_control: bool
    is_initial_screening: bool
    finish_reason: FinishReason | None
    total_time_ms: int | None
    finish_note: str | None
    steps: LabelSteps
    # Sparse: only what the columns and `steps` cannot give back exactly (see exports.prm800k).
    extra: dict[str, Any]
    question: QuestionAsGiven
    # Human completions given as strings, by step index: stored as objects, exported as given.
    # Hashed through `steps.hashed`, which holds them as given, so they are not in `extra` yet.
    human_texts: dict[str, str] = field(default_factory=dict)

    def hash_for(self, solution: str) -> str:
        q = self.question
        return _digest(
            [
                solution,
                self.labeler,
                self.timestamp,
                self.generation,
                self.is_quality_control,
                self.is_initial_screening,
                self.finish_reason,
                self.total_time_ms,
                orjson.Fragment(self.steps.hashed),
                self.extra,
                q.ground_truth_solution,
                q.pre_generated_steps is None,
                q.pre_generated_answer,
                q.pre_generated_verifier_score,
                # Only where there is one, so that the hashes of labels without keep their value.
                *([self.finish_note] if self.finish_note is not None else []),
            ]
        )


@dataclass(slots=True)
class PrmRecord:
    problem: ProblemIn
    solution: SolutionIn
    label: LabelIn | None


@dataclass(slots=True)
class Candidate:
    """A candidate solution naming its problem by statement, by id, or by the id its file gave
    it (MATH's `unique_id`, a string `problem_id`)."""

    problem_statement: str | None
    problem_id: int | None
    solution: SolutionIn
    # Its `text` held no separator and became one step of several lines.
    uncut: bool = False
    problem_source_id: str | None = None


@dataclass(slots=True)
class StoredProblem:
    """The row a problem landed on: new, or one that was there before (with its own values)."""

    id: int
    hash: str
    answer: str | None
    reference_solution: str | None


@dataclass(slots=True)
class StoredSolution:
    id: int
    hash: str
    steps_source: StepsSource
    final_answer: str | None
    verifier_score: float | None
