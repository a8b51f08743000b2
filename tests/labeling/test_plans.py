"""PostgreSQL keeps one plan for the hot path's statements instead of planning every call.

psycopg prepares a statement on its sixth run on a connection; PostgreSQL then makes custom
plans five times and keeps one generic plan once that is estimated as good as theirs. While the
queue's status was a parameter, no generic plan of the pick was: the partial indexes on status
cannot serve `status = $1`. So the pick was planned on every call, and planning cost more than
running it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.labeling import service
from app.labeling.schemas import LabelSubmit, StepRating
from app.models import FinishReason
from tests.conftest import add_many_solutions, add_solutions, make_project, make_user, prepared_plans

# Enough calls to pass psycopg's five unprepared runs and PostgreSQL's five custom plans.
CALLS = 16
# A queue long enough that the planner's estimates favour its partial index, as in production:
# on a few rows any plan is as cheap as another.
QUEUED = 20_000


@pytest.mark.parametrize("backend", ["postgresql"])
def test_hot_path_statements_keep_one_plan(session_factory, backend):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, CALLS + 1)
    add_many_solutions(session_factory, project.id, QUEUED, queued=True)
    user = make_user(session_factory, "ann", "labeler")
    # Calls one after another take the pool's one idle connection each time: the prepared
    # statements counted below are all of theirs.
    backends = {_next_and_submit(session_factory, project.id, user.id, n) for n in range(CALLS)}
    assert len(backends) == 1
    hot = {
        "pick": "UPDATE assignments SET status=",
        "project and current lease": "SELECT projects.id, projects.name, projects.labeling_mode",
        "held assignment": "SELECT assignments.user_id, assignments.status",
        "label": "WITH closed AS (UPDATE assignments",
    }
    with session_scope(session_factory) as session:
        found = prepared_plans(session, hot)
    for name, plans in found.items():
        assert all(generic > 0 and custom <= 5 for generic, custom in plans), (name, plans)


def _next_and_submit(factory: sessionmaker[Session], project_id: int, user_id: int, n: int) -> int:
    with session_scope(factory) as session:
        pid = session.scalar(text("SELECT pg_backend_pid()"))
        task = service.next_task(session, project_id, user_id).task
        assert task is not None
        ratings = [StepRating(rating=1) for _ in task.solution.steps]
        data = LabelSubmit(
            idempotency_key=f"plan-key-{n:04d}",
            ratings=ratings,
            finish_reason=FinishReason.solution,
            total_time_ms=1000,
        )
        service.submit_label(session, user_id, task.assignment_id, data)
    assert pid is not None
    return int(pid)
