"""Logins, browser sessions and API tokens."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.auth import throttle
from app.auth.security import new_token, token_digest, verify_password
from app.audit import service as audit
from app.db import named_alike, side_connection
from app.errors import BadInput, Conflict, Forbidden, NotFound
from app.models import ApiToken, AuthSession, User, utcnow


log = logging.getLogger(__name__)


class AccountDeactivated(Forbidden):
    """The right password for an account an administrator has deactivated."""

    def __init__(self) -> None:
        super().__init__("this account is deactivated: ask an administrator to reactivate it")


@dataclass(frozen=True)
class BrowserLogin:
    cookie_token: str
    csrf_token: str


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls the labeling hot path, read as a plain row: making an ORM User (its instance
    state, its place in the session's identity map) cost more than looking the user up."""

    user_id: int
    # The browser session's, for a cookie login (which needs CSRF); None for a bearer token.
    csrf_token: str | None
    must_change_password: bool
    # A read-only token's: the hot path (next-task, submit) is POSTs, which it may not make.
    read_only: bool


@dataclass(frozen=True)
class Principal:
    """Who is calling, and through what: `session` is set for cookie logins, which need CSRF;
    `token_id` for bearer tokens."""

    user: User
    session: AuthSession | None
    token_id: int | None = None
    read_only: bool = False


def authenticate(session: Session, username: str, password: str) -> User | None:
    """The user with this password, or None. Raises AccountDeactivated only for the right
    password: a wrong one says nothing about whether the account exists or is active."""
    # In any case: a phone's keyboard writes the first letter as a capital. Of two names alike
    # but for case, only the exact one logs in.
    named = named_alike(session, User.username, username.strip())
    user = named[0] if len(named) == 1 else None
    ok = verify_password(user.password_hash if user else None, password)
    if user is None or not ok:
        return None
    if not user.is_active:
        raise AccountDeactivated
    return user


def log_in(
    session: Session,
    username: str,
    password: str,
    address: str | None,
    limits: throttle.Limits,
    *,
    purpose: str,
    now: datetime | None = None,
) -> User | None:
    """authenticate, throttled (see app.auth.throttle): TooManyFailures while the username or
    the address is locked, whether or not the password is right. A failure is counted, and
    entered in the audit trail with `purpose` (what the password was for), in the caller's
    transaction, which must be committed although the login failed."""
    now = now or utcnow()
    keys = throttle.keys_for(username, address, limits)
    throttle.refuse_if_locked(session, keys, now)
    user = authenticate(session, username, password)
    if user is None:
        throttle.record_failure(session, keys, limits, now)
        audit.record_wrong_password(session, username, purpose, address)
        return None
    throttle.forget_username(session, username)
    return user


def start_browser_session(session: Session, user: User, hours: int, address: str | None,
                          idle: timedelta | None = None) -> BrowserLogin:
    cookie_token, csrf_token = new_token(), new_token()
    now = utcnow()
    audit.record(session, user, "login.succeeded", audit.user_target(user), address=address)
    session.add(
        AuthSession(
            user_id=user.id,
            token_hash=token_digest(cookie_token),
            csrf_token=csrf_token,
            created_at=now,
            expires_at=now + timedelta(hours=hours),
            last_seen_at=now,
        )
    )
    # Ended sessions are swept at login time, which needs no scheduler.
    ended = AuthSession.expires_at < now
    if idle is not None:
        ended = or_(ended, AuthSession.last_seen_at <= now - idle)
    session.execute(delete(AuthSession).where(ended))
    return BrowserLogin(cookie_token=cookie_token, csrf_token=csrf_token)


def end_browser_session(session: Session, cookie_token: str) -> None:
    session.execute(delete(AuthSession).where(AuthSession.token_hash == token_digest(cookie_token)))


# Every request but next-task and submit runs one of these two (those run the plain-row forms
# below): built once, with a named parameter, since building a statement costs more than
# running it.
_SESSION_AND_USER = (
    select(AuthSession, User)
    .join(User, User.id == AuthSession.user_id)
    .where(AuthSession.token_hash == bindparam("digest"))
)
_TOKEN_USER = (
    select(User, ApiToken.id, ApiToken.last_used_at, ApiToken.read_only)
    .join(ApiToken, ApiToken.user_id == User.id)
    .where(ApiToken.token_hash == bindparam("digest"), ApiToken.revoked_at.is_(None),
           or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > bindparam("now")))
)
# The same lookups as plain rows, for the labeling hot path (see Caller). Locked: the user's
# row stays locked until commit, for a request that must be its user's only one deciding at a
# time (next-task: see app.labeling.queue.lease_next); taken in the lookup, the lock costs no
# round trip of its own. NO KEY UPDATE, as queue.lock_labeler.
_CALLER_BY_COOKIE = _SESSION_AND_USER.with_only_columns(
    User.id, User.is_active, User.must_change_password, AuthSession.id.label("session_id"), AuthSession.csrf_token,
    AuthSession.expires_at, AuthSession.last_seen_at,
)
_CALLER_BY_TOKEN = _TOKEN_USER.with_only_columns(User.id, User.is_active, User.must_change_password,
                                                 ApiToken.id.label("token_id"), ApiToken.last_used_at,
                                                 ApiToken.read_only)
_LOCKED_CALLER_BY_COOKIE = _CALLER_BY_COOKIE.with_for_update(of=User, key_share=True)
_LOCKED_CALLER_BY_TOKEN = _CALLER_BY_TOKEN.with_for_update(of=User, key_share=True)


@dataclass(frozen=True, slots=True)
class SessionUse:
    """How a request may use its browser session: `idle` is how long one may go unused before it
    ends (None: until it expires); `attended`, whether a person made the request (a page's own
    polls are not, and leave the session to end when nobody is there)."""

    idle: timedelta | None
    attended: bool


def _session_ended(expires_at: datetime, last_seen_at: datetime, use: SessionUse, now: datetime) -> bool:
    return expires_at < now or (use.idle is not None and now - last_seen_at >= use.idle)


def principal_from_cookie(session: Session, cookie_token: str, use: SessionUse) -> Principal | None:
    row = session.execute(_SESSION_AND_USER, {"digest": token_digest(cookie_token)}).first()
    if row is None:
        return None
    auth_session, user = row
    now = utcnow()
    if _session_ended(auth_session.expires_at, auth_session.last_seen_at, use, now) or not user.is_active:
        return None
    if use.attended:
        _note_use(session, AuthSession.last_seen_at, auth_session.id, auth_session.last_seen_at, now)
    return Principal(user=user, session=auth_session)


def principal_from_bearer(session: Session, token: str) -> Principal | None:
    now = utcnow()
    row = session.execute(_TOKEN_USER, {"digest": token_digest(token), "now": now}).first()
    if row is None or not row.User.is_active:
        return None
    _note_use(session, ApiToken.last_used_at, row.id, row.last_used_at, now)
    return Principal(user=row.User, session=None, token_id=row.id, read_only=row.read_only)


# How stale a token's or a session's last use may be before a request writes it down again.
LAST_USE_EVERY = timedelta(minutes=1)


def _note_use(session: Session, last_use: InstrumentedAttribute[datetime], row_id: int,
              last_used_at: datetime | None, now: datetime) -> None:
    """When a token or a browser session (`last_use`, its column) was last used, to the minute:
    a token's for its owner to see which still serve and revoke the others, a session's to end it
    when unused (STEPWISE_SESSION_IDLE_MINUTES). Written at most once a minute, so that most
    requests stay reads.

    On PostgreSQL in a short transaction of its own: written in the request's, the row stayed
    locked while the request ran (a long import), and revoking the token, logging out, or
    deactivating the user, waited for it. Skipped while another holds the row, which writes it.
    SQLite runs one writer at a time, which the request already is: there it goes in the
    request's transaction.
    """
    if last_used_at is not None and now - last_used_at < LAST_USE_EVERY:
        return
    table = last_use.class_
    free = select(table.id).where(table.id == row_id).with_for_update(skip_locked=True)
    write = update(table).where(table.id.in_(free.scalar_subquery())).values({last_use.key: now})
    engine = session.get_bind()
    if engine.dialect.name != "postgresql":
        session.connection().execute(write)
        return
    try:
        with side_connection(engine) as own:
            own.execute(write)
            own.commit()
    except OperationalError as exc:
        # A note, not the request's work: the database refusing one more connection, say.
        log.warning("%s %s: its last use was not written: %s", table.__tablename__, row_id, exc)


def caller_from_cookie(session: Session, cookie_token: str, use: SessionUse, *,
                       lock_user: bool = False) -> Caller | None:
    """As principal_from_cookie, as a Caller; run on the session's connection, past the ORM."""
    statement = _LOCKED_CALLER_BY_COOKIE if lock_user else _CALLER_BY_COOKIE
    row = session.connection().execute(statement, {"digest": token_digest(cookie_token)}).first()
    now = utcnow()
    if row is None or _session_ended(row.expires_at, row.last_seen_at, use, now) or not row.is_active:
        return None
    if use.attended:
        _note_use(session, AuthSession.last_seen_at, row.session_id, row.last_seen_at, now)
    return Caller(user_id=row.id, csrf_token=row.csrf_token, must_change_password=row.must_change_password,
                  read_only=False)


def caller_from_bearer(session: Session, token: str, *, lock_user: bool = False) -> Caller | None:
    """As principal_from_bearer, as a Caller; run on the session's connection, past the ORM."""
    statement = _LOCKED_CALLER_BY_TOKEN if lock_user else _CALLER_BY_TOKEN
    now = utcnow()
    row = session.connection().execute(statement, {"digest": token_digest(token), "now": now}).first()
    if row is None or not row.is_active:
        return None
    _note_use(session, ApiToken.last_used_at, row.token_id, row.last_used_at, now)
    return Caller(user_id=row.id, csrf_token=None, must_change_password=row.must_change_password,
                  read_only=row.read_only)


def end_logins(session: Session, user: User, *, keep: Principal | None = None) -> None:
    """End every browser session of `user` and revoke every API token, for good (OWASP ASVS
    3.3.3, 3.3.4): on deactivation, so that reactivation brings none back, and on a password
    change, so that whoever knew the old password is out. The login `keep` made the change
    with, if it is the user's own, stays."""
    sessions = delete(AuthSession).where(AuthSession.user_id == user.id)
    tokens = update(ApiToken).where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
    if keep is not None and keep.user.id == user.id:
        if keep.session is not None:
            sessions = sessions.where(AuthSession.id != keep.session.id)
        if keep.token_id is not None:
            tokens = tokens.where(ApiToken.id != keep.token_id)
    session.execute(sessions, execution_options={"synchronize_session": False})
    session.execute(tokens.values(revoked_at=utcnow()), execution_options={"synchronize_session": False})


@dataclass(frozen=True)
class IssuedToken:
    token: str  # shown once: only its digest is stored
    record: ApiToken


def issue_api_token(session: Session, user: User, name: str, expires_in_days: int | None = None, *,
                    by: User | None = None, max_days: int | None = None, read_only: bool = False) -> IssuedToken:
    """A new token for `user`; `by` made it (the user, logged in or with their password), None
    at the command line. `max_days` (STEPWISE_TOKEN_MAX_DAYS) caps its life: no expiry asked
    for means the cap, a longer one is refused. A `read_only` one makes GET requests and scoring only (app.deps)."""
    if not user.is_active:
        # Refused at every request until a reactivation would quietly bring it to life.
        raise Conflict(f"{user.username} is deactivated: reactivate them before making a token")
    if user.must_change_password and (by is None or by.id != user.id):
        # Until they choose their own password, a token's one use is POST /users/me/password:
        # one made for them by someone else (the command line) would let its holder choose it
        # in their place, and keep a login the change does not end. They make their own, with
        # the password they were given (POST /auth/tokens), as an API-only user does.
        raise Conflict(f"{user.username} must still choose their own password: a token made for them now would let "
                       "its holder choose it for them; make it once they have logged in and chosen one")
    if read_only and user.must_change_password:
        # Its one use until then would be POST /users/me/password, which it may not make.
        raise Conflict(f"{user.username} must choose their own password first, which a read-only token could not "
                       "do: make the read-only token once they have logged in and chosen one (a full token can be "
                       "made now)")
    if max_days is not None:
        if expires_in_days is not None and expires_in_days > max_days:
            raise BadInput(f"tokens last at most {max_days} days here (STEPWISE_TOKEN_MAX_DAYS): "
                           f"ask for {max_days} or fewer", [{"field": "expires_in_days", "message": f"must be at most {max_days}"}])
        expires_in_days = expires_in_days or max_days
    token = new_token()
    expires_at = None if expires_in_days is None else utcnow() + timedelta(days=expires_in_days)
    record = ApiToken(user_id=user.id, name=name, token_hash=token_digest(token), expires_at=expires_at,
                      read_only=read_only)
    session.add(record)
    session.flush()
    audit.record(session, by, "token.created", audit.user_target(user), token=record.id, name=name,
                 expires_at=None if expires_at is None else expires_at.isoformat(),
                 **({"read_only": True} if read_only else {}))
    return IssuedToken(token=token, record=record)


def list_api_tokens(session: Session, user: User) -> list[ApiToken]:
    """The user's tokens not revoked, newest first; expired ones too, until their owner revokes
    them, so that a script's token that stopped working is found here."""
    return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
                                .order_by(ApiToken.id.desc())))


@dataclass(frozen=True)
class HeldToken:
    record: ApiToken
    username: str


def list_all_api_tokens(session: Session) -> list[HeldToken]:
    """Every user's tokens not revoked, newest first: who holds access to the API, for an admin
    to see and cut off (deactivation revokes a user's tokens, so each holder is active)."""
    rows = session.execute(select(ApiToken, User.username).join(User, User.id == ApiToken.user_id)
                           .where(ApiToken.revoked_at.is_(None)).order_by(ApiToken.id.desc()))
    return [HeldToken(record, username) for record, username in rows]


def revoke_any_token(session: Session, token_id: int, *, by: User | None) -> HeldToken:
    """Revoke a token of any user (`by`: the admin, None at the command line); NotFound for none,
    or one revoked already."""
    row = session.execute(select(ApiToken, User).join(User, User.id == ApiToken.user_id)
                          .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))).first()
    if row is None:
        raise NotFound(f"no token {token_id} is left to revoke")
    return HeldToken(revoke_own_token(session, row.User, token_id, by=by), row.User.username)


def revoke_own_token(session: Session, user: User, token_id: int, *, by: User | None = None) -> ApiToken:
    """Revoke one of `user`'s tokens (`by`: the user, None at the command line); NotFound for
    another's (which this does not tell apart from none) or one revoked already."""
    record = session.scalar(select(ApiToken).where(
        ApiToken.id == token_id, ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None)))
    if record is None:
        raise NotFound(f"{user.username} has no token {token_id} left to revoke")
    record.revoked_at = utcnow()
    audit.record(session, by, "token.revoked", audit.user_target(user), token=record.id, name=record.name)
    return record


def revoke_api_token(session: Session, token: str) -> bool:
    """Revoke the token a request came with, as its user."""
    api_token = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_digest(token)))
    if api_token is None or api_token.revoked_at is not None:
        return False
    api_token.revoked_at = utcnow()
    owner = session.get(User, api_token.user_id)
    audit.record(session, owner, "token.revoked", audit.user_target(owner), token=api_token.id, name=api_token.name)
    return True
