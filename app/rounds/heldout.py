"""The project's held-out set: its problems, fixed by a hash of their text, and what is measured
on them. Rounds judge their models on it, and comparisons of two versions read it as it stands."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from active_learning.data import HUMAN_SOURCE, Example, problem_id, record_source, split_by_problem
from app.rounds import pool

BEST_OF_N_PROBLEMS = 200
BEST_OF_N_SAMPLES = 16
# Problems are split into train and held-out by a hash of their text, with a seed fixed for
# good: a held-out problem stays held out in every round, so rounds are compared on one set.
HELDOUT_SEED = 0


def heldout_texts(problems: set[str], share: float) -> set[str]:
    probes = [Example(problem_id(text), text, [], []) for text in problems]
    _, held = split_by_problem(probes, share, HELDOUT_SEED)
    return {e.prompt for e in held}


def heldout_records(records: list[dict[str, Any]], held: set[str]) -> list[dict[str, Any]]:
    """The labelers' records of the problems in `held` (heldout_texts): a model is judged
    against people, never against another model's labels."""
    return [r for r in records if r["question"]["problem"] in held and record_source(r) == HUMAN_SOURCE]


def best_of_n_rows(session: Session, project_id: int, texts: set[str]) -> list[tuple]:
    """Graded solutions of up to BEST_OF_N_PROBLEMS held-out problems, BEST_OF_N_SAMPLES each."""
    problems = [pid for pid, text in pool.problems_of(session, project_id) if text in texts]
    problems = sorted(problems)[:BEST_OF_N_PROBLEMS]
    return pool.graded_solutions_of(session, problems, BEST_OF_N_SAMPLES) if problems else []
