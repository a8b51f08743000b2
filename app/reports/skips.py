"""Skips as a manager sees them: which labeler passed over which solution (a solution many pass
over is one to look at, as a bad-problem report is), and giving a skipped solution back to the
labeler's queue. Labelers take their own skips back on My stats (app.labeling.service.unskip)."""

from __future__ import annotations

from typing import Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, aliased

from app.audit import service as audit
from app.browse.labelers import check_users, users_named
from app.errors import NotFound
from app.labeling.review import snippet_of
from app.models import Problem, Project, Skip, Solution, User
from app.reports.schemas import SkipPage, SkipRead

PAGE_SIZE = 50
SkipOrder = Literal["newest", "most_skipped"]


def list_skips(session: Session, project_id: int, labeler: str | None = None, order: SkipOrder = "newest",
               page: int = 1) -> SkipPage:
    """The project's skips, newest first or the most skipped solutions first, a page at a time;
    BadInput for a `labeler` that names no user."""
    others = aliased(Skip)
    skipped_by = (
        select(func.count()).where(others.solution_id == Skip.solution_id).correlate(Skip).scalar_subquery()
    )
    query = (
        select(Skip, User.username, Solution.problem_id, Problem.statement, skipped_by.label("skipped_by"))
        .join(User, User.id == Skip.user_id)
        .join(Solution, Solution.id == Skip.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(Skip.project_id == project_id)
    )
    if labeler:
        check_users(session, [labeler])
        query = query.where(users_named([labeler]))
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    newest = (Skip.skipped_at.desc(), Skip.solution_id.desc(), Skip.user_id)
    ordered = query.order_by(*newest) if order == "newest" else query.order_by(skipped_by.desc(), *newest)
    rows = session.execute(ordered.offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)).all()
    return SkipPage(
        total=total,
        page=page,
        pages=max(1, -(-total // PAGE_SIZE)),
        skips=[
            SkipRead(solution_id=skip.solution_id, problem_id=problem_id, problem_snippet=snippet_of(statement),
                     user_id=skip.user_id, labeler=username, skipped_at=skip.skipped_at, skipped_by=count)
            for skip, username, problem_id, statement, count in rows
        ],
    )


def skipping_labelers(session: Session, project_id: int) -> list[str]:
    """The labelers with a skip in the project, for the page's filter."""
    return list(session.scalars(
        select(User.username).join(Skip, Skip.user_id == User.id).where(Skip.project_id == project_id)
        .distinct().order_by(User.username)
    ))


def give_back(session: Session, project: Project, solution_id: int, user_id: int, by: User) -> str:
    """Serve a skipped solution to its labeler again, while it still needs labels; the labeler's
    username. NotFound when that labeler has no such skip here (given back already, say)."""
    skip = session.get(Skip, (user_id, solution_id))
    if skip is None or skip.project_id != project.id:
        raise NotFound(f"no skip of solution {solution_id} by user {user_id} in this project")
    username = session.scalar(select(User.username).where(User.id == user_id)) or f"user {user_id}"
    session.delete(skip)
    audit.record(session, by, "skip.given_back", f"solution {solution_id}", project=project.name, labeler=username)
    return username


def give_back_all(session: Session, project: Project, labeler: str, by: User) -> int:
    """Give back every skip of one labeler in the project (a labeler who skipped what they now
    can label, say); how many. `labeler` names them as the skips filter does. NotFound for a
    labeler who has none here."""
    named = select(User.id).where(users_named([labeler]))
    given = session.execute(delete(Skip).where(Skip.project_id == project.id, Skip.user_id.in_(named))).rowcount
    if not given:
        raise NotFound(f"{labeler} has no skips in this project")
    audit.record(session, by, "skip.given_back", f"user {labeler}", project=project.name, labeler=labeler,
                 count=given)
    return given
