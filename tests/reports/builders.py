"""Projects with problems of two solutions each, and labels sent through the labeling service."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.labeling import service as labeling
from app.labeling.queue import add_slots
from app.labeling.schemas import LabelSubmit, StepRating, Task
from app.models import FinishReason, Problem, Project, Solution


def add_problem(
    factory: sessionmaker[Session], project: Project, statement: str, n_solutions: int = 2, priority: float = 0.0
) -> tuple[int, list[int]]:
    """A problem with `n_solutions` three-step solutions, queued; returns (problem, solutions)."""
    with session_scope(factory) as session:
        problem = Problem(project_id=project.id, statement=statement, answer="2", content_hash=uuid.uuid4().hex)
        session.add(problem)
        session.flush()
        ids = []
        for i in range(n_solutions):
            solution = Solution(
                project_id=project.id,
                problem_id=problem.id,
                steps=[f"Step $a_{j}$ of {i}." for j in range(3)],
                priority=priority,
                content_hash=uuid.uuid4().hex,
            )
            session.add(solution)
            session.flush()
            ids.append(solution.id)
        add_slots(session, project, [(s, priority, None) for s in ids])
        return problem.id, ids


def next_task(factory: sessionmaker[Session], project_id: int, user_id: int) -> Task | None:
    with session_scope(factory) as session:
        return labeling.next_task(session, project_id, user_id).task


def submit(
    factory: sessionmaker[Session],
    user_id: int,
    task: Task,
    reason: FinishReason,
    *,
    ratings: list[tuple[int, bool]] | None = None,
    note: str | None = None,
) -> int:
    given = ratings if ratings is not None else [(1, False)] * len(task.solution.steps)
    data = LabelSubmit(
        idempotency_key=uuid.uuid4().hex,
        ratings=[StepRating(rating=r, flagged=f) for r, f in given],  # type: ignore[arg-type]
        finish_reason=reason,
        finish_note=note,
        total_time_ms=1000,
    )
    with session_scope(factory) as session:
        return labeling.submit_label(session, user_id, task.assignment_id, data).label_id


def label_next(
    factory: sessionmaker[Session],
    project_id: int,
    user_id: int,
    reason: FinishReason,
    **kwargs: object,
) -> tuple[Task, int]:
    task = next_task(factory, project_id, user_id)
    assert task is not None, "the queue ran dry"
    return task, submit(factory, user_id, task, reason, **kwargs)  # type: ignore[arg-type]
