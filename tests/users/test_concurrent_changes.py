"""The user rules hold when two transactions check them at once, on both backends: the second
waits for the first to end and then sees what it wrote."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.errors import Conflict
from app.models import Role, User
from app.users.schemas import UserCreate, UserUpdate
from app.users.service import create_user, get_user_by_name, update_user
from tests.conftest import PASSWORD, make_user

# Long enough for the second transaction to have checked and written, were nothing holding it.
HELD_S = 1.0


@pytest.fixture
def first(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """The transaction that goes first, ended however the test ends: left open, it would hold
    its locks against the tables being emptied after the test."""
    session = session_factory()
    yield session
    session.rollback()
    session.close()


def _second(factory: sessionmaker[Session], first: Session, work: Callable[[Session], object]) -> Exception | None:
    """The outcome of `work` (None or the exception it raised), run in a transaction of its own
    beside `first`: it must still be waiting a while later, and end once `first` commits."""
    thread, outcome = _beside(factory, work)
    thread.join(HELD_S)
    assert thread.is_alive(), "the second transaction went ahead while the first was uncommitted"
    first.commit()
    thread.join(30)
    return outcome[0]


def _beside(factory: sessionmaker[Session], work: Callable[[Session], object]) -> tuple[threading.Thread, list]:
    """`work` in its own session and thread, committed if it returns; its outcome (None or the
    exception) lands in the list."""
    outcome: list = []

    def run() -> None:
        with factory() as session:
            try:
                work(session)
                session.commit()
                outcome.append(None)
            except Exception as exc:  # the outcome is what the test checks
                session.rollback()
                outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_two_names_differing_only_in_case_created_at_once_make_one_user(session_factory, first: Session) -> None:
    create_user(first, UserCreate(username="Alice", role=Role.labeler, password=PASSWORD))
    outcome = _second(session_factory, first, lambda session: create_user(
        session, UserCreate(username="alice", role=Role.labeler, password=PASSWORD)))
    assert isinstance(outcome, Conflict) and "differ only in case" in str(outcome)
    with session_factory() as session:
        assert session.scalars(select(User.username).where(func.lower(User.username) == "alice")).all() == ["Alice"]


def test_two_admins_demoting_each_other_at_once_leave_one_admin(session_factory, first: Session) -> None:
    make_user(session_factory, "ada", Role.admin)
    make_user(session_factory, "bob", Role.admin)
    update_user(first, get_user_by_name(first, "ada"), UserUpdate(role=Role.manager), by=None)
    outcome = _second(session_factory, first, lambda session: update_user(
        session, get_user_by_name(session, "bob"), UserUpdate(is_active=False), by=None))
    assert isinstance(outcome, Conflict) and "last active admin" in str(outcome)
    with session_factory() as session:
        admins = session.scalars(select(User.username).where(User.role == Role.admin, User.is_active)).all()
        assert admins == ["bob"]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_rule_held_by_one_transaction_does_not_hold_another_rule(session_factory, first: Session) -> None:
    """The locks are per rule: a slow user creation does not stop an admin being demoted."""
    make_user(session_factory, "ada", Role.admin)
    make_user(session_factory, "bob", Role.admin)
    create_user(first, UserCreate(username="carol", role=Role.labeler, password=PASSWORD))
    thread, outcome = _beside(session_factory, lambda session: update_user(
        session, get_user_by_name(session, "bob"), UserUpdate(role=Role.manager), by=None))
    thread.join(30)
    assert outcome == [None]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_user_changed_since_it_was_loaded_is_decided_on_as_it_is_now(session_factory, first: Session) -> None:
    """Loaded as a labeler, promoted and made the only admin by another admin before this change
    lands: deactivating them is the last admin's deactivation, refused. (PostgreSQL only: on
    SQLite the load's transaction keeps the other admin's from starting.)"""
    make_user(session_factory, "ada", Role.admin)
    make_user(session_factory, "cy", Role.labeler)
    loaded = get_user_by_name(first, "cy")
    with session_factory() as other:
        update_user(other, get_user_by_name(other, "cy"), UserUpdate(role=Role.admin), by=None)
        other.flush()
        update_user(other, get_user_by_name(other, "ada"), UserUpdate(role=Role.manager), by=None)
        other.commit()
    with pytest.raises(Conflict, match="cy is the last active admin"):
        update_user(first, loaded, UserUpdate(is_active=False), by=None)
