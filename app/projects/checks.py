"""Settings a project's data cannot meet: a QC rate with no gold to check against, a screening
longer than its items, an overlap larger than the labelers who may label. Each is allowed (gold
and labelers may come later) and said on the overview, where a manager looks after saving."""

from __future__ import annotations

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.models import Label, Problem, Project, ProjectMember, Role, Solution, User


def _gold_items(session: Session, project_id: int, *, screening: bool) -> tuple[int, int]:
    """The gold items served (of problems not retired), and those of retired problems, which
    the queue serves to nobody."""
    where = [Label.project_id == project_id, Label.is_quality_control.is_(True), Label.superseded_at.is_(None)]
    if screening:
        where.append(Label.is_initial_screening.is_(True))
    retired = Problem.retired_at.is_not(None)
    served, unserved = session.execute(
        select(func.count(func.distinct(case((~retired, Label.solution_id)))),
               func.count(func.distinct(case((retired, Label.solution_id)))))
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(*where)
    ).one()
    return served, unserved


def _retired_too(unserved: int) -> str:
    return f" ({unserved} more {'is' if unserved == 1 else 'are'} of retired problems, served to nobody)" if unserved else ""


def _labelers(session: Session, project: Project) -> int:
    """Active labelers who may label in the project (staff may too, but are not its labelers)."""
    query = select(func.count()).select_from(User).where(User.role == Role.labeler, User.is_active.is_(True))
    if not project.open_to_all:
        query = query.where(User.id.in_(select(ProjectMember.user_id).where(ProjectMember.project_id == project.id)))
    return session.scalar(query) or 0


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
    if project.overlap > 1:
        labelers = _labelers(session, project)
        if labelers < project.overlap:
            one = labelers == 1
            if project.open_to_all:
                who = "labeler" if one else "labelers"
            else:
                who = "member who is a labeler" if one else "members who are labelers"
            said.append(f"Overlap is {project.overlap}, but only {labelers} active {who} may label here: no solution "
                        f"can get all its labels until more can.")
    return said
