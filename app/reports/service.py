"""Reports: what labelers raise for managers, dismissing them, and retiring a bad problem."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, Select, delete, func, insert, select, update
from sqlalchemy.orm import Session, aliased

from app.audit import service as audit
from app.browse.labelers import check_labeling_here, users_named
from app.errors import NotFound
from app.exports.trajectory import RatedStep, trajectory
from app.labeling.queue import add_slots
from app.labeling.schemas import StepRating
from app.models import (
    Assignment,
    AssignmentStatus,
    FinishReason,
    Label,
    Problem,
    Project,
    Report,
    ReportKind,
    ReportStatus,
    Solution,
    User,
    utcnow,
)
from app.quality.agreement import compared_labels, labels_disagree
from app.quality.gate import gold_of
from app.reports.schemas import (
    GoldReference,
    LabelView,
    OtherLabel,
    ProblemRestoration,
    ProblemRetirement,
    ReportFilters,
    ReportPage,
    ReportRead,
    ViewedStep,
)

_WHOLE_SOLUTION_KINDS = {
    FinishReason.give_up: ReportKind.give_up,
    FinishReason.bad_problem: ReportKind.bad_problem,
}
# What a report copies from its label.
_LABEL_FIELDS = ("id", "project_id", "solution_id", "user_id", "created_at")


def record_reports(
    session: Session,
    label: dict[str, Any],
    problem_id: int,
    ratings: Sequence[StepRating],
) -> None:
    """The reports a new label raises; `label` holds its columns and id, as submit wrote them.

    Nothing is written for a label that raises none, which is nearly every one: submit's hot
    path stays one statement.
    """
    _insert(session, label, problem_id, _raised(label["finish_reason"], ratings))


def carry_reports(
    session: Session, superseded: Label, correction: Label, problem_id: int, ratings: Sequence[StepRating]
) -> None:
    """Make the reports of `superseded` say what `correction`, which replaces it, says.

    A report the correction still raises (the same kind, on the same step) moves to it as it
    stands: a manager's dismissal answered the same matter. One it no longer raises is
    withdrawn: deleted while open, since nobody acted on it and the superseded label still holds
    what was said; one a manager dismissed stays with the superseded label, the record of that
    decision. What the correction raises anew is a new open report. The queue keeps a labeler
    from a problem by their bad-problem reports, so that rule follows the current label too.
    """
    raised = _raised(correction.finish_reason, ratings)
    earlier = session.execute(
        select(Report.id, Report.kind, Report.step).where(Report.label_id == superseded.id)
    ).all()
    kept = [r for r in earlier if (r.kind, r.step) in raised]
    if kept:
        session.execute(
            update(Report).where(Report.id.in_([r.id for r in kept])).values(label_id=correction.id)
        )
    withdrawn = [r.id for r in earlier if (r.kind, r.step) not in raised]
    if withdrawn:
        # The status is checked in the statement: a dismissal that lands first keeps its report.
        session.execute(
            delete(Report).where(Report.id.in_(withdrawn), Report.status == ReportStatus.open)
        )
    columns = {name: getattr(correction, name) for name in _LABEL_FIELDS}
    already = {(r.kind, r.step) for r in kept}
    _insert(session, columns, problem_id, [said for said in raised if said not in already])


def _raised(
    finish_reason: FinishReason | None, ratings: Sequence[StepRating]
) -> list[tuple[ReportKind, int | None]]:
    """(kind, step) of each report a label raises: its give-up or bad problem, then its flags."""
    kind = _WHOLE_SOLUTION_KINDS.get(finish_reason) if finish_reason is not None else None
    whole: list[tuple[ReportKind, int | None]] = [(kind, None)] if kind is not None else []
    return whole + [(ReportKind.flagged_step, i) for i, rating in enumerate(ratings) if rating.flagged]


def _insert(
    session: Session, label: dict[str, Any], problem_id: int, raised: list[tuple[ReportKind, int | None]]
) -> None:
    rows = [
        {
            "project_id": label["project_id"],
            "label_id": label["id"],
            "solution_id": label["solution_id"],
            "problem_id": problem_id,
            "user_id": label["user_id"],
            "kind": kind,
            "step": step,
            "status": ReportStatus.open,
            "created_at": label["created_at"],
        }
        for kind, step in raised
    ]
    if rows:
        session.connection().execute(insert(Report.__table__), rows)


_dismisser = aliased(User, name="dismisser")


def _report_rows() -> Select[Any]:
    return (
        select(
            Report,
            Label.finish_note,
            User.username,
            _dismisser.username.label("dismissed_by"),
            Problem.statement,
            Problem.retired_at,
        )
        .join(Label, Label.id == Report.label_id)
        .join(Problem, Problem.id == Report.problem_id)
        .outerjoin(User, User.id == Report.user_id)
        .outerjoin(_dismisser, _dismisser.id == Report.dismissed_by_id)
    )


def _filtered(statement: Select[Any], project_id: int, filters: ReportFilters) -> Select[Any]:
    statement = statement.where(Report.project_id == project_id)
    if filters.kind is not None:
        statement = statement.where(Report.kind == filters.kind)
    if filters.status is not None:
        statement = statement.where(Report.status == filters.status)
    if filters.labeler is not None:
        statement = statement.where(Report.user_id.in_(select(User.id).where(users_named([filters.labeler]))))
    return statement


def check_labeler(session: Session, project_id: int, filters: ReportFilters) -> None:
    """BadInput when the labeler filter names no one who labeled here: reports come of labels."""
    if filters.labeler is not None:
        check_labeling_here(session, project_id, [filters.labeler])


def _read(row: Row[Any]) -> ReportRead:
    report: Report = row.Report
    return ReportRead(
        id=report.id,
        project_id=report.project_id,
        kind=report.kind,
        status=report.status,
        created_at=report.created_at,
        user_id=report.user_id,
        labeler=row.username,
        label_id=report.label_id,
        solution_id=report.solution_id,
        problem_id=report.problem_id,
        problem_statement=row.statement,
        problem_retired=row.retired_at is not None,
        step=None if report.step is None else report.step + 1,
        # A flag carries no reason of its own; the label's note explains the whole label.
        reason=row.finish_note if report.kind != ReportKind.flagged_step else None,
        dismissed_at=report.dismissed_at,
        dismissed_by=row.dismissed_by,
    )


def list_reports(
    session: Session,
    project_id: int,
    filters: ReportFilters,
    *,
    limit: int | None = None,
    offset: int = 0,
) -> ReportPage:
    """Newest first; every matching report when `limit` is None."""
    total = session.scalar(
        _filtered(select(func.count()).select_from(Report), project_id, filters)
    )
    statement = _filtered(_report_rows(), project_id, filters).order_by(Report.id.desc())
    if limit is not None:
        statement = statement.limit(limit).offset(offset)
    rows = session.execute(statement).all()
    return ReportPage(total=total or 0, reports=[_read(row) for row in rows])


def reporting_labelers(session: Session, project_id: int) -> list[str]:
    """Usernames of the labelers with a report in the project, for the page's filter."""
    return list(
        session.scalars(
            select(User.username)
            .where(User.id.in_(select(Report.user_id).where(Report.project_id == project_id)))
            .order_by(User.username)
        )
    )


def get_report(session: Session, project_id: int, report_id: int) -> ReportRead:
    row = session.execute(
        _report_rows().where(Report.id == report_id, Report.project_id == project_id)
    ).first()
    if row is None:
        raise NotFound(f"no report {report_id} in project {project_id}")
    return _read(row)


def is_dismissed(session: Session, project_id: int, report_id: int) -> bool:
    return session.scalar(
        select(Report.id).where(
            Report.id == report_id, Report.project_id == project_id, Report.status == ReportStatus.dismissed)
    ) is not None


def report_exists(session: Session, project_id: int, report_id: int) -> bool:
    return session.scalar(
        select(Report.id).where(Report.id == report_id, Report.project_id == project_id)
    ) is not None


def dismiss_report(session: Session, project_id: int, report_id: int, user: User) -> ReportRead:
    """Dismiss a report; one already dismissed keeps who dismissed it and when."""
    report = session.scalar(
        select(Report)
        .where(Report.id == report_id, Report.project_id == project_id)
        .with_for_update()
    )
    if report is None:
        raise NotFound(f"no report {report_id} in project {project_id}")
    if report.status != ReportStatus.dismissed:
        report.status = ReportStatus.dismissed
        report.dismissed_at = utcnow()
        report.dismissed_by_id = user.id
        session.flush()
        read = get_report(session, project_id, report_id)
        audit.record(session, user, "report.dismissed", f"report {report.id}",
                     project=session.get_one(Project, project_id).name, labeler=read.labeler,
                     about=_what_was_reported(read))
        return read
    return get_report(session, project_id, report_id)


def open_reports_shown(session: Session, project_id: int, filters: ReportFilters) -> tuple[int, int | None]:
    """How many open reports the filters keep, and the newest one's id: what Dismiss all names,
    and where it stops."""
    count, newest = session.execute(
        _filtered(select(func.count(), func.max(Report.id)).select_from(Report), project_id, filters)
        .where(Report.status == ReportStatus.open)
    ).one()
    return count, newest


def dismiss_reports(session: Session, project: Project, filters: ReportFilters, through: int | None, user: User) -> int:
    """Dismiss every open report the filters keep, up to report `through` (the newest the manager
    saw: one sent while they looked is left open for them to read); how many. One audit event
    names the filters and the count."""
    chosen = _filtered(select(Report.id), project.id, filters).where(Report.status == ReportStatus.open)
    if through is not None:
        chosen = chosen.where(Report.id <= through)
    dismissed = session.execute(
        update(Report)
        .where(Report.id.in_(chosen))
        .values(status=ReportStatus.dismissed, dismissed_at=utcnow(), dismissed_by_id=user.id)
        .execution_options(synchronize_session=False)
    ).rowcount
    if dismissed:
        shown = filters.model_dump(exclude_none=True, mode="json")
        audit.record(session, user, "report.dismissed", f"{dismissed} report{'s' if dismissed != 1 else ''}",
                     project=project.name, count=dismissed, filters=shown, through=through)
    return dismissed


def _what_was_reported(report: ReportRead) -> str:
    match report.kind:
        case ReportKind.give_up:
            return f"give-up on solution {report.solution_id}"
        case ReportKind.bad_problem:
            return f"bad-problem report on problem {report.problem_id}"
    return f"flag on step {report.step} of solution {report.solution_id}"


def is_retired(session: Session, project_id: int, problem_id: int) -> bool | None:
    """Whether the project's problem is retired; None when the project has no such problem."""
    found = session.execute(select(Problem.retired_at).where(
        Problem.id == problem_id, Problem.project_id == project_id)).first()
    return None if found is None else found.retired_at is not None


def bad_problem_reports_settled(session: Session, project_id: int, problem_id: int) -> bool:
    """Whether the problem has bad-problem reports and none of them is open."""
    statuses = set(session.scalars(
        select(Report.status).distinct()
        .where(Report.project_id == project_id, Report.problem_id == problem_id, Report.kind == ReportKind.bad_problem)
    ))
    return statuses == {ReportStatus.dismissed}


def _locked_problem(session: Session, project_id: int, problem_id: int) -> Problem:
    problem = session.scalar(
        select(Problem)
        .where(Problem.id == problem_id, Problem.project_id == project_id)
        .with_for_update()
    )
    if problem is None:
        raise NotFound(f"no problem {problem_id} in project {project_id}")
    return problem


def retire_problem(session: Session, project_id: int, problem_id: int, by: User) -> ProblemRetirement:
    """Take a problem out of labeling: its waiting slots leave the queue and the queue serves
    none of its solutions again (see queue._take_best_slot_statement); labels it has stay.

    Retiring answers the problem's open bad-problem reports, so they are dismissed in `by`'s
    name rather than left for the manager to dismiss one by one; give-ups and flagged steps
    speak of a solution or a step, and stay open. Leases in hand are left alone, so that a
    labeler at work on one can still submit. Calling it again keeps the first retirement's time
    and dismisses what was raised since.
    """
    problem = _locked_problem(session, project_id, problem_id)
    newly = problem.retired_at is None
    if newly:
        problem.retired_at = utcnow()
    dismissed = session.execute(
        update(Report)
        .where(
            Report.problem_id == problem.id,
            Report.kind == ReportKind.bad_problem,
            Report.status == ReportStatus.open,
        )
        .values(status=ReportStatus.dismissed, dismissed_at=utcnow(), dismissed_by_id=by.id)
        .execution_options(synchronize_session=False, preserve_rowcount=True)
    ).rowcount
    removed = session.execute(
        delete(Assignment)
        .where(
            Assignment.solution_id.in_(select(Solution.id).where(Solution.problem_id == problem.id)),
            Assignment.status == AssignmentStatus.waiting,
        )
        .execution_options(synchronize_session=False, preserve_rowcount=True)
    ).rowcount
    session.flush()
    retirement = ProblemRetirement(
        problem_id=problem.id, retired_at=problem.retired_at, slots_removed=removed or 0,
        reports_dismissed=dismissed or 0,
    )
    # Called again, it is recorded only where it changed something (reports raised since).
    if newly or retirement.reports_dismissed or retirement.slots_removed:
        audit.record(session, by, "problem.retired", f"problem {problem.id}",
                     project=session.get_one(Project, project_id).name, slots_removed=retirement.slots_removed,
                     reports_dismissed=retirement.reports_dismissed)
    return retirement


def restore_problem(session: Session, project_id: int, problem_id: int, by: User | None = None) -> ProblemRestoration:
    """Undo a retirement: the problem is served again, and each of its solutions gets back the
    queue slots it lacks to reach the project's overlap (every solution of a project is queued,
    as an import or a round's generation queues it). A problem that is not retired is left as it
    is. `by` is the manager, None at the command line."""
    problem = _locked_problem(session, project_id, problem_id)
    if problem.retired_at is None:
        return ProblemRestoration(problem_id=problem.id, slots_added=0)
    problem.retired_at = None
    solutions = session.execute(
        select(Solution.id, Solution.priority, Solution.generation).where(Solution.problem_id == problem.id)
    ).all()
    project = session.get_one(Project, project_id)
    added = add_slots(session, project, [tuple(s) for s in solutions])
    audit.record(session, by, "problem.restored", f"problem {problem.id}", project=project.name, slots_added=added)
    session.flush()
    return ProblemRestoration(problem_id=problem.id, slots_added=added)


def label_view(session: Session, project_id: int, label_id: int) -> LabelView:
    row = session.execute(
        select(Label, Solution.steps, Problem, User.username)
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .outerjoin(User, User.id == Label.user_id)
        .where(Label.id == label_id, Label.project_id == project_id)
    ).first()
    if row is None:
        raise NotFound(f"no label {label_id} in project {project_id}")
    label: Label = row.Label
    problem: Problem = row.Problem
    reports = session.execute(_report_rows().where(Report.label_id == label.id).order_by(Report.id)).all()
    others, compared_instead = _other_labels(session, label, row.steps)
    return LabelView(
        label_id=label.id,
        project_id=label.project_id,
        labeler=row.username or label.foreign_labeler,
        created_at=label.created_at,
        finish_reason=label.finish_reason,
        finish_note=label.finish_note,
        total_time_ms=label.total_time_ms,
        source=label.source,
        is_quality_control=label.is_quality_control,
        is_initial_screening=label.is_initial_screening,
        superseded=label.superseded_at is not None,
        corrected_by=session.scalar(select(Label.id).where(Label.supersedes_id == label.id))
        if label.superseded_at is not None else None,
        corrects=label.supersedes_id,
        other_gold=[other.label_id for other in others if other.is_quality_control],
        gold=_gold_reference(session, label),
        other_labels=others,
        compared_instead=compared_instead,
        problem_id=problem.id,
        statement=problem.statement,
        answer=problem.answer,
        problem_retired_at=problem.retired_at,
        solution_id=label.solution_id,
        steps=_viewed_steps(row.steps, label.steps),
        reports=[_read(r) for r in reports],
    )


def _gold_reference(session: Session, label: Label) -> GoldReference | None:
    gold = gold_of(session, label.project_id, [label.solution_id]).get(label.solution_id)
    if gold is None:
        return None
    step = None if gold.first_error is None else gold.first_error + 1
    return GoldReference(label_id=gold.label_id, first_error_step=step, votes=gold.votes,
                         golds=gold.golds, tied=gold.tied)


def _other_labels(session: Session, label: Label, solution_steps: list[str]) -> tuple[list[OtherLabel], int | None]:
    """The solution's other current labels, each marked as agreeing with this one or not the
    way the Labels tab's Disagree filter marks them; and, where this label is a labeler's earlier
    one of the solution, their later label that is compared instead."""
    compared = {c.label_id: c for c in compared_labels(session, label.project_id, [label.solution_id])
                .get(label.solution_id, [])}
    instead = {earlier: c.label_id for c in compared.values() for earlier in c.replaces}
    mine = compared.get(label.id)
    rows = session.execute(
        select(Label.id, User.username, Label.foreign_labeler, Label.source, Label.finish_reason,
               Label.is_quality_control, Label.steps)
        .outerjoin(User, User.id == Label.user_id)
        .where(Label.solution_id == label.solution_id, Label.id != label.id, Label.superseded_at.is_(None))
        .order_by(Label.id)
    ).all()
    return [
        OtherLabel(
            label_id=row.id, labeler=row.username or row.foreign_labeler, source=row.source,
            finish_reason=row.finish_reason, is_quality_control=row.is_quality_control,
            disagrees=None if mine is None or row.id not in compared else labels_disagree(mine, compared[row.id]),
            compared_instead=instead.get(row.id),
            step_ratings=_own_step_ratings(solution_steps, row.steps),
        )
        for row in rows
    ], instead.get(label.id)


def _own_prefix(path: list[RatedStep], solution_steps: list[str]) -> int:
    """How many of the path's first steps are the solution's own: it leaves them at a phase-1
    label's other alternative or own step."""
    return next((i for i, (step, text) in enumerate(zip(path, solution_steps)) if step.human or step.text != text),
                min(len(path), len(solution_steps)))


def _own_step_ratings(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[int | None]:
    path = trajectory(solution_steps, label_steps)
    return [step.rating for step in path[:_own_prefix(path, solution_steps)]]


def _viewed_steps(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[ViewedStep]:
    """The steps the labeler went through, each with its rating (in phase 1 the chosen
    alternative or their own step), then, where that path is the solution's own, the solution's
    steps after it, unrated."""
    path = trajectory(solution_steps, label_steps)
    own = _own_prefix(path, solution_steps)
    viewed = [ViewedStep(text=s.text, rating=s.rating, flagged=bool(s.flagged), human=s.human, solution_step=i < own)
              for i, s in enumerate(path)]
    if own == len(path):
        viewed += [ViewedStep(text=text, rating=None, flagged=False) for text in solution_steps[len(path):]]
    return viewed

