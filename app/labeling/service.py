"""Labeling: handing out tasks, taking labels, a labeler's own counts."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, time
from typing import Any

from sqlalchemy import Row, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import BadInput, Conflict, NotFound
from app.labeling import queue
from app.labeling.schemas import (
    LabelerStats,
    LabelReceipt,
    LabelSummary,
    LabelSubmit,
    NextTask,
    StepRating,
    Task,
    TaskProblem,
    TaskSolution,
)
from app.models import (
    Assignment,
    AssignmentStatus,
    FinishReason,
    Label,
    LabelingMode,
    Problem,
    Project,
    Solution,
    User,
    utcnow,
)


# How many of a labeler's newest labels their stats page lists.
RECENT_LABELS = 10

# Next-task and submit are the hot path: their statements are built once, with named
# parameters, and run on the session's connection (see queue.py for why).
_TASK = select(
    Solution.steps,
    Problem.id.label("problem_id"),
    Problem.statement,
    Problem.answer,
    # The count of what waits behind this task, in the same round trip.
    select(func.count())
    .select_from(
        select(Assignment.id)
        .where(
            Assignment.project_id == bindparam("project"),
            Assignment.status == AssignmentStatus.waiting,
        )
        .limit(queue.WAITING_COUNT_LIMIT)
        .subquery()
    )
    .scalar_subquery()
    .label("waiting"),
).join(Problem, Problem.id == Solution.problem_id).where(Solution.id == bindparam("solution"))

# The assignment locked, with what checking the ratings needs.
_HELD_ASSIGNMENT = (
    select(
        Assignment.user_id,
        Assignment.status,
        Assignment.project_id,
        Assignment.solution_id,
        Assignment.generation,
        Assignment.leased_at,
        Project.labeling_mode,
        Solution.steps,
    )
    .join(Project, Project.id == Assignment.project_id)
    .join(Solution, Solution.id == Assignment.solution_id)
    .where(Assignment.id == bindparam("assignment"))
    .with_for_update(of=Assignment)
)

_LABEL_WITH_KEY = select(Label.id, Label.assignment_id, Label.finish_reason).where(
    Label.user_id == bindparam("user"), Label.idempotency_key == bindparam("key")
)

# Core, not the ORM's unit of work: one INSERT … RETURNING and nothing to flush.
_NEW_LABEL = insert(Label.__table__).returning(Label.__table__.c.id)

_CLOSE_ASSIGNMENT = (
    update(Assignment.__table__)
    .where(Assignment.id == bindparam("assignment"))
    .values(status=AssignmentStatus.done, done_at=bindparam("now"), expires_at=None)
)


def next_task(session: Session, project: Project, user: User) -> NextTask:
    lease = queue.lease_next(session, project, user)
    if lease is None:
        # Exact here: the page tells an empty-handed labeler how many slots wait for others.
        return NextTask(task=None, waiting=queue.waiting_count(session, project.id))
    row = session.connection().execute(
        _TASK, {"solution": lease.solution_id, "project": project.id}
    ).one()
    task = Task(
        assignment_id=lease.assignment_id,
        project_id=project.id,
        project_name=project.name,
        labeling_mode=project.labeling_mode,
        expires_at=lease.expires_at,
        problem=TaskProblem(id=row.problem_id, statement=row.statement, answer=row.answer),
        solution=TaskSolution(id=lease.solution_id, steps=row.steps),
    )
    return NextTask(task=task, waiting=row.waiting)


def submit_label(
    session: Session, user: User, assignment_id: int, data: LabelSubmit
) -> LabelReceipt:
    earlier = _label_with_key(session, user, data.idempotency_key)
    if earlier is not None:
        return _receipt_for_retry(earlier, assignment_id)
    connection = session.connection()
    held = connection.execute(_HELD_ASSIGNMENT, {"assignment": assignment_id}).first()
    if held is None or held.user_id != user.id:
        # Someone else's assignment reads as missing: ids must not reveal other labelers' work.
        raise NotFound(f"you hold no assignment {assignment_id}")
    if held.status == AssignmentStatus.done:
        # The lock was held by our own concurrent twin, which has committed in the meantime.
        earlier = _label_with_key(session, user, data.idempotency_key)
        if earlier is not None:
            return _receipt_for_retry(earlier, assignment_id)
        raise Conflict(f"assignment {assignment_id} was already submitted")
    if held.status == AssignmentStatus.waiting:
        # The lease ran out and the slot went back to the queue, still naming this labeler as
        # its last holder: the late label is welcome, unless the labeler has since taken the
        # same solution in another slot, which would make two labels of theirs on it.
        queue.lock_labeler(session, user.id)
        if queue.holds_solution_elsewhere(session, user.id, held.solution_id, assignment_id):
            raise Conflict(
                f"your lease on assignment {assignment_id} ran out and you have taken this "
                "solution again since: submit that task instead"
            )
    check_ratings(held.labeling_mode, len(held.steps), data)
    now = utcnow()
    try:
        label_id = connection.scalar(
            _NEW_LABEL,
            {
                "project_id": held.project_id,
                "solution_id": held.solution_id,
                "assignment_id": assignment_id,
                "user_id": user.id,
                "generation": held.generation,
                "finish_reason": data.finish_reason,
                "finish_note": (data.finish_note or "").strip() or None,
                "total_time_ms": data.total_time_ms,
                "steps": [_prm800k_step(r) for r in data.ratings],
                "idempotency_key": data.idempotency_key,
                "started_at": data.started_at or held.leased_at,
                "created_at": now,
            },
        )
    except IntegrityError as exc:
        # The assignment is locked and still open, so no label of it exists: the clash is this
        # labeler's key, sent at this moment for another assignment.
        raise Conflict("this idempotency key was already used for another assignment") from exc
    connection.execute(_CLOSE_ASSIGNMENT, {"assignment": assignment_id, "now": now})
    assert label_id is not None
    return LabelReceipt(
        label_id=label_id,
        assignment_id=assignment_id,
        finish_reason=data.finish_reason,
        duplicate=False,
    )


def release_task(session: Session, user: User, assignment_id: int) -> None:
    """Hand a lease back unlabeled, so that the next labeler can take it now."""
    assignment = queue.lock_assignment(session, assignment_id)
    if assignment is None or assignment.user_id != user.id:
        raise NotFound(f"you hold no assignment {assignment_id}")
    if assignment.status != AssignmentStatus.leased:
        raise Conflict(f"assignment {assignment_id} is not leased")
    queue.release(session, assignment)
    # Releasing means "not me": let the slot go to somebody else.
    assignment.user_id = None


def _label_with_key(session: Session, user: User, key: str) -> Row[Any] | None:
    return session.connection().execute(_LABEL_WITH_KEY, {"user": user.id, "key": key}).first()


def _receipt_for_retry(label: Row[Any], assignment_id: int) -> LabelReceipt:
    if label.assignment_id != assignment_id:
        raise Conflict("this idempotency key was already used for another assignment")
    assert label.finish_reason is not None and label.assignment_id is not None
    return LabelReceipt(
        label_id=label.id,
        assignment_id=label.assignment_id,
        finish_reason=label.finish_reason,
        duplicate=True,
    )


def _prm800k_step(rating: StepRating) -> dict[str, object]:
    # `text` is left out: the completion is the solution's own step (see models.label).
    return {
        "completions": [{"rating": rating.rating, "flagged": rating.flagged}],
        "human_completion": None,
        # PRM800K leaves chosen_completion null on the step that ended the solution badly.
        "chosen_completion": None if rating.rating == -1 else 0,
    }


def check_ratings(mode: LabelingMode, n_steps: int, data: LabelSubmit) -> None:
    ratings = [r.rating for r in data.ratings]
    k = len(ratings)
    if k > n_steps:
        raise BadInput(f"{k} ratings for a solution of {n_steps} steps")
    reason = data.finish_reason
    if reason in (FinishReason.give_up, FinishReason.bad_problem):
        if not (data.finish_note or "").strip():
            raise BadInput(f"{reason.value} needs a reason in finish_note")
    if mode == LabelingMode.first_error:
        if -1 in ratings[:-1]:
            raise BadInput("in first_error mode nothing is rated after the first -1")
        if reason == FinishReason.found_error and (k == 0 or ratings[-1] != -1):
            raise BadInput("found_error needs the last rating to be -1")
    elif reason == FinishReason.found_error and (k != n_steps or -1 not in ratings):
        raise BadInput("in full mode found_error needs every step rated and one of them -1")
    if reason == FinishReason.solution and (k != n_steps or -1 in ratings):
        raise BadInput("solution needs every step rated and none of them -1")


def labeler_stats(session: Session, user: User) -> LabelerStats:
    midnight = datetime.combine(utcnow().date(), time.min, tzinfo=UTC)
    labels = session.execute(
        select(Label.finish_reason, Label.total_time_ms, Label.steps, Label.created_at)
        .where(Label.user_id == user.id)
        .order_by(Label.id.desc())
        .limit(5000)
    ).all()
    total = session.scalar(select(func.count()).select_from(Label).where(Label.user_id == user.id))
    by_reason: dict[str, int] = {}
    for row in labels:
        key = row.finish_reason.value if row.finish_reason else "none"
        by_reason[key] = by_reason.get(key, 0) + 1
    times = [row.total_time_ms for row in labels if row.total_time_ms is not None]
    active = session.scalar(
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.user_id == user.id,
            Assignment.status == AssignmentStatus.leased,
            Assignment.expires_at > utcnow(),
        )
    )
    return LabelerStats(
        labels=total or 0,
        labels_today=sum(1 for row in labels if row.created_at >= midnight),
        steps_rated=sum(len(row.steps) for row in labels),
        flagged_steps=sum(
            1
            for row in labels
            for step in row.steps
            if any(c.get("flagged") for c in step.get("completions", ()))
        ),
        by_finish_reason=by_reason,
        median_time_ms=int(statistics.median(times)) if times else None,
        active_leases=active or 0,
        recent=_recent_labels(session, user, RECENT_LABELS),
    )


def _recent_labels(session: Session, user: User, limit: int) -> list[LabelSummary]:
    rows = session.execute(
        select(Label, Project.name)
        .join(Project, Project.id == Label.project_id)
        .where(Label.user_id == user.id)
        .order_by(Label.id.desc())
        .limit(limit)
    ).all()
    return [
        LabelSummary(
            label_id=label.id,
            project_id=label.project_id,
            project_name=name,
            solution_id=label.solution_id,
            finish_reason=label.finish_reason,
            steps_rated=len(label.steps),
            total_time_ms=label.total_time_ms,
            created_at=label.created_at,
        )
        for label, name in rows
    ]
