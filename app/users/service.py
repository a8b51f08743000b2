"""User accounts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth.security import guessable, hash_password, new_password
from app.auth import throttle
from app.auth.service import Principal, end_logins, log_in
from app.db import RuleLock, end_reads, hold_rule, one_named
from app.errors import BadInput, Conflict, NotFound, plain_message
from app.quality.gate import release_leases_of
from app.models import LoginKeyKind, Role, User, utcnow
from app.users.schemas import PasswordChange, UserCreate, Username, UsersCreate, UserUpdate


def create_user(session: Session, data: UserCreate, *, by: User | None = None) -> User:
    """A new user; `by` is the admin creating them, None at the command line (and for the demo)."""
    # Names that differ only in case are one name to people reading a report (and to the login
    # throttle, which counts failures by the lowercased name). A unique index on lower(username)
    # would keep it without a lock, but could not be built on a database that already holds two
    # such names.
    # Hashed first: the hash takes a deliberate while, and the lock holds every other creation.
    password_hash = hash_password(data.password)
    hold_rule(session, RuleLock.user_names)
    taken = session.scalar(select(User.username).where(func.lower(User.username) == data.username.lower()))
    if taken is not None:
        raise Conflict(f"a user named {taken!r} already exists" if taken == data.username else
                       f"a user named {taken!r} already exists; names may not differ only in case")
    user = User(username=data.username, role=data.role, password_hash=password_hash,
                must_change_password=data.must_change_password)
    session.add(user)
    session.flush()
    audit.record(session, by, "user.created", audit.user_target(user), role=user.role.value, **_first_login(user))
    return user


@dataclass(frozen=True)
class NewAccount:
    user: User
    # Generated, told once to the admin, who hands it over; only its hash is kept.
    password: str


def create_users(session: Session, data: UsersCreate, *, by: User | None,
                 listed_at: Callable[[int], str] = lambda index: f"as usernames.{index}") -> list[NewAccount]:
    """Accounts for a list of names, each with a generated password: all of them, or none when
    a name is malformed, listed twice or taken (one BadInput naming every such name: its field
    is the list's 0-based `usernames.N`, its message names the name). `listed_at` words where
    the name was listed first, as the caller counts places: by default as the field is named
    ("as usernames.0", beside the field `usernames.3`); a form's "as name 1", a file's "on line 4"."""
    _refuse_names(data.usernames, _taken(session, data.usernames), listed_at)
    # The hashing, seconds of it, in no transaction: on SQLite an open one holds the database's
    # one write lock, and every labeler's submit would wait behind it.
    end_reads(session)
    passwords = [new_password() for _ in data.usernames]
    hashes = [hash_password(password) for password in passwords]
    hold_rule(session, RuleLock.user_names)
    # Again under the lock: a name may have been taken while the passwords were hashed.
    _refuse_names(data.usernames, _taken(session, data.usernames), listed_at)
    users = [User(username=name, role=data.role, password_hash=digest, must_change_password=data.must_change_password)
             for name, digest in zip(data.usernames, hashes)]
    session.add_all(users)
    session.flush()
    for user in users:
        audit.record(session, by, "user.created", audit.user_target(user), role=user.role.value, **_first_login(user))
    return [NewAccount(user, password) for user, password in zip(users, passwords)]


def _taken(session: Session, names: list[str]) -> dict[str, str]:
    """Of `names`, those taken in any case: lowercased → as stored."""
    lowered = {name.lower() for name in names}
    return {taken.lower(): taken for taken in session.scalars(select(User.username).where(func.lower(User.username).in_(lowered)))}


_USERNAME = TypeAdapter(Username)


def _refuse_names(names: list[str], taken: dict[str, str], listed_at: Callable[[int], str]) -> None:
    """Every name of the batch that cannot be used, each for its first reason, in one BadInput."""
    problems: list[dict[str, str]] = []
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        key = name.lower()
        message = _malformed(name)
        if message is None and key in first:
            message = f"{name!r} is listed already, {listed_at(first[key])}"
        elif message is None and key in taken:
            message = f"a user named {taken[key]!r} already exists"
        if message is not None:
            problems.append({"field": f"usernames.{index}", "message": message})
        first.setdefault(key, index)
    if problems:
        raise BadInput(f"no user was created: {len(problems)} of the names cannot be used", problems)


def _malformed(name: str) -> str | None:
    """Why `name` cannot be a username, naming it; None if it can."""
    try:
        _USERNAME.validate_python(name)
    except ValidationError as exc:
        return f"{name!r} cannot be a username: {plain_message(exc.errors()[0])}"
    return None


def _first_login(user: User) -> dict[str, bool]:
    """The audit detail of a password its owner must replace; none for one they keep."""
    return {"must_change_password": True} if user.must_change_password else {}


def list_users(session: Session) -> list[User]:
    """Every user, by name in any case (alice, Bob, FINN), as names are one name in any case
    elsewhere: the database's own order put every capital first (FINN before bob) on
    PostgreSQL's C collation and on SQLite. Two names alike but for case keep a fixed order."""
    return list(session.scalars(select(User).order_by(func.lower(User.username), User.username, User.id)))


def get_user(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound(f"no user with id {user_id}")
    return user


def get_user_by_name(session: Session, username: str) -> User:
    """The user of that name, in any case (see app.db.named_alike)."""
    return one_named(session, User.username, username, "user")


def admin_powers_change(target: User | None, role: Role | None, *, by: User, new_username: str = "") -> str | None:
    """What a change by the admin `by` to `target` (None: a new user, `new_username`) giving it
    `role` (None: unchanged) does to an admin, in words, or None. Such a change asks for the acting admin's own
    password (is_own_password): a session left open or a leaked token must not make an admin, or
    set an admin's password and so end their logins, on its own; nor can it make itself a token.
    Changes to one's own account are update_user's to refuse."""
    if target is not None and target.id == by.id:
        return None
    if target is None:
        if role != Role.admin:
            return None
        return f"creating {new_username or 'a user'}, an admin,"
    if target.role == Role.admin:
        return f"changing {target.username}, an admin,"
    if role == Role.admin:
        return f"making {target.username} an admin"
    return None


def refuse_guessable(password: str, username: str, field: str) -> None:
    """BadInput naming `field` when `password` is easy to guess for this account. The schemas
    judge a password alone where they do not know whose it is; the account's own name, the first
    guess of all, is judged here, wherever a password is chosen for an existing account."""
    why = guessable(password, user_inputs=(username,))
    if why is not None:
        raise BadInput(f"invalid request: {field}: {why}", [{"field": field, "message": why}])


def is_own_password(session: Session, actor: User, password: str, address: str | None, limits: throttle.Limits) -> bool:
    """Whether `password` is the actor's, checked as a login is: TooManyFailures while locked, and
    a wrong one counted, in the caller's transaction, which must be committed (answer, not raise)."""
    return log_in(session, actor.username, password, address, limits, purpose="admin change") is not None


def update_user(
    session: Session, user: User, data: UserUpdate, *, by: User | None, keep: Principal | None = None,
    confirmed: bool = False,
) -> User:
    """Change a user; deactivation or a new password ends their logins (see end_logins), all
    but `keep`, the caller's own. `by` is the admin making the change, None at the command line;
    `confirmed`, whether they gave their own password (see admin_powers_change)."""
    if data.password is not None:
        refuse_guessable(data.password, user.username, "password")
    password_hash = None if data.password is None else hash_password(data.password)
    # Two admins demoting each other at once would each still see the other as an admin; and
    # the user is decided on as committed now, not as loaded before another admin's change.
    hold_rule(session, RuleLock.active_admins)
    session.refresh(user)
    if by is not None and not confirmed and admin_powers_change(user, data.role, by=by) is not None:
        # Made an admin by someone else since the caller looked: their password is asked now.
        raise Conflict(f"{user.username} became an admin meanwhile: changing them asks for your own password")
    changes_standing = (data.role is not None and data.role != user.role) or \
        (data.is_active is not None and data.is_active != user.is_active)
    if by is not None and user.id == by.id and changes_standing:
        # An admin who demotes or deactivates themselves may leave nobody able to undo it.
        raise Conflict("you cannot change your own role or deactivate yourself; ask another admin")
    if by is not None and user.id == by.id and (data.password is not None or data.must_change_password is not None):
        # Your own password takes the current one (change_own_password), as everyone's does: one
        # way to change it, whatever the role.
        raise Conflict("change your own password under Your account (/account) or with POST "
                       "/api/v1/users/me/password, giving the current one")
    stays_admin = (data.role or user.role) == Role.admin and (
        user.is_active if data.is_active is None else data.is_active)
    if user.role == Role.admin and user.is_active and not stays_admin and not _other_active_admin(session, user):
        # The rule above keeps one admin through the API; this keeps one through the command line.
        raise Conflict(f"{user.username} is the last active admin; make another admin first")
    target = audit.user_target(user)
    if data.role is not None and data.role != user.role:
        audit.record(session, by, "user.role_changed", target, **{"from": user.role.value, "to": data.role.value})
        user.role = data.role
    if data.is_active is not None and data.is_active != user.is_active:
        audit.record(session, by, "user.reactivated" if data.is_active else "user.deactivated", target)
        user.is_active = data.is_active
    if password_hash is not None:
        if data.must_change_password is not None:
            user.must_change_password = data.must_change_password
        audit.record(session, by, "user.password_set", target, **_first_login(user))
        _set_password(session, user, password_hash, keep)
    elif data.must_change_password is not None and data.must_change_password != user.must_change_password:
        audit.record(session, by, "user.password_change_asked" if data.must_change_password
                     else "user.password_change_waived", target)
        user.must_change_password = data.must_change_password
    if data.is_active is False:
        end_logins(session, user, keep=keep)
        # Held until they ran out, their tasks waited on someone who could not come back.
        release_leases_of(session, user.id)
    return user


def unlock(session: Session, user: User, *, by: User | None) -> bool:
    """Let a user locked out by failed logins try again now, without a new password (the lock is
    on their name: a guesser's failures, not necessarily theirs); whether there was anything to
    clear. `by`: the admin, None at the command line. An admin's name is unlocked by another
    admin only (with their password, see admin_powers_change): the count is what stops a stolen
    session guessing its owner's password where a change asks for it."""
    if by is not None and user.id == by.id:
        raise Conflict("you cannot unlock your own name: ask another admin, or wait for the lock to end")
    cleared = throttle.unlock(session, LoginKeyKind.username, user.username)
    if cleared:
        audit.record(session, by, "user.unlocked", audit.user_target(user))
    return cleared


def unlock_address(session: Session, address: str, *, by: User | None) -> bool:
    """Forget the failed logins from a client address (an office behind one proxy) and the lock
    they made; whether there was anything to clear."""
    cleared = throttle.unlock(session, LoginKeyKind.address, address)
    if cleared:
        audit.record(session, by, "address.unlocked", f"address {address.strip()}")
    return cleared


def locked_until(session: Session) -> dict[str, datetime]:
    """Usernames (lowercased) locked by failed logins now, with when each lock ends."""
    return throttle.locks(session, LoginKeyKind.username, utcnow())


def _set_password(session: Session, user: User, password_hash: str, keep: Principal | None) -> None:
    user.password_hash = password_hash
    # A new password is what an admin gives a user locked out by failed logins: the lock on the
    # name goes with the old password (the address's stays, as a good login's does).
    throttle.forget_username(session, user.username)
    end_logins(session, user, keep=keep)


def _other_active_admin(session: Session, user: User) -> bool:
    others = select(User.id).where(User.role == Role.admin, User.is_active, User.id != user.id)
    return session.scalar(others.limit(1)) is not None


def change_own_password(
    session: Session, login: Principal, data: PasswordChange, address: str | None, limits: throttle.Limits
) -> bool:
    """Set the caller's new password, ending their other logins; False, with the failure
    counted, when the current password is wrong. It is checked as a login is, throttled, so
    that a stolen session cannot guess it; the caller must commit the count and answer, not
    raise (which would roll it back)."""
    user = login.user
    # Judged before the current password is: a refusal raised then rolls back no failure counted.
    refuse_guessable(data.new_password, user.username, "new_password")
    if log_in(session, user.username, data.current_password, address, limits, purpose="password change") is None:
        return False
    _set_password(session, user, hash_password(data.new_password), keep=login)
    user.must_change_password = False
    audit.record(session, user, "user.password_changed", audit.user_target(user))
    return True
