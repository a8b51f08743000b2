"""A project's members: the labelers who may label in it when it is not open to all."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import BadInput, Conflict, NotFound
from app.models import Project, ProjectMember, Role, User
from app.projects.access import release_leases_of_outsiders
from app.projects.schemas import MemberRead
from app.users.service import get_user_by_name


def list_members(session: Session, project: Project) -> list[MemberRead]:
    rows = session.execute(
        select(User.id, User.username, User.is_active, ProjectMember.added_at)
        .join(ProjectMember, ProjectMember.user_id == User.id)
        .where(ProjectMember.project_id == project.id)
        .order_by(User.username)
    ).all()
    return [MemberRead(user_id=r.id, username=r.username, is_active=r.is_active, added_at=r.added_at) for r in rows]


def add_member(session: Session, project: Project, username: str, *, by: User | None = None) -> MemberRead:
    user = get_user_by_name(session, username)
    # The messages start with "user", not the name: a page capitalises the first letter.
    if user.role != Role.labeler:
        # Only labelers are kept out of projects; a member list of managers would promise a
        # restriction that does not exist.
        raise BadInput(f"user {user.username} is a {user.role.value}, who sees every project: only labelers are members")
    if session.get(ProjectMember, (project.id, user.id)) is not None:
        raise Conflict(f"user {user.username} is already a member of {project.name}")
    member = ProjectMember(project_id=project.id, user_id=user.id)
    session.add(member)
    session.flush()
    audit.record(session, by, "member.added", audit.user_target(user), project=project.name)
    return MemberRead(user_id=user.id, username=user.username, is_active=user.is_active, added_at=member.added_at)


def remove_member(session: Session, project: Project, user_id: int, *, by: User | None = None) -> None:
    """Take the labeler out; in a project not open to all, their leases go back to the queue
    and their submits are refused from now on."""
    removed = session.execute(
        delete(ProjectMember).where(ProjectMember.project_id == project.id, ProjectMember.user_id == user_id)
    )
    username = session.scalar(select(User.username).where(User.id == user_id))
    if not removed.rowcount:
        raise NotFound(f"user {username or user_id} is not a member of {project.name}")
    audit.record(session, by, "member.removed", f"user {username}", project=project.name)
    release_leases_of_outsiders(session, project, user_id)


def remove_member_by_name(session: Session, project: Project, username: str, *, by: User | None = None) -> None:
    remove_member(session, project, get_user_by_name(session, username).id, by=by)
