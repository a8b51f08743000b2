"""Who has read a project's guidelines, in which version. The labeling page acknowledges a
version when its labeler closes the dialog; managers see, per labeler, whether they have read the
guidelines as they stand, an older text, or none, as PRM800K's managers knew who had read their
instructions before labeling."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.errors import Conflict
from app.models import GuidelinesRead, Label, Project, ProjectMember, Role, User, utcnow
from app.projects.guidelines import guidelines_version


@dataclass(frozen=True)
class Reader:
    user_id: int
    username: str
    # "current", "older" (read before the last edit) or "none".
    read: str
    read_at: datetime | None


@dataclass(frozen=True)
class Readers:
    version: str | None
    updated_at: datetime | None
    rows: list[Reader]

    @property
    def current(self) -> int:
        return sum(r.read == "current" for r in self.rows)


def record_read(session: Session, project: Project, user_id: int, version: str) -> GuidelinesRead:
    """Acknowledge that `user_id` read the guidelines in `version`, which must be the current one:
    an acknowledgement of a text the manager has since changed would count an unread edit as read."""
    if not project.guidelines:
        raise Conflict("this project has no guidelines to read")
    if version != guidelines_version(project.guidelines):
        raise Conflict("the guidelines have changed since this version: read them again as they are now")
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    now = utcnow()
    # Two tabs may close the dialog at once: the second acknowledgement overwrites the first.
    session.execute(
        insert(GuidelinesRead)
        .values(project_id=project.id, user_id=user_id, version=version, read_at=now)
        .on_conflict_do_update(index_elements=["project_id", "user_id"], set_={"version": version, "read_at": now})
    )
    read = session.get(GuidelinesRead, (project.id, user_id), populate_existing=True)
    assert read is not None
    return read


def current_read(session: Session, project: Project, user_id: int) -> GuidelinesRead | None:
    """The person's acknowledgement of the guidelines as they stand; None if they have read
    none, or only a text since edited."""
    read = session.get(GuidelinesRead, (project.id, user_id))
    if read is None or not project.guidelines or read.version != guidelines_version(project.guidelines):
        return None
    return read


def readers(session: Session, project: Project) -> Readers:
    """The project's labelers, by name: its members, those who labeled here, and those who read
    a version. Managers and researchers who read them are not labelers to follow up."""
    version = guidelines_version(project.guidelines) if project.guidelines else None
    labeled = select(Label.user_id).where(Label.project_id == project.id, Label.user_id.is_not(None))
    acknowledged = select(GuidelinesRead.user_id).where(GuidelinesRead.project_id == project.id)
    members = select(ProjectMember.user_id).where(ProjectMember.project_id == project.id)
    reads = {
        r.user_id: r for r in session.scalars(select(GuidelinesRead).where(GuidelinesRead.project_id == project.id))
    }
    users = session.execute(
        select(User.id, User.username)
        .where(or_(User.id.in_(labeled), User.id.in_(acknowledged), User.id.in_(members)),
               User.role == Role.labeler)
        .order_by(User.username)
    ).all()
    rows = []
    for user in users:
        read = reads.get(user.id)
        state = "none" if read is None else "current" if read.version == version else "older"
        rows.append(Reader(user.id, user.username, state, read.read_at if read else None))
    return Readers(version, project.guidelines_updated_at, rows)
