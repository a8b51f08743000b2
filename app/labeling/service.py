"""Labeling: handing out tasks, taking labels, a labeler's own counts."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import BadInput, Conflict, NotFound
from app.labeling import phase1, queue, task_handles
from app.projects.access import may_label, user_may_label
from app.projects.service import list_projects
from app.projects.guidelines import guidelines_version
from app.quality import gate
from app.quality.service import NOT_ABOUT_STEPS
from app.reports.service import record_reports
from app.labeling.schemas import (
    LabelerStats,
    LabelReceipt,
    LabelSubmit,
    LabelSummary,
    LeaseRenewal,
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
    Project,
    Skip,
    Solution,
    User,
    utcnow,
)

# How many of a labeler's newest labels their stats page lists.
RECENT_LABELS = 10

# Submit is on the hot path: its statements are built once, with named parameters, and run on
# the session's connection (see queue.py for why).
# A label this labeler already sent under an idempotency key, as _receipt_for_retry reads it.
_EARLIER_LABEL = (
    Label.id.label("earlier_id"),
    Label.assignment_id.label("earlier_assignment_id"),
    Label.finish_reason.label("earlier_finish_reason"),
    Label.finish_note.label("earlier_finish_note"),
    Label.steps.label("earlier_steps"),
)

# The assignment locked, with what checking the ratings needs, and the label this labeler
# already sent under this idempotency key, if any: a retry is told apart in the same round trip.
_HELD_ASSIGNMENT = (
    select(
        Assignment.user_id,
        Assignment.status,
        Assignment.project_id,
        Assignment.solution_id,
        Assignment.generation,
        Assignment.leased_at,
        Assignment.slot,
        # The mode the task was served in, not the project's now (see Assignment.labeling_mode).
        func.coalesce(Assignment.labeling_mode, Project.labeling_mode).label("labeling_mode"),
        Project.qc_feedback,
        Solution.steps,
        Solution.problem_id,
        may_label(Assignment.project_id).label("may_label"),
        *_EARLIER_LABEL,
    )
    .join(Project, Project.id == Assignment.project_id)
    .join(Solution, Solution.id == Assignment.solution_id)
    .outerjoin(
        Label,
        and_(Label.user_id == bindparam("user"), Label.idempotency_key == bindparam("key")),
    )
    .where(Assignment.id == bindparam("assignment"))
    .with_for_update(of=Assignment)
)

_LABEL_WITH_KEY = select(*_EARLIER_LABEL).where(
    Label.user_id == bindparam("user"), Label.idempotency_key == bindparam("key")
)

_LABEL_COLUMNS = (
    "project_id",
    "solution_id",
    "assignment_id",
    "user_id",
    "generation",
    "is_quality_control",
    "is_initial_screening",
    "finish_reason",
    "finish_note",
    "labeling_mode",
    "total_time_ms",
    "steps",
    "idempotency_key",
    "extra",
    "started_at",
    "created_at",
)
# Core, not the ORM's unit of work: one INSERT … RETURNING and nothing to flush. Every column
# with a default is given too: SQLAlchemy leaves Python-side defaults unfilled in an INSERT that
# carries a data-modifying CTE (below). Its parameters are named apart from the columns: that
# CTE's UPDATE would take a parameter named like one of its columns as a value to set.
assert {c.name for c in Label.__table__.c if c.default is not None} <= set(_LABEL_COLUMNS), (
    "a Label column with a default is missing from _LABEL_COLUMNS"
)
_NEW_LABEL = (
    insert(Label.__table__)
    .values({name: bindparam(f"label_{name}") for name in _LABEL_COLUMNS})
    .returning(Label.__table__.c.id)
)

_CLOSE_ASSIGNMENT = (
    update(Assignment.__table__)
    .where(Assignment.id == bindparam("assignment"))
    .values(status=AssignmentStatus.done, done_at=bindparam("now"), expires_at=None)
)

# On PostgreSQL the close rides along with the insert as a data-modifying CTE: one round trip
# instead of two. SQLite has no such CTEs, so there the two run one after the other.
_NEW_LABEL_CLOSING_ASSIGNMENT = _NEW_LABEL.add_cte(_CLOSE_ASSIGNMENT.cte("closed"))


@dataclass(frozen=True, slots=True)
class ProjectChoice:
    """A project as a labeler's list shows it: how much waits in it, and what of that is theirs."""

    project: Project
    # Slots waiting for anyone, and solutions the queue would serve this labeler now, each
    # counted up to a limit.
    waiting: int
    for_you: int
    # A task of theirs is in progress.
    holding: bool
    # Why they get no task here (see app.quality.gate), if they do not.
    held_back: str | None
    # Screening items come before anything else.
    screening: bool


def project_choices(session: Session, user: User, limit: int) -> list[ProjectChoice]:
    """The projects `user` may label, with what waits in each for them, counted up to `limit`:
    the list said "Start labeling" wherever anything waited, also where all of it waited for
    other labelers."""
    now = utcnow()
    choices = []
    for project in list_projects(session, seen_by=user):
        standing = gate.standing_of(session, project, user)
        choices.append(ProjectChoice(
            project=project,
            waiting=queue.waiting_count(session, project.id, limit),
            for_you=queue.open_to(session, project.id, user.id, now, limit),
            holding=queue.holds_lease(session, project.id, user.id, now),
            held_back=queue.PAUSED if project.paused else gate.HELD_BACK.get(standing.status),
            screening=standing.status == "screening",
        ))
    return choices


def check_guidelines_read(session: Session, project_id: int, user_id: int, version: str) -> None:
    """Refuse a task to a labeler whose page shows guidelines a manager has since edited: the
    page then shows the new ones before it asks again. One look-up, asked for by the page only;
    a project the labeler may not label in is not found, as the lease would find it."""
    found = session.execute(
        select(Project.guidelines).where(Project.id == project_id, may_label(Project.id)), {"user": user_id}
    ).first()
    if found is None:
        raise NotFound(f"no project with id {project_id}")
    current = guidelines_version(found.guidelines) if found.guidelines else ""
    if version != current:
        raise Conflict("the project's guidelines have changed since this page showed them: "
                       "reload the page to read them before the next task")


def next_task(session: Session, project_id: int, user_id: int, *, user_locked: bool = False) -> NextTask:
    """The labeler's task; `user_locked` as in queue.lease_next."""
    project, leased, held_back = queue.lease_next(session, project_id, user_id, user_locked=user_locked)
    if held_back is not None:
        return NextTask(task=None, waiting=0, reason=held_back)
    if leased is None:
        # Exact here: the page tells an empty-handed labeler how many slots wait for others.
        return NextTask(task=None, waiting=queue.waiting_count(session, project.id))
    # A task under lease keeps the mode it was served in, as its submit does.
    mode = leased.served_mode or project.labeling_mode
    task = Task(
        assignment_id=task_handles.handle_of(session, leased.assignment_id),
        project_id=project.id,
        project_name=project.name,
        labeling_mode=mode,
        expires_at=leased.expires_at,
        problem=TaskProblem(id=leased.problem_id, statement=leased.statement, answer=leased.answer),
        solution=TaskSolution(
            id=leased.solution_id,
            steps=leased.steps,
            alternatives=phase1.task_alternatives(session, leased.solution_id, leased.steps)
            if mode == LabelingMode.phase1
            else None,
        ),
    )
    return NextTask(task=task, waiting=leased.waiting)


def _not_held(task_id: int) -> str:
    # One answer for every case, as a task of another labeler must read as one that is not there.
    return (f"you hold no task {task_id}: a lease that ran out may have gone to another labeler, or the task "
            "is no longer open to you (its project or file removed, or the project closed to you)")


def submit_label(session: Session, user_id: int, task_id: int, data: LabelSubmit) -> LabelReceipt:
    """Store the label of the task a labeler knows as `task_id` (see task_handles)."""
    assignment_id = task_handles.assignment_of(session, task_id)
    connection = session.connection()
    key = {"user": user_id, "key": data.idempotency_key}
    held = connection.execute(_HELD_ASSIGNMENT, {"assignment": assignment_id, **key}).first()
    if held is None:
        # No such assignment; the key may still have been used for another one.
        earlier = connection.execute(_LABEL_WITH_KEY, key).first()
        if earlier is not None:
            return _receipt_for_retry(earlier, assignment_id, task_id, data)
        raise NotFound(_not_held(task_id))
    if not held.may_label:
        # Taken out of the project (or the project closed to them): nothing of it is theirs
        # to send any more, a retry of a label already stored included.
        raise NotFound(_not_held(task_id))
    if held.earlier_id is not None:
        return _receipt_for_retry(held, assignment_id, task_id, data, gold=_feedback(session, held, data))
    if held.user_id != user_id:
        # Someone else's assignment reads as missing: ids must not reveal other labelers' work.
        raise NotFound(_not_held(task_id))
    if held.status == AssignmentStatus.done:
        # The lock was held by our own concurrent twin, which has committed in the meantime;
        # its label is newer than the snapshot the locking statement read, so look again.
        earlier = connection.execute(_LABEL_WITH_KEY, key).first()
        if earlier is not None:
            return _receipt_for_retry(earlier, assignment_id, task_id, data)
        raise Conflict(f"assignment {task_id} was already submitted")
    if held.status == AssignmentStatus.waiting:
        # The lease ran out and the slot went back to the queue, still naming this labeler as
        # its last holder: the late label is welcome, unless the labeler has since taken the
        # same solution in another slot, which would make two labels of theirs on it.
        queue.lock_labeler(session, user_id)
        if queue.holds_solution_elsewhere(session, user_id, held.solution_id, assignment_id):
            raise Conflict(
                f"your lease on assignment {task_id} ran out and you have taken this "
                "solution again since: submit that task instead"
            )
    ratings, steps = _checked_steps(session, held, data)
    # A check slot (see app.quality.gate) is the only kind that costs more here.
    is_check = held.slot < 0
    now = utcnow()
    columns = {
        "project_id": held.project_id,
        "solution_id": held.solution_id,
        "assignment_id": assignment_id,
        "user_id": user_id,
        "generation": held.generation,
        "is_quality_control": False,
        "is_initial_screening": is_check and gate.is_screening_item(session, held.project_id, held.solution_id),
        "finish_reason": data.finish_reason,
        "finish_note": (data.finish_note or "").strip() or None,
        "labeling_mode": held.labeling_mode,
        "total_time_ms": data.total_time_ms,
        "steps": steps,
        "idempotency_key": data.idempotency_key,
        "extra": {},
        "started_at": data.started_at or held.leased_at,
        "created_at": now,
    }
    label = {f"label_{name}": value for name, value in columns.items()}
    closing = {"assignment": assignment_id, "now": now}
    try:
        if connection.dialect.name == "postgresql":
            label_id = connection.scalar(_NEW_LABEL_CLOSING_ASSIGNMENT, {**label, **closing})
        else:
            label_id = connection.scalar(_NEW_LABEL, label)
            connection.execute(_CLOSE_ASSIGNMENT, closing)
    except IntegrityError as exc:
        # PostgreSQL names the constraint (uq_labels_user_id_idempotency_key), SQLite its
        # columns. Any other clash goes to the app's general answer to racing writes.
        if "idempotency_key" not in str(exc.orig):
            raise
        # The assignment is locked and still open, so no label of it exists: the clash is this
        # labeler's key, sent at this moment for another assignment.
        raise Conflict("this idempotency key was already used for another assignment") from exc
    assert label_id is not None
    if is_check:
        # The answer fills the overlap as a label does: an ordinary slot it leaves unneeded goes.
        queue.drop_filled_slots(session, session.get_one(Project, held.project_id), [held.solution_id])
    record_reports(session, {**columns, "id": label_id}, held.problem_id, ratings)
    return LabelReceipt(
        label_id=label_id,
        assignment_id=task_id,
        finish_reason=data.finish_reason,
        duplicate=False,
        gold=_feedback(session, held, data),
    )


def _feedback(session: Session, held: Row[Any], data: LabelSubmit) -> list[int | None] | None:
    """The gold's ratings after a gold item is submitted, where the project shows them: a check
    item, or a gold solution served as an ordinary task, which grades the labeler the same way.
    Not after a give-up or a bad-problem report, which judge no step: QC does not grade them, and
    a labeler could give up on every check item to read its gold at no cost."""
    if not held.qc_feedback or data.finish_reason in NOT_ABOUT_STEPS:
        return None
    return gate.gold_ratings(session, held.project_id, held.solution_id)


def _checked_steps(
    session: Session, held: Row[Any], data: LabelSubmit
) -> tuple[list[StepRating], list[dict[str, Any]]]:
    """The rating of each step the labeler went through, and the label's steps as stored;
    BadInput when the label breaks its mode's rules."""
    if held.labeling_mode != LabelingMode.phase1:
        check_ratings(held.labeling_mode, len(held.steps), data)
        return data.ratings, [prm800k_step(r) for r in data.ratings]
    alternatives = phase1.task_alternatives(session, held.solution_id, held.steps)
    phase1.check_alternatives(alternatives, data)
    return phase1.path_ratings(data), phase1.stored_steps(alternatives, held.steps, data)


def _locked_own(session: Session, user: User, task_id: int) -> Assignment:
    """The task's queue slot, locked, if this labeler holds it (or held it last) and may still
    label in its project."""
    assignment = queue.lock_assignment(session, task_handles.assignment_of(session, task_id))
    if (
        assignment is None
        or assignment.user_id != user.id
        or not user_may_label(session, user, assignment.project_id)
    ):
        raise NotFound(_not_held(task_id))
    return assignment


def release_task(session: Session, user: User, task_id: int) -> None:
    """Hand a lease back unlabeled, so that the next labeler can take it now."""
    assignment = _locked_own(session, user, task_id)
    if assignment.status != AssignmentStatus.leased:
        raise Conflict(f"assignment {task_id} is not leased")
    if assignment.slot < 0:
        # A check slot is the labeler's own (see app.quality.gate): it stays theirs, as if its
        # lease had run out, to be served to them again, as a slot handed back comes back to
        # them while nobody else takes it. Deleted, it came back under a new id at each lease,
        # which told check items from the rest; its holder goes, as a handed-back slot's does,
        # so that a submit or renewal of it is refused alike.
        assignment.expires_at = utcnow()
        assignment.user_id = None
        return
    queue.release(assignment)
    # Releasing means "not me": let the slot go to somebody else.
    assignment.user_id = None


SCREENING_NOT_SKIPPED = (
    "screening questions cannot be skipped: answer it, or give up on it with a reason"
)


def skip_task(session: Session, user: User, task_id: int) -> None:
    """Pass over a leased solution without labeling it: the queue serves it to this labeler no
    more, and its slot goes to the next one. A check item skipped goes as an ordinary task does
    (a check item that came back would tell itself apart), except a screening item: skipping
    every one would pass screening unscreened."""
    assignment = _locked_own(session, user, task_id)
    if assignment.status != AssignmentStatus.leased:
        raise Conflict(f"assignment {task_id} is not leased")
    if assignment.slot < 0:
        if gate.is_screening_item(session, assignment.project_id, assignment.solution_id):
            raise Conflict(SCREENING_NOT_SKIPPED)
        session.delete(assignment)
    else:
        queue.release(assignment)
        assignment.user_id = None
    # Two tabs may skip the same lease: the second finds the first's skip.
    if session.get(Skip, (user.id, assignment.solution_id)) is None:
        session.add(Skip(user_id=user.id, solution_id=assignment.solution_id, project_id=assignment.project_id))


def unskip(session: Session, user: User, solution_id: int) -> None:
    """Take back a skip: the solution may be served to the labeler again, while it still needs
    labels (its slot went to the next labeler when it was skipped)."""
    skip = session.get(Skip, (user.id, solution_id))
    # One of a project they may no longer label in is not theirs to change (nor to learn of).
    if skip is None or not user_may_label(session, user, skip.project_id):
        raise NotFound(f"you have not skipped solution {solution_id}")
    session.delete(skip)


def renew_lease(session: Session, user: User, task_id: int) -> LeaseRenewal:
    """Hold a task for a whole lease from now: the labeling page asks while its labeler is at
    work, so that a long solution is not taken from under them. A lease that ran out is taken
    again while nobody else has taken the slot (as a late submit is accepted then)."""
    assignment = _locked_own(session, user, task_id)
    if assignment.status == AssignmentStatus.done:
        raise Conflict(f"task {task_id} was already submitted")
    now = utcnow()
    # Once a lease ran out, next-task may have leased the labeler another solution (another
    # tab): one labeler holds one task of a project at a time, so this one is not taken back.
    queue.lock_labeler(session, user.id)
    if session.scalar(select(Assignment.id).where(
        Assignment.project_id == assignment.project_id, Assignment.user_id == user.id, Assignment.id != assignment.id,
        Assignment.status == AssignmentStatus.leased, Assignment.expires_at > now,
    ).limit(1)) is not None:
        raise Conflict(f"your lease on task {task_id} ran out and you have taken another task of the project since")
    if assignment.status == AssignmentStatus.waiting and queue.holds_solution_elsewhere(
            session, user.id, assignment.solution_id, assignment.id):
        raise Conflict(f"your lease on task {task_id} ran out and you have taken this solution again since")
    minutes = session.scalar(select(Project.lease_minutes).where(Project.id == assignment.project_id))
    assignment.status = AssignmentStatus.leased
    assignment.expires_at = now + timedelta(minutes=minutes or 0)
    return LeaseRenewal(expires_at=assignment.expires_at)


def _receipt_for_retry(earlier: Row[Any], assignment_id: int, task_id: int, data: LabelSubmit,
                       gold: list[int | None] | None = None) -> LabelReceipt:
    """The receipt of the label `earlier` (its `earlier_*` columns), sent again. A retry sends
    what it sent before; a key reused for other ratings or another outcome is a client's
    mistake, refused rather than answered with the first label's receipt as if stored."""
    if earlier.earlier_assignment_id != assignment_id:
        raise Conflict("this idempotency key was already used for another assignment")
    if not same_submission(earlier.earlier_finish_reason, earlier.earlier_finish_note, earlier.earlier_steps, data):
        raise Conflict("this idempotency key was already used for a different submission of this task: "
                       "a retry sends the same ratings, outcome and note")
    assert earlier.earlier_finish_reason is not None
    return LabelReceipt(
        label_id=earlier.earlier_id,
        assignment_id=task_id,
        finish_reason=earlier.earlier_finish_reason,
        duplicate=True,
        # As the first answer had it: the page that resends a submit whose answer it lost shows it.
        gold=gold,
    )


def same_submission(finish_reason: FinishReason | None, finish_note: str | None,
                    steps: list[dict[str, Any]], data: LabelSubmit) -> bool:
    """Whether a label stored under an idempotency key holds what `data` sends again."""
    if finish_reason != data.finish_reason or finish_note != ((data.finish_note or "").strip() or None):
        return False
    if data.alternatives is not None:
        return phase1.same_choices(steps, data)
    return steps == [prm800k_step(r) for r in data.ratings]


def prm800k_step(rating: StepRating) -> dict[str, object]:
    # `text` is left out: the completion is the solution's own step (see models.label).
    return {
        "completions": [{"rating": rating.rating, "flagged": rating.flagged}],
        "human_completion": None,
        # PRM800K leaves chosen_completion null on the step that ended the solution badly.
        "chosen_completion": None if rating.rating == -1 else 0,
    }


def check_ratings(mode: LabelingMode, n_steps: int, data: LabelSubmit) -> None:
    if data.alternatives is not None:
        raise BadInput("`alternatives` is for phase-1 projects; this project takes `ratings`", field="alternatives")
    ratings = [r.rating for r in data.ratings]
    k = len(ratings)
    if k > n_steps:
        raise BadInput(f"{k} ratings for a solution of {n_steps} steps", field="ratings")
    if problem := data.note_problem():
        raise BadInput(problem, field="finish_note")
    reason = data.finish_reason
    if mode == LabelingMode.first_error:
        if -1 in ratings[:-1]:
            raise BadInput("in first_error mode nothing is rated after the first -1", field="ratings")
        if reason == FinishReason.found_error and (k == 0 or ratings[-1] != -1):
            raise BadInput("found_error needs the last rating to be -1", field="finish_reason")
    elif reason == FinishReason.found_error and (k != n_steps or -1 not in ratings):
        raise BadInput("in full mode found_error needs every step rated and one of them -1", field="finish_reason")
    if reason == FinishReason.solution and (k != n_steps or -1 in ratings):
        raise BadInput("solution needs every step rated and none of them -1", field="finish_reason")


def own_labels() -> ColumnElement[bool]:
    """A filter on Label: the labels the labeler named by the bound parameter "user" sees as
    theirs, in their stats and their list alike. Current ones only (a correction replaces what it
    corrects), and none of projects they were taken out of: those are not theirs to see any more.
    """
    return (Label.user_id == bindparam("user")) & Label.superseded_at.is_(None) & may_label(Label.project_id)


def labeler_stats(session: Session, user: User) -> LabelerStats:
    midnight = datetime.combine(utcnow().date(), time.min, tzinfo=UTC)
    mine = {"user": user.id}
    labels = session.execute(
        select(Label.finish_reason, Label.total_time_ms, Label.steps, Label.created_at)
        .where(own_labels())
        .order_by(Label.id.desc())
        .limit(5000),
        mine,
    ).all()
    total = session.scalar(select(func.count()).select_from(Label).where(own_labels()), mine)
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
        skipped=session.scalar(
            select(func.count()).select_from(Skip).where(Skip.user_id == user.id, may_label(Skip.project_id)), mine
        ) or 0,
        recent=_recent_labels(session, user, RECENT_LABELS),
    )


def _recent_labels(session: Session, user: User, limit: int) -> list[LabelSummary]:
    rows = session.execute(
        select(Label, Project.name)
        .join(Project, Project.id == Label.project_id)
        .where(own_labels())
        .order_by(Label.id.desc())
        .limit(limit),
        {"user": user.id},
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
