"""User accounts."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.security import hash_password
from app.auth.service import Principal, end_logins
from app.errors import Conflict, NotFound
from app.models import User
from app.users.schemas import UserCreate, UserUpdate


def create_user(session: Session, data: UserCreate) -> User:
    if session.scalar(select(User.id).where(User.username == data.username)) is not None:
        raise Conflict(f"a user named {data.username!r} already exists")
    user = User(username=data.username, role=data.role, password_hash=hash_password(data.password))
    session.add(user)
    session.flush()
    return user


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.username)))


def get_user(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound(f"no user with id {user_id}")
    return user


def get_user_by_name(session: Session, username: str) -> User:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise NotFound(f"no user named {username!r}")
    return user


def update_user(
    session: Session, user: User, data: UserUpdate, *, by: User, keep: Principal | None = None
) -> User:
    """Change a user; deactivation or a new password ends their logins (see end_logins), all
    but `keep`, the caller's own."""
    changes_standing = (data.role is not None and data.role != user.role) or \
        (data.is_active is not None and data.is_active != user.is_active)
    if user.id == by.id and changes_standing:
        # An admin who demotes or deactivates themselves may leave nobody able to undo it.
        raise Conflict("you cannot change your own role or deactivate yourself; ask another admin")
    if data.role is not None:
        user.role = data.role
    if data.is_active is not None:
        user.is_active = data.is_active
    if data.password is not None:
        user.password_hash = hash_password(data.password)
    if data.is_active is False or data.password is not None:
        end_logins(session, user, keep=keep)
    return user
