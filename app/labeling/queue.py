"""The labeling queue: slots, leases and their expiry.

Each solution gets one `Assignment` row per label it still needs. Leasing picks the
highest-priority waiting slot (the oldest among equals) of a solution the labeler has not
touched; on PostgreSQL the pick is `FOR UPDATE SKIP LOCKED`, so concurrent labelers each lock
a different row instead of queueing behind one another; on SQLite every transaction begins
IMMEDIATE (see app.db), which serialises the same pick.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from itertools import islice
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session, aliased

from app.errors import NotFound
from app.machine_labels.service import is_human
from app.projects.access import may_label
from app.quality import gate
from app.models import (
    Assignment,
    AssignmentStatus,
    Label,
    LabelerStanding,
    LabelingMode,
    Problem,
    Project,
    Report,
    ReportKind,
    Skip,
    Solution,
    StandingDecision,
    User,
    utcnow,
)

T = TypeVar("T")

# How many expired leases one request puts back: bounded so no request pays for a backlog.
RECLAIM_BATCH = 200
# How often one process sweeps a project's expired leases back into the queue on its own.
# Sweeping on every next-task call was one statement in five; leases last minutes, so an
# expired one may wait a few seconds, and a labeler who finds nothing to take sweeps at once.
SWEEP_INTERVAL_S = 5.0
_next_sweep: dict[int, float] = {}
# How far next-task counts the waiting slots when it hands one out. Counting every slot of a
# 100,000-slot queue took longer than all the rest of the request; past a thousand the exact
# number tells a labeler nothing.
WAITING_COUNT_LIMIT = 1000

# The hot path's constants are written into its SQL, not sent as parameters. PostgreSQL keeps
# one plan of a prepared statement for every call only if that plan can be as good as one made
# for the values at hand: with `status = $1` no plan may use the partial indexes on status, and
# `LIMIT $2` reads as a tenth of the table, so the pick was planned afresh on every call, and
# planning cost more than running it (0.84 against 0.73 ms at 64 labelers).
WAITING = literal_column(f"'{AssignmentStatus.waiting.value}'")
LEASED = literal_column(f"'{AssignmentStatus.leased.value}'")
BAD_PROBLEM = literal_column(f"'{ReportKind.bad_problem.value}'")
ONE = literal_column("1")


def add_slots(
    session: Session,
    project: Project,
    solutions: Sequence[tuple[int, float, int | None]],
) -> int:
    """Give each (solution id, priority, generation) the slots it lacks to reach the overlap,
    numbered with the lowest numbers free: a retired problem's waiting slots were taken out
    from between leased or done ones, so a solution's numbers may have gaps. Inserted in the
    solutions' order (their files' order): the queue serves equal priorities oldest slot first,
    and a database's rows come in no order unless asked (raising the overlap served a file's
    solutions backwards)."""
    if not solutions:
        return 0
    have, labeled = _filled(session, [s[0] for s in solutions])
    rows = []
    for solution_id, priority, generation in sorted(solutions, key=lambda s: s[0]):
        taken = have.get(solution_id, set())
        lacking = project.overlap - labeled.get(solution_id, 0) - len(taken)
        free = (n for n in range(project.overlap + len(taken)) if n not in taken)
        rows.extend(
            {
                "project_id": project.id,
                "solution_id": solution_id,
                "slot": slot,
                "priority": priority,
                "generation": generation,
                "status": AssignmentStatus.waiting,
            }
            for slot in islice(free, max(0, lacking))
        )
    for chunk in _chunks(rows, 5000):
        session.execute(insert(Assignment), chunk)
    return len(rows)


# Labels that count towards the overlap without a slot: an import's (a correction has no slot
# either, but its slot is the corrected label's; a machine's label fills no labeler's slot).
_WITHOUT_SLOT = (Label.assignment_id.is_(None), Label.supersedes_id.is_(None), Label.superseded_at.is_(None),
                 is_human())
# A check item's answer (app.quality.gate) is a label of its solution like any other, given in
# a slot of the labeler's own: it counts towards the overlap too, or an ordinary slot left
# beside it could wait for ever once every labeler had answered the item.
_CHECK_ANSWERED = (Assignment.slot < 0, Assignment.status == AssignmentStatus.done)


def _filled(session: Session, ids: Sequence[int]) -> tuple[dict[int, set[int]], dict[int, int]]:
    """Each solution's slot numbers, and its labels that came without a slot."""
    have: dict[int, set[int]] = {}
    labeled: dict[int, int] = {}
    for chunk in _chunks(list(ids), 5000):
        for solution_id, slot in session.execute(
            select(Assignment.solution_id, Assignment.slot)
            .where(Assignment.solution_id.in_(chunk), Assignment.slot >= 0)
        ):
            have.setdefault(solution_id, set()).add(slot)
        for counted in (
            select(Label.solution_id, func.count()).where(Label.solution_id.in_(chunk), *_WITHOUT_SLOT)
            .group_by(Label.solution_id),
            select(Assignment.solution_id, func.count()).where(Assignment.solution_id.in_(chunk), *_CHECK_ANSWERED)
            .group_by(Assignment.solution_id),
        ):
            for solution_id, n in session.execute(counted):
                labeled[solution_id] = labeled.get(solution_id, 0) + n
    return have, labeled


def trim_slots(session: Session, project: Project) -> int:
    """After the overlap was lowered, take out the untouched slots (waiting, never leased) that
    each solution holds beyond what it lacks to reach the overlap, beside its labels and its
    other slots; the lowest numbers stay. Cutting by slot number alone left a solution done at
    slot 1 still waiting at slot 0. The DELETE asks again whether each slot is untouched: a
    labeler may lease one meanwhile, and a lease in hand is never taken back."""
    slots = Assignment.__table__
    untouched = and_(slots.c.status == AssignmentStatus.waiting, slots.c.user_id.is_(None))
    ordinary = and_(slots.c.project_id == project.id, slots.c.slot >= 0)
    ranked = (
        select(slots.c.id, slots.c.solution_id,
               func.row_number().over(partition_by=slots.c.solution_id, order_by=slots.c.slot).label("n"))
        .where(ordinary, untouched)
        .subquery()
    )
    touched = (
        select(slots.c.solution_id, func.count().label("n"))
        .where(or_(and_(ordinary, ~untouched),
                   and_(slots.c.project_id == project.id, *_CHECK_ANSWERED)))
        .group_by(slots.c.solution_id).subquery()
    )
    labeled = (
        select(Label.solution_id, func.count().label("n"))
        .where(Label.project_id == project.id, *_WITHOUT_SLOT)
        .group_by(Label.solution_id).subquery()
    )
    surplus = (
        select(ranked.c.id)
        .outerjoin(touched, touched.c.solution_id == ranked.c.solution_id)
        .outerjoin(labeled, labeled.c.solution_id == ranked.c.solution_id)
        .where(ranked.c.n > project.overlap - func.coalesce(touched.c.n, 0) - func.coalesce(labeled.c.n, 0))
    )
    return session.execute(
        delete(Assignment).where(Assignment.id.in_(surplus), Assignment.status == AssignmentStatus.waiting,
                                 Assignment.user_id.is_(None))
        .execution_options(synchronize_session=False, preserve_rowcount=True)
    ).rowcount or 0


def drop_filled_slots(session: Session, project: Project, solution_ids: Sequence[int]) -> int:
    """Take out of the queue the waiting slots of these solutions that imported labels have
    filled since they were made: a solution queued by one file and labeled by a later one needs
    that many fewer labelers. The highest-numbered untouched slots go; a lease in hand or a
    label given is never taken back. Returns how many went."""
    if not solution_ids:
        return 0
    have, labeled = _filled(session, solution_ids)
    surplus = {
        solution_id: len(have.get(solution_id, ())) + labeled.get(solution_id, 0) - project.overlap
        for solution_id in solution_ids
    }
    surplus = {solution_id: n for solution_id, n in surplus.items() if n > 0}
    doomed: list[int] = []
    for chunk in _chunks(list(surplus), 5000):
        rows = session.execute(
            select(Assignment.id, Assignment.solution_id)
            .where(
                Assignment.solution_id.in_(chunk),
                Assignment.slot >= 0,
                Assignment.status == AssignmentStatus.waiting,
                Assignment.user_id.is_(None),
            )
            .order_by(Assignment.solution_id, Assignment.slot.desc())
        )
        taken: dict[int, int] = {}
        for assignment_id, solution_id in rows:
            if taken.get(solution_id, 0) < surplus[solution_id]:
                taken[solution_id] = taken.get(solution_id, 0) + 1
                doomed.append(assignment_id)
    dropped = 0
    for chunk in _chunks(doomed, 5000):
        # Asked again: a labeler may have leased one of them meanwhile, and one reclaimed since
        # names its last holder, whose late submit is still taken.
        dropped += session.execute(
            delete(Assignment)
            .where(Assignment.id.in_(chunk), Assignment.status == AssignmentStatus.waiting,
                   Assignment.user_id.is_(None))
            .execution_options(synchronize_session=False, preserve_rowcount=True)
        ).rowcount or 0
    return dropped


def add_batch_slots(session: Session, project: Project, batch_id: int, first_id: int) -> int:
    """Give the solutions an import batch added (ids from `first_id` on) the slots their
    imported labels leave open.

    One INSERT ... SELECT, so that the database does the work: listing a 100,000-solution
    batch's ids and counts through Python (add_slots) took a tenth of the import's time. The
    solutions are new, so they have no slots yet and their only labels are the batch's own,
    none made through a slot; the id bound lets the primary key find them instead of a scan of
    every solution.
    """
    slot_numbers = union_all(*(select(literal(n).label("slot")) for n in range(project.overlap))).subquery()
    # The tables were just filled and have no statistics yet: a plan that looked fine on
    # paper scanned every label once per solution. Joined on the solution alone, the worst plan
    # left is one scan of the labels (a hash join), never one per solution. The source is
    # counted, not joined on: in the join it let PostgreSQL AND each solution's labels with an
    # index scan of every human label of the database, once per solution (36 s for 20,000
    # solutions beside 60,000 labels; 390 s for a 1,000,000-step file in the load benchmark).
    solutions = (
        select(
            Solution.id,
            Solution.priority,
            Solution.generation,
            func.count(case((is_human(), Label.id))).label("labels"),
        )
        .outerjoin(Label, Label.solution_id == Solution.id)
        .where(Solution.id >= first_id, Solution.import_batch_id == batch_id)
        .group_by(Solution.id, Solution.priority, Solution.generation)
        .subquery()
    )
    slots = select(
        literal(project.id),
        solutions.c.id,
        slot_numbers.c.slot,
        solutions.c.priority,
        solutions.c.generation,
        literal(AssignmentStatus.waiting.value),
    ).join_from(solutions, slot_numbers, slot_numbers.c.slot < project.overlap - solutions.c.labels)
    # Row ids in the file's order, which the queue serves equal priorities in (a grouping
    # promises no order of its own).
    slots = slots.order_by(solutions.c.id, slot_numbers.c.slot)
    columns = ["project_id", "solution_id", "slot", "priority", "generation", "status"]
    # psycopg closes the cursor, and its row count with it, before SQLAlchemy would read it.
    statement = insert(Assignment).from_select(columns, slots).execution_options(preserve_rowcount=True)
    return session.execute(statement).rowcount


def reclaim_expired(session: Session, project_id: int, now: datetime) -> int:
    expired = (
        select(Assignment.id)
        .where(
            Assignment.project_id == project_id,
            Assignment.status == AssignmentStatus.leased,
            Assignment.expires_at < now,
            # Check slots (see app.quality.gate) are the labeler's own: never requeued.
            Assignment.slot >= 0,
            # A retired problem's lease stays as it ran out, served to nobody (retiring took its
            # waiting slots out), its late submit still taken; the problem's return requeues it.
            ~exists().where(
                Solution.id == Assignment.solution_id,
                Problem.id == Solution.problem_id,
                Problem.retired_at.is_not(None),
            ),
        )
        .limit(RECLAIM_BATCH)
        .with_for_update(skip_locked=True)
    )
    # The last holder stays in user_id: their late submit is accepted until someone else
    # takes the slot.
    result = session.execute(
        update(Assignment)
        .where(Assignment.id.in_(expired.scalar_subquery()))
        .values(status=AssignmentStatus.waiting, expires_at=None)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount or 0


@dataclass(frozen=True, slots=True)
class LabelingProject:
    """What handing out a project's tasks needs of it, read as a plain row with the labeler's
    lease: an ORM Project costs more to make than to look up (see app.auth.service.Caller)."""

    id: int
    name: str
    labeling_mode: LabelingMode
    lease_minutes: int
    checks: gate.Checks


@dataclass(frozen=True, slots=True)
class LeasedTask:
    """A lease, with what its task shows and how many slots wait behind it."""

    assignment_id: int
    solution_id: int
    expires_at: datetime
    # The mode it was served in; None for a lease from before leases kept it.
    served_mode: LabelingMode | None
    steps: list[str]
    problem_id: int
    statement: str
    answer: str | None
    waiting: int


# NO KEY UPDATE: it excludes a second lease decision of the same labeler as firmly, without
# holding up the foreign-key checks of the labeler's own inserts (a label, a login's token).
_LOCK_USER = select(User.id).where(User.id == bindparam("user")).with_for_update(key_share=True)


def _task_columns(slot: Table) -> list[ColumnElement[object]]:
    """What the task of `slot`'s row shows, as subqueries on that row.

    Subqueries rather than joins, so that they fit an UPDATE's RETURNING as well as a SELECT:
    the statement that finds or takes a lease brings the task along, one round trip instead of
    two, and fit an outer join, which leaves them NULL where there is no slot. `waiting` leaves
    the leased slot out by its id: PostgreSQL's RETURNING reads the snapshot from before the
    update, in which the slot still waits.
    """
    solution = Solution.__table__
    problem = Problem.__table__
    others = Assignment.__table__.alias("waiting_slot")
    waiting = (
        select(others.c.id)
        .where(
            others.c.project_id == slot.c.project_id,
            others.c.status == WAITING,
            others.c.id != slot.c.id,
        )
        .limit(literal_column(str(WAITING_COUNT_LIMIT + 1)))
        .correlate(slot)
        .subquery()
    )
    counted = func.count()
    limit = literal_column(str(WAITING_COUNT_LIMIT))
    # A check slot (see app.quality.gate) takes no waiting slot, as an ordinary task does: one
    # fewer is said for it, or a labeler working alone would tell check items by the count.
    shown = case(
        (and_(slot.c.slot < literal_column("0"), counted > literal_column("0")), counted - ONE),
        (counted > limit, limit),
        else_=counted,
    )

    def of_problem(column: ColumnElement[object], name: str) -> ColumnElement[object]:
        return (
            select(column)
            .join_from(solution, problem, problem.c.id == solution.c.problem_id)
            .where(solution.c.id == slot.c.solution_id)
            .scalar_subquery()
            .label(name)
        )

    return [
        select(solution.c.steps).where(solution.c.id == slot.c.solution_id).scalar_subquery().label("steps"),
        of_problem(problem.c.id, "problem_id"),
        of_problem(problem.c.statement, "statement"),
        of_problem(problem.c.answer, "answer"),
        # Counted only for a slot that is there: where the slot is an outer join's NULL (no
        # current lease), matching no project, the count read every slot of the queue.
        case((slot.c.id.is_not(None), select(shown).select_from(waiting).correlate(slot).scalar_subquery())).label(
            "waiting"
        ),
    ]


# The statements of next-task are built once, with named parameters: building them on each
# call (the aliased subqueries most of all) took a fifth of the server's time per request.
# They run on the session's connection, in its transaction, rather than through
# Session.execute: they load no ORM objects, and skipping the ORM's execute path (autoflush,
# bulk-update bookkeeping, its result wrapping) took about 6% off the server's CPU time per
# next + submit pair.
_SLOTS = Assignment.__table__
_LEASE_COLUMNS = (
    _SLOTS.c.id.label("assignment_id"),
    _SLOTS.c.solution_id,
    _SLOTS.c.expires_at,
    _SLOTS.c.labeling_mode.label("served_mode"),
    *_task_columns(_SLOTS),
)

_LEASED_TASK = select(*_LEASE_COLUMNS)


def _project_and_lease_statement() -> Select[tuple[object, ...]]:
    """The project, if the labeler may label there, whether a manager retired them from it, and
    their current lease in it with its task (NULLs if none)."""
    held = _SLOTS.alias("held_slot")
    current_lease = (
        select(held.c.id)
        .where(
            held.c.project_id == bindparam("project"),
            held.c.user_id == bindparam("user"),
            held.c.status == LEASED,
            held.c.expires_at > bindparam("now"),
        )
        .order_by(held.c.leased_at)
        .limit(ONE)
        .scalar_subquery()
    )
    projects = Project.__table__
    standings = LabelerStanding.__table__
    # Retiring holds a labeler back whether or not the project checks anyone: a primary-key
    # look-up, in the same round trip.
    retired = exists().where(
        standings.c.project_id == projects.c.id,
        standings.c.user_id == bindparam("user"),
        standings.c.decision == literal_column(f"'{StandingDecision.retired.value}'"),
    )
    return (
        select(
            projects.c.id,
            projects.c.name,
            projects.c.labeling_mode,
            projects.c.lease_minutes,
            projects.c.screening_items,
            projects.c.screening_pass_mark,
            projects.c.qc_rate,
            projects.c.qc_pause_below,
            projects.c.paused_at,
            retired.label("retired"),
            *_LEASE_COLUMNS,
        )
        .select_from(projects.outerjoin(_SLOTS, _SLOTS.c.id == current_lease))
        .where(projects.c.id == bindparam("project"), may_label(projects.c.id))
    )


_PROJECT_AND_LEASE = _project_and_lease_statement()
_LEASED_TASK_FIELDS = tuple(f.name for f in fields(LeasedTask))


_HOLDS_SOLUTION = select(
    exists().where(Label.solution_id == bindparam("solution"), Label.user_id == bindparam("user"))
    | exists().where(
        Assignment.solution_id == bindparam("solution"),
        Assignment.user_id == bindparam("user"),
        Assignment.status == AssignmentStatus.leased,
        Assignment.id != bindparam("assignment"),
    )
)


def _servable_to_user(slot: Any, *, current_leases_only: bool) -> list[ColumnElement[bool]]:
    """What makes `slot` (an alias of the slots) one the labeler (the `user` parameter) may
    take, beside its own status: a solution they neither hold, labeled nor skipped, of a problem
    still served to them. `current_leases_only` passes over a lease of theirs that ran out."""
    mine = aliased(Assignment)
    # A labeler's finished slots are known by their labels; of their slots only the leased ones
    # need a look here. Checking done slots too made PostgreSQL, with statistics taken before
    # the labeler's history grew, materialise that whole history and compare it with every slot
    # passed over (84 ms per pick for a lone labeler 1,500 labels in); leases are a handful.
    held = [mine.solution_id == slot.solution_id, mine.user_id == bindparam("user"), mine.status == LEASED]
    if current_leases_only:
        held.append(mine.expires_at > bindparam("now"))
    leased_by_user = exists().where(*held)
    labeled_by_user = exists().where(
        Label.solution_id == slot.solution_id, Label.user_id == bindparam("user")
    )
    # The skips' primary key, one look-up.
    skipped_by_user = exists().where(Skip.user_id == bindparam("user"), Skip.solution_id == slot.solution_id)
    # A retired problem is served to nobody, and one a labeler reported as bad is not served to
    # them again (its other solutions would meet the same fault), while the label that reported
    # it stands: a correction may take the report back, and a manager's dismissal keeps the
    # report on the corrected label. Two primary-key look-ups and ix_reports_bad_problems (and,
    # only where a report exists, its label's key), for the slot the pick settles on and any it
    # passes over.
    solution = Solution.__table__.alias("slot_solution")
    problem = Problem.__table__.alias("slot_problem")
    reporting_label = Label.__table__.alias("reporting_label")
    reported_by_user = exists().where(
        Report.user_id == bindparam("user"),
        Report.kind == BAD_PROBLEM,
        Report.problem_id == problem.c.id,
        reporting_label.c.id == Report.label_id,
        reporting_label.c.superseded_at.is_(None),
    )
    servable_problem = exists().where(
        solution.c.id == slot.solution_id,
        problem.c.id == solution.c.problem_id,
        problem.c.retired_at.is_(None),
        ~reported_by_user,
    )
    return [~leased_by_user, ~labeled_by_user, ~skipped_by_user, servable_problem]


def _take_best_slot_statement() -> Update:
    """Lease the highest-priority waiting slot of a solution the labeler has not touched, of a
    problem still served to them.

    One statement: the pick is a locked subquery of the UPDATE that leases it, so the row
    travels neither to Python and back nor through the ORM's unit of work.
    """
    slot = aliased(Assignment)
    best = (
        select(slot.id)
        .where(
            slot.project_id == bindparam("project"),
            slot.status == WAITING,
            *_servable_to_user(slot, current_leases_only=False),
        )
        # Among equal priorities, every solution's first slot before any later one, oldest
        # first (a file's solutions in its order, imports in theirs): that is
        # ix_assignments_queue read backwards, with nothing to sort (an order the index does not
        # give made PostgreSQL sort every tied slot on each call, and right after an import all
        # of them tie at 0: 0.6 s for 200,000 slots). First slots first, because a labeler
        # passes over the slots of solutions they labeled: when a solution's slots came
        # together, a labeler working alone passed over one more on every pick.
        .order_by(slot.priority.desc(), slot.slot.asc(), slot.id.asc())
        .limit(ONE)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        # The table, not the mapped class: an ORM-enabled UPDATE costs a tenth of a
        # millisecond more, for bookkeeping no caller here needs.
        update(_SLOTS)
        .where(_SLOTS.c.id == best)
        .values(
            status=AssignmentStatus.leased,
            user_id=bindparam("user"),
            leased_at=bindparam("now"),
            expires_at=bindparam("until"),
            labeling_mode=bindparam("mode"),
        )
        .returning(_SLOTS.c.id.label("assignment_id"))
    )


_TAKE_BEST_SLOT = _take_best_slot_statement()
# On PostgreSQL the task comes back with the lease. SQLAlchemy writes SQLite's RETURNING
# columns without their table, inside subqueries too, which breaks the task's subqueries; an
# in-process database loses little by reading the task in a second statement.
_TAKE_BEST_SLOT_WITH_TASK = _TAKE_BEST_SLOT.returning(*_LEASE_COLUMNS[1:])
_TASK_OF_SLOT = _LEASED_TASK.where(_SLOTS.c.id == bindparam("assignment"))


def lock_labeler(session: Session, user_id: int) -> None:
    """One lease decision per labeler at a time: a double click or two tabs must not walk away
    with two different solutions, nor two slots of the same one."""
    session.connection().execute(_LOCK_USER, {"user": user_id})


def holds_solution_elsewhere(session: Session, user_id: int, solution_id: int, assignment_id: int) -> bool:
    """Whether the labeler has labeled `solution_id`, or leases another of its slots."""
    return session.connection().execute(
        _HOLDS_SOLUTION, {"user": user_id, "solution": solution_id, "assignment": assignment_id}
    ).scalar_one()


PAUSED = "A manager has paused labeling in this project: no new tasks until they resume it."


def lease_next(
    session: Session, project_id: int, user_id: int, *, user_locked: bool = False
) -> tuple[LabelingProject, LeasedTask | None, str | None]:
    """The project, with the labeler's current lease, or a new one on the best slot they may
    take, or None with the reason they are held back, if they are (see app.quality.gate).
    NotFound if there is no such project, or the labeler may not label there (see
    app.projects.access).

    `user_locked` says the caller already holds the labeler's row lock (see lock_labeler),
    taken in the same statement that found the user.
    """
    now = utcnow()
    if not user_locked:
        lock_labeler(session, user_id)
    # A statement of its own after the lock, not a join with it: under READ COMMITTED a
    # statement reads the snapshot it began with, taken before it waited for the lock, so
    # it would miss the lease a twin request took and committed meanwhile.
    row = session.connection().execute(
        _PROJECT_AND_LEASE, {"project": project_id, "user": user_id, "now": now}
    ).first()
    if row is None:
        raise NotFound(f"no project with id {project_id}")
    checks = gate.Checks(row.screening_items, row.screening_pass_mark, row.qc_rate, row.qc_pause_below)
    project = LabelingProject(row.id, row.name, row.labeling_mode, row.lease_minutes, checks)
    if row.retired:
        return project, None, gate.RETIRED
    if row.assignment_id is not None:
        return project, LeasedTask(**{name: row._mapping[name] for name in _LEASED_TASK_FIELDS}), None
    if row.paused_at is not None:
        # A lease in hand is finished (above), and one that ran out while nobody took its slot,
        # as renew and a late submit take it: the page that comes back to it asks here. Nothing
        # new is handed out.
        lapsed = _lapsed_lease(session, project, user_id, now)
        return project, lapsed, None if lapsed is not None else PAUSED
    if checks.enabled:
        # Only a project with screening or QC pays for the checks.
        verdict = gate.decide(session, project.id, checks, user_id, now)
        if verdict.reason is not None:
            return project, None, verdict.reason
        until = now + timedelta(minutes=project.lease_minutes)
        taken = verdict.resumed
        if taken is not None:
            session.execute(update(Assignment).where(Assignment.id == taken)
                            .values(user_id=user_id, leased_at=now, expires_at=until, labeling_mode=project.labeling_mode))
        elif verdict.solution_id is not None:
            taken = gate.new_check_slot(session, project.id, user_id, verdict.solution_id, now, until,
                                        project.labeling_mode)
        if taken is not None:
            row = session.connection().execute(_TASK_OF_SLOT, {"assignment": taken}).one()
            return project, LeasedTask(**row._mapping), None
    return project, _lease_new(session, project, user_id, now), None


def _lapsed_lease(session: Session, project: LabelingProject, user_id: int, now: datetime) -> LeasedTask | None:
    """The labeler's own slot whose lease ran out and that nobody has taken since (it still
    names them), leased to them again, in the mode it was served in."""
    lapsed = session.scalar(
        select(Assignment)
        .where(Assignment.project_id == project.id, Assignment.user_id == user_id,
               Assignment.status.in_((AssignmentStatus.leased, AssignmentStatus.waiting)))
        .order_by(Assignment.leased_at.desc())
        .limit(ONE)
        .with_for_update()
    )
    if lapsed is None:
        return None
    lapsed.status = AssignmentStatus.leased
    lapsed.leased_at = now
    lapsed.expires_at = now + timedelta(minutes=project.lease_minutes)
    session.flush()
    row = session.connection().execute(_TASK_OF_SLOT, {"assignment": lapsed.id}).one()
    return LeasedTask(**row._mapping)


def _lease_new(session: Session, project: LabelingProject, user_id: int, now: datetime) -> LeasedTask | None:
    if _sweep_due(project.id):
        reclaim_expired(session, project.id, now)
    leased = _take_best_slot(session, project, user_id, now)
    if leased is None and reclaim_expired(session, project.id, now):
        leased = _take_best_slot(session, project, user_id, now)
    return leased


def _sweep_due(project_id: int) -> bool:
    clock = time.monotonic()
    if _next_sweep.get(project_id, 0.0) > clock:
        return False
    _next_sweep[project_id] = clock + SWEEP_INTERVAL_S
    return True


def _take_best_slot(
    session: Session, project: LabelingProject, user_id: int, now: datetime
) -> LeasedTask | None:
    until = now + timedelta(minutes=project.lease_minutes)
    connection = session.connection()
    taking = {"project": project.id, "user": user_id, "now": now, "until": until, "mode": project.labeling_mode}
    if connection.dialect.name == "postgresql":
        row = connection.execute(_TAKE_BEST_SLOT_WITH_TASK, taking).first()
    else:
        taken = connection.execute(_TAKE_BEST_SLOT, taking).first()
        row = None if taken is None else connection.execute(_TASK_OF_SLOT, {"assignment": taken.assignment_id}).first()
    return LeasedTask(**row._mapping) if row is not None else None


def lock_assignment(session: Session, assignment_id: int) -> Assignment | None:
    return session.scalar(
        select(Assignment).where(Assignment.id == assignment_id).with_for_update()
    )


def release(assignment: Assignment) -> None:
    assignment.status = AssignmentStatus.waiting
    assignment.expires_at = None


def waiting_count(session: Session, project_id: int, limit: int | None = None) -> int:
    """Waiting slots of a project, counted up to `limit` when one is given."""
    waiting = select(Assignment.id).where(
        Assignment.project_id == project_id,
        Assignment.status == AssignmentStatus.waiting,
    )
    if limit is not None:
        waiting = waiting.limit(limit)
    return session.scalar(select(func.count()).select_from(waiting.subquery())) or 0


def open_to(session: Session, project_id: int, user_id: int, now: datetime, limit: int) -> int:
    """How many solutions the queue would serve the labeler now, counted up to `limit`: those
    with a slot waiting, or leased by someone whose lease ran out (put back when asked for), that
    they may take, and their own check items handed back or run out (served to them again; left
    out, the count would tell a check item from an ordinary task handed back)."""
    slot = aliased(Assignment)
    reclaimable = and_(slot.status == LEASED, slot.expires_at <= bindparam("now"), slot.slot >= 0)
    ordinary = (
        select(slot.solution_id)
        .where(
            slot.project_id == bindparam("project"),
            or_(slot.status == WAITING, reclaimable),
            *_servable_to_user(slot, current_leases_only=True),
        )
        .distinct()
        .limit(limit)
        .subquery()
    )
    check_items = (
        gate.check_slots_held(project_id, user_id, Assignment.id)
        .where(Assignment.expires_at <= now,
               ~exists().where(Label.solution_id == Assignment.solution_id, Label.user_id == user_id))
        .limit(limit)
        .subquery()
    )
    found = session.execute(
        select(select(func.count()).select_from(ordinary).scalar_subquery(),
               select(func.count()).select_from(check_items).scalar_subquery()),
        {"project": project_id, "user": user_id, "now": now},
    ).one()
    return min(limit, found[0] + found[1])


def holds_lease(session: Session, project_id: int, user_id: int, now: datetime) -> bool:
    """Whether the labeler holds a task of the project whose lease has not run out."""
    return bool(session.scalar(select(exists().where(
        Assignment.project_id == project_id,
        Assignment.user_id == user_id,
        Assignment.status == AssignmentStatus.leased,
        Assignment.expires_at > now,
    ))))


def _chunks(items: Iterable[T], size: int) -> Iterable[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
