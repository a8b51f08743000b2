"""Failed logins, counted per username and per client address, in the database.

Ten wrong passwords for one username (fifty from one address, whatever the usernames) within
the window lock that key for the lockout time: every attempt on it is refused with 429 before
any password is checked, the right one included, so guessing stops there. The lock expires on
its own, so an attacker can keep a user out only by failing again and again, and refused
attempts do not extend it. A username that exists and one that does not are counted and
refused alike: the answer never says which it was. A good login clears its username's count,
not its address's: a guesser with one account of their own must not reset the count of the
address they guess from.

Counts live in `login_failures`, so that every server process and replica sees the same
ones; each failure is one INSERT … ON CONFLICT DO UPDATE, which PostgreSQL and SQLite both
apply atomically, so concurrent failures are all counted. Attempts already past the check when
the lock falls are still answered on their own merits: at most as many as run at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, case, delete, func, literal, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.config import Settings
from app.errors import ServiceError
from app.models import LoginFailure, LoginKeyKind
from app.models.base import UTCDateTime

_failures = LoginFailure.__table__


class TooManyFailures(ServiceError):
    status_code = 429

    def __init__(self, retry_after_s: int) -> None:
        minutes = max(1, math.ceil(retry_after_s / 60))
        super().__init__(
            f"too many failed logins: try again in {minutes} minute{'s' if minutes != 1 else ''}"
        )
        self.retry_after_s = retry_after_s
        self.headers = {"Retry-After": str(retry_after_s)}


@dataclass(frozen=True)
class Limits:
    per_username: int
    per_address: int
    window: timedelta
    lockout: timedelta

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            per_username=settings.login_max_failures,
            per_address=settings.login_max_failures_per_address,
            window=timedelta(minutes=settings.login_failure_window_minutes),
            lockout=timedelta(minutes=settings.login_lockout_minutes),
        )


@dataclass(frozen=True)
class Key:
    kind: LoginKeyKind
    key: str
    limit: int


def keys_for(username: str, address: str | None, limits: Limits) -> list[Key]:
    # Case folded: "Ann" and "ann" are one name to a guesser.
    keys = [Key(LoginKeyKind.username, username.strip().lower()[:255], limits.per_username)]
    if address:
        keys.append(Key(LoginKeyKind.address, address[:255], limits.per_address))
    return keys


def refuse_if_locked(session: Session, keys: list[Key], now: datetime) -> None:
    """TooManyFailures if any of `keys` is locked at `now`."""
    until = session.scalar(
        select(func.max(LoginFailure.locked_until)).where(
            or_(*(and_(LoginFailure.kind == k.kind, LoginFailure.key == k.key) for k in keys)),
            LoginFailure.locked_until > now,
        )
    )
    if until is not None:
        raise TooManyFailures(max(1, math.ceil((until - now).total_seconds())))


def record_failure(session: Session, keys: list[Key], limits: Limits, now: datetime) -> None:
    # Rows whose window and lock are both over count for nothing: swept here, so that names
    # tried once and never again do not pile up.
    session.execute(
        delete(LoginFailure).where(
            LoginFailure.window_started_at <= now - limits.window,
            or_(LoginFailure.locked_until.is_(None), LoginFailure.locked_until <= now),
        ),
        execution_options={"synchronize_session": False},
    )
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    at = literal(now, UTCDateTime)
    locked = literal(now + limits.lockout, UTCDateTime)
    for key in keys:
        # The row as stored, in the SET clause: a window or lock that is over starts afresh.
        stale = (_failures.c.window_started_at <= literal(now - limits.window, UTCDateTime)) | (
            _failures.c.locked_until <= at
        )
        lock_now = locked if key.limit <= 1 else None
        statement = insert(_failures).values(
            kind=key.kind, key=key.key, failures=1, window_started_at=now, locked_until=lock_now
        )
        statement = statement.on_conflict_do_update(
            index_elements=[_failures.c.kind, _failures.c.key],
            set_={
                "failures": case((stale, 1), else_=_failures.c.failures + 1),
                "window_started_at": case((stale, at), else_=_failures.c.window_started_at),
                "locked_until": case(
                    (stale, lock_now),
                    (_failures.c.failures + 1 >= key.limit, func.coalesce(_failures.c.locked_until, locked)),
                    else_=_failures.c.locked_until,
                ),
            },
        )
        session.execute(statement)


def locks(session: Session, kind: LoginKeyKind, now: datetime) -> dict[str, datetime]:
    """The keys of `kind` locked at `now`, with when each lock ends."""
    rows = session.execute(select(LoginFailure.key, LoginFailure.locked_until).where(
        LoginFailure.kind == kind, LoginFailure.locked_until > now))
    return {key: until for key, until in rows}


def unlock(session: Session, kind: LoginKeyKind, key: str) -> bool:
    """Forget the key's failures and lock (an admin letting a locked-out user, or an office
    behind one address, try again at once); whether it was locked or counting."""
    key = key.strip().lower()[:255] if kind == LoginKeyKind.username else key.strip()[:255]
    removed = session.execute(
        delete(LoginFailure).where(LoginFailure.kind == kind, LoginFailure.key == key),
        execution_options={"synchronize_session": False},
    )
    return bool(removed.rowcount)


def forget_username(session: Session, username: str) -> None:
    """After a good login: the username's count starts again from nothing."""
    session.execute(
        delete(LoginFailure).where(
            LoginFailure.kind == LoginKeyKind.username, LoginFailure.key == username.strip().lower()[:255]
        ),
        execution_options={"synchronize_session": False},
    )
