"""Who may label in a project: every labeler where the project is open to all, its members
where it is not. Managers, researchers and admins see every project."""

from __future__ import annotations

from sqlalchemy import ColumnElement, bindparam, delete, exists, literal_column, or_, select, true, update
from sqlalchemy.orm import Session

from app.errors import NotFound
from app.models import Assignment, AssignmentStatus, Project, ProjectMember, Role, User

_projects = Project.__table__
_members = ProjectMember.__table__
_users = User.__table__
# Written into the SQL for the reason queue.WAITING is.
_LABELER = literal_column(f"'{Role.labeler.value}'")


def may_label(project_id: ColumnElement[int]) -> ColumnElement[bool]:
    """Whether the user named by the bound parameter "user" may label in the project whose id
    is `project_id`, as SQL: for the hot path's statements, which find it in their own round
    trip."""
    project = _projects.alias("access_project")
    return or_(
        exists().where(project.c.id == project_id, project.c.open_to_all),
        exists().where(_members.c.project_id == project_id, _members.c.user_id == bindparam("user")),
        exists().where(_users.c.id == bindparam("user"), _users.c.role != _LABELER),
    )


def visible_projects(user: User) -> ColumnElement[bool]:
    """A filter on Project: the projects `user` sees."""
    if user.role != Role.labeler:
        return true()
    return Project.open_to_all | exists().where(
        ProjectMember.project_id == Project.id, ProjectMember.user_id == user.id
    )


def user_may_label(session: Session, user: User, project_id: int) -> bool:
    return session.scalar(select(Project.id).where(Project.id == project_id, visible_projects(user))) is not None


def get_visible_project(session: Session, user: User, project_id: int) -> Project:
    """The project, or NotFound, alike for one that does not exist and one `user` may not see:
    a labeler learns nothing of projects they are not in."""
    project = session.scalar(select(Project).where(Project.id == project_id, visible_projects(user)))
    if project is None:
        raise NotFound(f"no project with id {project_id}")
    return project


def release_leases_of_outsiders(session: Session, project: Project, user_id: int | None = None) -> int:
    """Put back in the queue the leases, in `project`, of labelers who may no longer label
    there (of `user_id` alone, if given). The slot forgets its holder, so that a late submit
    is not taken for the lease's own (see service.submit_label)."""
    if project.open_to_all:
        return 0
    outsiders = select(User.id).where(
        User.role == Role.labeler,
        ~exists().where(ProjectMember.project_id == project.id, ProjectMember.user_id == User.id),
    )
    if user_id is not None:
        outsiders = outsiders.where(User.id == user_id)
    leased = (Assignment.project_id == project.id, Assignment.status == AssignmentStatus.leased)
    # A check slot is its labeler's own (see app.quality.gate), theirs by its number even once
    # handed back: it goes rather than waits.
    session.execute(
        delete(Assignment).where(*leased, Assignment.slot < 0, (-Assignment.slot).in_(outsiders)),
        execution_options={"synchronize_session": False},
    )
    result = session.execute(
        update(Assignment).where(*leased, Assignment.user_id.in_(outsiders))
        .values(status=AssignmentStatus.waiting, expires_at=None, user_id=None),
        execution_options={"synchronize_session": False},
    )
    return result.rowcount or 0
