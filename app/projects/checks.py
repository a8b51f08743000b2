"""Settings a project's data cannot meet: a QC rate with no gold to check against, a screening
longer than its items, an overlap larger than the labelers who may label, solutions that no
labeler who may label will be served. Each is allowed (gold and labelers may come later) and
said on the overview, where a manager looks after saving."""

from __future__ import annotations

from sqlalchemy import Select, case, exists, func, or_, select, union
from sqlalchemy.orm import Session, aliased

from app.models import (
    Assignment,
    AssignmentStatus,
    Label,
    LabelerStanding,
    Problem,
    Project,
    ProjectMember,
    Report,
    ReportKind,
    Role,
    Skip,
    Solution,
    StandingDecision,
    User,
)
from app.quality.gate import gold_labels


def _gold_items(session: Session, project_id: int, *, screening: bool) -> tuple[int, int]:
    """The gold items served (of problems not retired), and those of retired problems, which
    the queue serves to nobody. A gold label that gave up or reported a bad problem says nothing
    about the steps and makes no item (app.quality.gate)."""
    query = gold_labels(project_id)
    if screening:
        query = query.where(Label.is_initial_screening.is_(True))
    gold = query.subquery("gold")
    retired = Problem.retired_at.is_not(None)
    served, unserved = session.execute(
        select(func.count(func.distinct(case((~retired, gold.c.solution_id)))),
               func.count(func.distinct(case((retired, gold.c.solution_id)))))
        .join_from(gold, Solution, Solution.id == gold.c.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
    ).one()
    return served, unserved


def _retired_too(unserved: int) -> str:
    return f" ({unserved} more {'is' if unserved == 1 else 'are'} of retired problems, served to nobody)" if unserved else ""


def _labelers(project: Project) -> Select[tuple[int]]:
    """Active labelers who may label in the project and are not retired from it (staff may
    label too, but are not its labelers)."""
    retired = exists().where(LabelerStanding.project_id == project.id, LabelerStanding.user_id == User.id,
                             LabelerStanding.decision == StandingDecision.retired)
    query = select(User.id).where(User.role == Role.labeler, User.is_active.is_(True), ~retired)
    if not project.open_to_all:
        query = query.where(User.id.in_(select(ProjectMember.user_id).where(ProjectMember.project_id == project.id)))
    return query


# Solutions the overview names of those it counts as waiting for no one.
NAMED = 5


def _unfillable(session: Session, project: Project, labelers: Select[tuple[int]], how_many: int) -> tuple[int, list[int]]:
    """Solutions whose waiting slot no labeler who may label here will be served: each has
    labeled the solution, skipped it, or reported its problem as bad while that label stands, and
    the queue serves none of those (app.labeling.queue). A small team meets it after one skip or
    bad-problem report.

    Only solutions skipped or of reported problems are looked at: one that still waits has fewer
    labels than the overlap, so without either it is stuck only where the labelers are fewer than
    the overlap, which the overlap's own notice says. Counting every label of a 100,000-solution
    project took 0.16 s of each overview."""
    reporting = aliased(Label)
    reported = (
        select(Report.problem_id)
        .join(reporting, reporting.id == Report.label_id)
        .where(Report.project_id == project.id, Report.kind == ReportKind.bad_problem,
               reporting.superseded_at.is_(None), Report.user_id.in_(labelers))
    )
    skipped = select(Skip.solution_id).where(Skip.project_id == project.id, Skip.user_id.in_(labelers))
    waiting = (
        select(Assignment.solution_id)
        .join(Solution, Solution.id == Assignment.solution_id)
        .where(Assignment.project_id == project.id, Assignment.status == AssignmentStatus.waiting,
               Assignment.slot >= 0, or_(Solution.problem_id.in_(reported), Solution.id.in_(skipped)))
    )
    passed_over = union(
        select(Label.solution_id.label("solution_id"), Label.user_id.label("user_id"))
        .where(Label.project_id == project.id, Label.user_id.in_(labelers), Label.solution_id.in_(waiting)),
        select(Solution.id, Report.user_id)
        .join(Report, Report.problem_id == Solution.problem_id)
        .join(reporting, reporting.id == Report.label_id)
        .where(Solution.id.in_(waiting), Report.kind == ReportKind.bad_problem, reporting.superseded_at.is_(None),
               Report.user_id.in_(labelers)),
        select(Skip.solution_id, Skip.user_id).where(Skip.solution_id.in_(waiting), Skip.user_id.in_(labelers)),
    ).subquery()
    # The window counts the groups HAVING kept, so one query gives both the total and the first few.
    stuck = session.execute(
        select(passed_over.c.solution_id, func.count().over())
        .group_by(passed_over.c.solution_id)
        .having(func.count(func.distinct(passed_over.c.user_id)) >= how_many)
        .order_by(passed_over.c.solution_id)
        .limit(NAMED)
    ).all()
    return (stuck[0][1] if stuck else 0), [solution_id for solution_id, _ in stuck]


def unmet_settings(session: Session, project: Project) -> list[str]:
    said = []
    if project.qc_rate or project.qc_pause_below:
        items, unserved = _gold_items(session, project.id, screening=False)
        if not items:
            said.append(f"Quality control is on, but the project has no gold items{_retired_too(unserved)}: no check "
                        "item can be served, and no labeler is measured, until a label is used as gold (Use as gold "
                        "on a label's page) or labels come with is_quality_control_question.")
    if project.screening_items:
        items, unserved = _gold_items(session, project.id, screening=True)
        if items < project.screening_items:
            said.append(f"Screening asks for {project.screening_items} item{'s' if project.screening_items != 1 else ''}, "
                        f"but the project has {items}{_retired_too(unserved)}: new labelers are screened on "
                        f"{'those' if items != 1 else 'that one'} alone{' (none: screening is passed over)' if not items else ''}. "
                        f"Mark more gold labels as screening items (Use as gold, Also a screening item).")
    labelers = _labelers(project)
    how_many = session.scalar(select(func.count()).select_from(labelers.subquery())) or 0
    if project.overlap > 1 and how_many < project.overlap:
        one = how_many == 1
        if project.open_to_all:
            who = "labeler" if one else "labelers"
        else:
            who = "member who is a labeler" if one else "members who are labelers"
        said.append(f"Overlap is {project.overlap}, but only {how_many} active {who} may label here: no solution "
                    f"can get all its labels until more can.")
    elif how_many:
        stuck, named = _unfillable(session, project, labelers, how_many)
        if stuck:
            it, its = ("it", "its") if stuck == 1 else ("each", "its")
            which = ", ".join(f"#{solution}" for solution in named) + (f" and {stuck - len(named)} more" if stuck > len(named) else "")
            said.append(f"{stuck} solution{'s' if stuck != 1 else ''} ({which}) {'wait' if stuck != 1 else 'waits'} for a label that the queue will serve "
                        f"to no one: every labeler who may label here has labeled {it}, skipped {it} or reported {its} "
                        f"problem as bad. Retire the problem (Reports, Retire problem), give skipped solutions back "
                        f"(Skipped), let more labelers in (or admit one you retired), or lower the overlap.")
    return said
