"""Screening and quality-control checks in the labeling queue.

A gold item is a solution with a current quality-control label about its steps (see
app.quality.service); a screening item is one whose gold is also marked as an initial screening
question. A project that asks for screening serves a labeler its screening items first, and
holds back one who agrees with too few of them; one with a QC rate mixes gold items the labeler
has not labeled into their queue, and may pause a labeler whose QC accuracy falls too low. A
manager's decision (admit or retire) overrides both.

A check task is an ordinary slot of the gold solution, numbered -user_id: its id, shape and
lease are those of any task, and the unique (solution_id, slot) makes serving one item twice to
one labeler impossible. Check slots never go back to the waiting queue: handed back, or run
out, they stay the labeler's and are served to them again, as an ordinary slot a labeler lets go
comes back to them when nobody else takes it and the QC draw serves no check item first.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, or_, select, update
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import NotFound
from app.models import (
    Assignment,
    AssignmentStatus,
    Label,
    LabelerStanding,
    LabelingMode,
    Problem,
    Project,
    Role,
    Skip,
    Solution,
    StandingDecision,
    User,
    utcnow,
)
from app.quality.service import NOT_ABOUT_STEPS, first_error, graded, taken_step

# QC accuracy says nothing over fewer items than this; no one is paused before.
PAUSE_MIN_ITEMS = 5

RETIRED = "A manager has retired you from this project: it has no more tasks for you."
SCREENING_FAILED = (
    "Your screening answers did not agree with the reference often enough. A manager will "
    "review them; until then this project has no tasks for you."
)
PAUSED = (
    "Your labels on check items have disagreed with the reference too often, so your work here "
    "is paused until a manager reviews it."
)


@dataclass(frozen=True, slots=True)
class Checks:
    """What the queue needs of a project's screening and QC settings."""

    screening_items: int
    screening_pass_mark: float
    qc_rate: float
    qc_pause_below: float

    @property
    def enabled(self) -> bool:
        return bool(self.screening_items or self.qc_rate or self.qc_pause_below)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Serve this gold solution, serve again the labeler's check slot whose lease ran out, hold
    the labeler back with this reason, or none of these (a regular task)."""

    solution_id: int | None = None
    resumed: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Mark:
    """A labeler's label on a gold item, graded."""

    solution_id: int
    screening: bool
    about_steps: bool
    agreed: bool
    created_at: datetime


def _about_steps(label: Any) -> Any:
    return or_(label.finish_reason.is_(None), label.finish_reason.not_in(NOT_ABOUT_STEPS))


def gold_labels(project_id: int) -> Any:
    """The project's current gold labels about the steps: what makes a solution a gold item."""
    return select(Label.solution_id, Label.steps, Label.is_initial_screening, Label.id).where(
        Label.project_id == project_id,
        Label.is_quality_control.is_(True),
        Label.superseded_at.is_(None),
        _about_steps(Label),
    )


@dataclass(frozen=True, slots=True)
class Gold:
    first_error: int | None
    steps: list[dict[str, Any]]
    screening: bool
    # The gold label whose verdict is the reference, how many of the solution's gold labels give
    # it, and whether another verdict has as many: where they differ, a manager sees which one
    # counts, and why.
    label_id: int
    votes: int
    golds: int
    tied: bool


def gold_of(session: Session, project_id: int, solution_ids: Any) -> dict[int, Gold]:
    """The gold of each of `solution_ids` (a list or a subquery) that is a gold item: the
    majority first error of its QC labels, ties to the earliest, as app.quality.service
    measures accuracy."""
    rows = session.execute(
        gold_labels(project_id).where(Label.solution_id.in_(solution_ids)).order_by(Label.id)
    ).all()
    by_solution: dict[int, list[Any]] = {}
    for row in rows:
        by_solution.setdefault(row.solution_id, []).append(row)
    golds = {}
    for solution_id, labels in by_solution.items():
        verdicts = [first_error(label.steps) for label in labels]
        # most_common keeps first-met order among equal counts: a tie goes to the earliest label.
        (majority, votes), *others = Counter(verdicts).most_common()
        chosen = labels[verdicts.index(majority)]
        golds[solution_id] = Gold(majority, chosen.steps, any(l.is_initial_screening for l in labels),
                                  chosen.id, votes, len(verdicts), bool(others) and others[0][1] == votes)
    return golds


def marks(session: Session, project_id: int, user_id: int) -> list[Mark]:
    """The labeler's labels on the project's gold items, as graded (see service.graded), oldest
    first."""
    gold_solutions = gold_labels(project_id).with_only_columns(Label.solution_id)
    # An item whose gold is the labeler's own (their correction, taken as gold) does not
    # measure them: it would count their own change of mind as a miss.
    own_gold = gold_solutions.where(Label.user_id == user_id)
    mine = session.execute(
        select(Label.solution_id, Label.steps, Label.finish_reason, Label.created_at, Label.is_initial_screening)
        .where(
            Label.project_id == project_id,
            Label.user_id == user_id,
            Label.is_quality_control.is_(False),
            graded(),
            Label.solution_id.in_(gold_solutions),
            Label.solution_id.not_in(own_gold),
        )
        .order_by(Label.id)
    ).all()
    golds = gold_of(session, project_id, [row.solution_id for row in mine])
    return [
        Mark(
            solution_id=row.solution_id,
            # Served as a screening item: a screening item met as an ordinary task (screening
            # turned on later, or the item made gold since) is a check like any gold item.
            screening=row.is_initial_screening,
            about_steps=row.finish_reason not in NOT_ABOUT_STEPS,
            agreed=row.finish_reason not in NOT_ABOUT_STEPS
            and first_error(row.steps) == golds[row.solution_id].first_error,
            created_at=row.created_at,
        )
        for row in mine
        if row.solution_id in golds
    ]


def screening_score(screened: Sequence[Mark]) -> float:
    """Agreement on screening items; a give-up counts as a miss, or skipping would pass."""
    return sum(m.agreed for m in screened) / len(screened)


def _paused(checked: Sequence[Mark], pause_below: float) -> bool:
    return bool(pause_below and len(checked) >= PAUSE_MIN_ITEMS
                and sum(m.agreed for m in checked) / len(checked) < pause_below)


def qc_marks(found: Sequence[Mark], since: datetime | None) -> list[Mark]:
    return [m for m in found if not m.screening and m.about_steps and (since is None or m.created_at > since)]


def decide(session: Session, project_id: int, checks: Checks, user_id: int, now: datetime) -> Verdict:
    """What next-task does for this labeler, not retired, in a project with checks enabled: hold them back,
    or else a screening item (the one they hold first), or else, at the QC rate, a new QC item,
    or else their QC item whose lease ran out or that they handed back, or else nothing of its
    own (a regular task). The QC draw comes before the item handed back as it comes before the
    ordinary slot a labeler hands back: served again at once and always, a check item told itself
    from an ordinary task by "hand back, ask again"."""
    standing = session.get(LabelerStanding, (project_id, user_id))
    admitted_at = standing.decided_at if standing is not None else None
    found = marks(session, project_id, user_id)
    screening = Screening()
    if checks.screening_items and admitted_at is None:
        screening = _screening(session, project_id, user_id, checks, [m for m in found if m.screening])
        if screening.failed:
            return Verdict(reason=SCREENING_FAILED)
    if _paused(qc_marks(found, admitted_at), checks.qc_pause_below):
        return Verdict(reason=PAUSED)
    resumed = _expired_check_slot(session, project_id, user_id, now)
    if screening.next_item is not None:
        # A newcomer's: the screening item they hold, or the next one.
        return Verdict(resumed=resumed) if resumed is not None else Verdict(solution_id=screening.next_item)
    if checks.qc_rate and random.random() < checks.qc_rate:
        item = _unlabeled_gold(session, project_id, user_id, screening=False)
        if item is not None:
            return Verdict(solution_id=item)
    return Verdict(resumed=resumed)


def _expired_check_slot(session: Session, project_id: int, user_id: int, now: datetime) -> int | None:
    """The labeler's check slot whose lease ran out, to serve again: no one else may take it, so
    their late submit, or the page reloaded, finds the item, as an ordinary lease that nobody
    took is found. Locked, so that their other tab's late submit or hand-back, done meanwhile,
    is seen. One of a problem retired since stays as it is, served to nobody, and its late
    submit is still taken, as an ordinary lease's is (app.labeling.queue.reclaim_expired).

    One whose solution the labeler has labeled since (handed back, its slot names no holder, and
    the queue may have served them an ordinary slot of the solution) goes: a second label of
    theirs on one solution would be one too many, and being served a solution already labeled
    would give the check item away."""
    labeled = exists().where(Label.solution_id == Assignment.solution_id, Label.user_id == user_id)
    while True:
        row = session.execute(
            check_slots_held(project_id, user_id, Assignment.id)
            .add_columns(labeled.label("labeled"))
            .where(Assignment.expires_at <= now)
            .order_by(Assignment.id)
            .limit(1)
            .with_for_update(of=Assignment)
        ).first()
        if row is None or not row.labeled:
            return None if row is None else row.id
        session.execute(delete(Assignment).where(Assignment.id == row.id))


def check_slots_held(project_id: int, user_id: int, column: Any) -> Any:
    """`column` of the labeler's leased check slots (their leases may have run out, or been
    handed back: the slot's number, not its holder, says whose it is) of problems not retired."""
    return (
        select(column)
        .join(Solution, Solution.id == Assignment.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(
            Assignment.project_id == project_id,
            Assignment.slot == -user_id,
            Assignment.status == AssignmentStatus.leased,
            Problem.retired_at.is_(None),
        )
    )


@dataclass(frozen=True, slots=True)
class Screening:
    """Where a labeler stands with screening: the screening item to serve them (or that they
    hold), if any, and whether they failed."""

    next_item: int | None = None
    failed: bool = False


def _screening(session: Session, project_id: int, user_id: int, checks: Checks, screened: list[Mark]) -> Screening:
    """Screening is for newcomers: a labeler with a label here that was no screening answer
    (work from before screening was asked of them, or after they passed it) is not screened. A
    newcomer is served screening items until they answered as many as asked (or none is left),
    and fails below the pass mark; one they hold is still to be answered."""
    if _has_regular_label(session, project_id, user_id):
        return Screening()
    held = _held_screening_item(session, project_id, user_id)
    if held is not None:
        return Screening(next_item=held)
    if len(screened) < checks.screening_items:
        item = _unlabeled_gold(session, project_id, user_id, screening=True)
        if item is not None:
            return Screening(next_item=item)
    failed = bool(screened) and screening_score(screened) < checks.screening_pass_mark
    return Screening(failed=failed)


def _has_regular_label(session: Session, project_id: int, user_id: int) -> bool:
    """Whether the labeler has a label here that was no screening answer."""
    return session.scalar(
        select(
            exists().where(
                Label.project_id == project_id,
                Label.user_id == user_id,
                Label.is_initial_screening.is_(False),
            )
        )
    )


def _held_screening_item(session: Session, project_id: int, user_id: int) -> int | None:
    """The screening item the labeler holds as a check slot (its lease may have run out: it is
    served to them again), of a problem not retired."""
    screening_gold = gold_labels(project_id).with_only_columns(Label.solution_id).where(
        Label.is_initial_screening.is_(True))
    return session.scalar(
        check_slots_held(project_id, user_id, Assignment.solution_id)
        .where(Assignment.solution_id.in_(screening_gold))
        .limit(1)
    )


def _unlabeled_gold(session: Session, project_id: int, user_id: int, *, screening: bool) -> int | None:
    """A gold item of the kind asked for that the labeler has neither labeled, held nor skipped,
    of a problem not retired: screening items in a fixed order, QC items at random. The labeler's own
    bad-problem reports hold no gold back, or reporting would be a way out of the checks."""
    gold = gold_labels(project_id).subquery()
    screening_gold = select(gold.c.solution_id).where(gold.c.is_initial_screening.is_(True))
    kind = gold.c.solution_id.in_(screening_gold)
    statement = (
        select(gold.c.solution_id)
        .join(Solution, Solution.id == gold.c.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(
            kind if screening else ~kind,
            Problem.retired_at.is_(None),
            ~exists().where(Label.solution_id == gold.c.solution_id, Label.user_id == user_id),
            ~exists().where(
                Assignment.solution_id == gold.c.solution_id,
                Assignment.user_id == user_id,
                Assignment.status == AssignmentStatus.leased,
            ),
            ~exists().where(Assignment.solution_id == gold.c.solution_id, Assignment.slot == -user_id),
            ~exists().where(Skip.user_id == user_id, Skip.solution_id == gold.c.solution_id),
        )
        .group_by(gold.c.solution_id)
        .order_by(gold.c.solution_id if screening else func.random())
        .limit(1)
    )
    return session.scalar(statement)


def new_check_slot(session: Session, project_id: int, user_id: int, solution_id: int, now: datetime,
                   until: datetime, labeling_mode: LabelingMode) -> int:
    """Lease the labeler a slot of their own on a gold solution."""
    solution = session.execute(
        select(Solution.priority, Solution.generation).where(Solution.id == solution_id)
    ).one()
    slot = Assignment(
        project_id=project_id,
        solution_id=solution_id,
        slot=-user_id,
        priority=solution.priority,
        generation=solution.generation,
        status=AssignmentStatus.leased,
        user_id=user_id,
        leased_at=now,
        expires_at=until,
        labeling_mode=labeling_mode,
    )
    session.add(slot)
    session.flush()
    return slot.id


def is_screening_item(session: Session, project_id: int, solution_id: int) -> bool:
    gold = gold_of(session, project_id, [solution_id])
    return solution_id in gold and gold[solution_id].screening


def gold_ratings(session: Session, project_id: int, solution_id: int) -> list[int | None] | None:
    """The gold's rating of each step it rated, for feedback after a submit; none for a
    screening item, whose answers, shown, would reach the newcomers it screens."""
    gold = gold_of(session, project_id, [solution_id]).get(solution_id)
    if gold is None or gold.screening:
        return None
    return [taken_step(step).get("rating") for step in gold.steps]


# ---- the manager's view and decisions ---------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    user_id: int
    username: str
    screening_done: int
    screening_agreed: int
    qc_compared: int
    qc_agreed: int
    decision: StandingDecision | None
    status: str


def standings(session: Session, project: Project) -> list[Standing]:
    """Every labeler with a label on a gold item or a decision in the project, by name in any case
    (as the users list sorts them)."""
    gold_solutions = gold_labels(project.id).with_only_columns(Label.solution_id)
    labelers = select(Label.user_id).where(
        Label.project_id == project.id,
        Label.user_id.is_not(None),
        Label.is_quality_control.is_(False),
        Label.solution_id.in_(gold_solutions),
    )
    decided = select(LabelerStanding.user_id).where(LabelerStanding.project_id == project.id)
    users = session.execute(
        select(User.id, User.username)
        .where(or_(User.id.in_(labelers), User.id.in_(decided)))
        .order_by(func.lower(User.username), User.username)
    ).all()
    decisions = {
        s.user_id: s for s in session.scalars(select(LabelerStanding).where(LabelerStanding.project_id == project.id))
    }
    return [_standing(session, project, user.id, user.username, decisions.get(user.id)) for user in users]


# What holds a labeler back, by their standing's status.
HELD_BACK = {StandingDecision.retired.value: RETIRED, "failed screening": SCREENING_FAILED, "paused": PAUSED}


def standing_of(session: Session, project: Project, user: User) -> Standing:
    """One labeler's standing in the project, as next-task would find it, serving nothing."""
    return _standing(session, project, user.id, user.username, session.get(LabelerStanding, (project.id, user.id)))


def _standing(
    session: Session, project: Project, user_id: int, username: str, decision: LabelerStanding | None
) -> Standing:
    found = marks(session, project.id, user_id)
    screened = [m for m in found if m.screening]
    admitted_at = decision.decided_at if decision is not None else None
    checked = qc_marks(found, admitted_at)
    qc_agreed = sum(m.agreed for m in checked)
    checks = Checks(project.screening_items, project.screening_pass_mark, project.qc_rate, project.qc_pause_below)
    screening = (_screening(session, project.id, user_id, checks, screened)
                 if checks.screening_items and decision is None else Screening())
    # As next-task decides (see decide): a decision first, then screening, then the QC pause.
    if decision is not None and decision.decision == StandingDecision.retired:
        status = decision.decision.value
    elif screening.next_item is not None:
        status = "screening"
    elif screening.failed:
        status = "failed screening"
    elif _paused(checked, project.qc_pause_below):
        status = "paused"
    elif decision is not None:
        status = decision.decision.value
    elif screened and project.screening_items and screening_score(screened) >= project.screening_pass_mark:
        status = "passed screening"
    else:
        status = "labeling"
    return Standing(
        user_id=user_id,
        username=username,
        screening_done=len(screened),
        screening_agreed=sum(m.agreed for m in screened),
        qc_compared=len(checked),
        qc_agreed=qc_agreed,
        decision=decision.decision if decision is not None else None,
        status=status,
    )


def release_leases_of(session: Session, user_id: int, project_id: int | None = None) -> int:
    """Put back in the queue the leases the user holds (in `project_id`, or in every project),
    for someone who may label there no more: the slot forgets its holder, so that no late submit
    of theirs is taken, and their check slots, theirs by number even once handed back, go. How
    many were handed back."""
    leased = [Assignment.status == AssignmentStatus.leased]
    if project_id is not None:
        leased.append(Assignment.project_id == project_id)
    checks = session.execute(delete(Assignment).where(*leased, Assignment.slot == -user_id)
                             .execution_options(synchronize_session=False, preserve_rowcount=True))
    others = session.execute(
        update(Assignment).where(*leased, Assignment.user_id == user_id)
        .values(status=AssignmentStatus.waiting, expires_at=None, user_id=None)
        .execution_options(synchronize_session=False, preserve_rowcount=True)
    )
    return (checks.rowcount or 0) + (others.rowcount or 0)


def decide_about(
    session: Session, project: Project, user_id: int, decision: StandingDecision, manager_id: int
) -> Standing:
    """Admit or retire a labeler; retiring hands their leases in the project back."""
    user = session.scalar(select(User).where(User.id == user_id, User.role == Role.labeler))
    if user is None:
        raise NotFound(f"no labeler with id {user_id}")
    standing = session.get(LabelerStanding, (project.id, user_id))
    if standing is None:
        standing = LabelerStanding(project_id=project.id, user_id=user_id)
        session.add(standing)
    standing.decision = decision
    standing.decided_by = manager_id
    standing.decided_at = utcnow()
    handed_back = release_leases_of(session, user_id, project.id) if decision == StandingDecision.retired else 0
    audit.record(session, session.get(User, manager_id), f"labeler.{decision.value}", audit.user_target(user),
                 project=project.name, leases=handed_back)
    session.flush()
    return _standing(session, project, user_id, user.username, standing)

