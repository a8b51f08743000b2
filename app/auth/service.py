"""Logins, browser sessions and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import bindparam, delete, select
from sqlalchemy.orm import Session

from app.auth.security import new_token, token_digest, verify_password
from app.models import ApiToken, AuthSession, User, utcnow


@dataclass(frozen=True)
class BrowserLogin:
    cookie_token: str
    csrf_token: str


@dataclass(frozen=True)
class Principal:
    """Who is calling, and through what: `session` is set for cookie logins, which need CSRF."""

    user: User
    session: AuthSession | None


def authenticate(session: Session, username: str, password: str) -> User | None:
    user = session.scalar(select(User).where(User.username == username))
    ok = verify_password(user.password_hash if user else None, password)
    if user is None or not ok or not user.is_active:
        return None
    return user


def start_browser_session(session: Session, user: User, hours: int) -> BrowserLogin:
    cookie_token, csrf_token = new_token(), new_token()
    now = utcnow()
    session.add(
        AuthSession(
            user_id=user.id,
            token_hash=token_digest(cookie_token),
            csrf_token=csrf_token,
            created_at=now,
            expires_at=now + timedelta(hours=hours),
        )
    )
    # Expired sessions are swept at login time, which needs no scheduler.
    session.execute(delete(AuthSession).where(AuthSession.expires_at < now))
    return BrowserLogin(cookie_token=cookie_token, csrf_token=csrf_token)


def end_browser_session(session: Session, cookie_token: str) -> None:
    session.execute(delete(AuthSession).where(AuthSession.token_hash == token_digest(cookie_token)))


# Every request runs one of these two: built once, with a named parameter, since building a
# statement costs more than running it.
_SESSION_AND_USER = (
    select(AuthSession, User)
    .join(User, User.id == AuthSession.user_id)
    .where(AuthSession.token_hash == bindparam("digest"))
)
_TOKEN_USER = (
    select(User)
    .join(ApiToken, ApiToken.user_id == User.id)
    .where(ApiToken.token_hash == bindparam("digest"), ApiToken.revoked_at.is_(None))
)
# The same lookups with the user's row locked until commit, for a request that must be its
# user's only one deciding at a time (next-task: see app.labeling.queue.lease_next). Taken in
# the lookup, the lock costs no round trip of its own. NO KEY UPDATE, as queue.lock_labeler.
_SESSION_AND_LOCKED_USER = _SESSION_AND_USER.with_for_update(of=User, key_share=True)
_LOCKED_TOKEN_USER = _TOKEN_USER.with_for_update(of=User, key_share=True)


def principal_from_cookie(
    session: Session, cookie_token: str, *, lock_user: bool = False
) -> Principal | None:
    statement = _SESSION_AND_LOCKED_USER if lock_user else _SESSION_AND_USER
    row = session.execute(statement, {"digest": token_digest(cookie_token)}).first()
    if row is None:
        return None
    auth_session, user = row
    if auth_session.expires_at < utcnow() or not user.is_active:
        return None
    return Principal(user=user, session=auth_session)


def principal_from_bearer(session: Session, token: str, *, lock_user: bool = False) -> Principal | None:
    statement = _LOCKED_TOKEN_USER if lock_user else _TOKEN_USER
    user = session.scalar(statement, {"digest": token_digest(token)})
    if user is None or not user.is_active:
        return None
    return Principal(user=user, session=None)


def issue_api_token(session: Session, user: User, name: str) -> str:
    token = new_token()
    session.add(ApiToken(user_id=user.id, name=name, token_hash=token_digest(token)))
    return token


def revoke_api_token(session: Session, token: str) -> bool:
    api_token = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_digest(token)))
    if api_token is None or api_token.revoked_at is not None:
        return False
    api_token.revoked_at = utcnow()
    return True
