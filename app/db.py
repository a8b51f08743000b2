"""Engine construction and the one way to get a database session.

`session_scope` is the only place that commits or rolls back: request handlers get it through
`get_session`, the CLI and workers use it directly. `end_reads` is the one exception, for a
request that has read all it needs and then works long without the database.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any, TypeVar

import anyio
import anyio.to_thread
# FastAPI's Request is Starlette's: imported from there, FastAPI (0.05 s) stays out of the
# start-up of CLI commands, which import this module too.
from starlette.requests import Request
from sqlalchemy import URL, Connection, Engine, create_engine, event, func, make_url, select
from sqlalchemy.pool import NullPool
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from app.config import Settings
from app.errors import Conflict, NotFound

T = TypeVar("T")


# Past the pool, for bursts. A worker cannot use more than the pool, this and its threadpool
# allow at once (anyio's default: 40 threads).
MAX_OVERFLOW = 10


# Seconds to wait for PostgreSQL to answer a connection. libpq waits forever by default: a
# server that accepts and never answers (a stuck proxy, a full backlog) hung the CLI and /readyz.
CONNECT_TIMEOUT_S = 10


def connect_timeout_args(url: str) -> dict[str, int]:
    """PostgreSQL's connect timeout, unless the URL sets one (`?connect_timeout=N`); nothing
    for SQLite, a file that has no server to wait for."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql" or "connect_timeout" in parsed.query:
        return {}
    return {"connect_timeout": CONNECT_TIMEOUT_S}


@functools.lru_cache(maxsize=8)
def _unpooled(url: URL) -> Engine:
    return create_engine(url, poolclass=NullPool, connect_args=connect_timeout_args(url.render_as_string(False)))


def side_connection(engine: Engine) -> Connection:
    """A PostgreSQL connection of its own, outside `engine`'s pool, for a small write that must
    commit apart from the request's transaction (a token's last use, app.auth.service). Not
    from the pool: a request holding one of its connections while it waited for a second, with
    every other request doing the same, would wait out the pool's timeout."""
    return _unpooled(engine.url).connect()


def create_db_engine(settings: Settings) -> Engine:
    url = settings.database_url
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=settings.db_pool_size,
            max_overflow=MAX_OVERFLOW,
        )
        _configure_sqlite(engine)
        return engine
    engine = create_engine(
        url,
        connect_args=connect_timeout_args(url),
        pool_size=settings.db_pool_size,
        max_overflow=MAX_OVERFLOW,
        pool_pre_ping=True,
    )
    _configure_postgresql(engine)
    return engine


def _configure_postgresql(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        # No JIT compilation: it pays off for long analytic queries, but a query plan whose
        # cost estimate grows with the queue crossed jit_above_cost and spent 75 ms compiling
        # what runs in 3 ms. A SET, not a startup option: that would replace any `options` in
        # DATABASE_URL, and PgBouncer refuses startup options it does not know.
        dbapi_connection.execute("SET jit = off")
        # Days are UTC days, as SQLite's and the pages' are: date() of a timestamptz is taken in
        # the session's time zone, which is the server's or PGTZ's unless set.
        dbapi_connection.execute("SET TIME ZONE 'UTC'")
        # Named in pg_stat_activity: an operator (and `stepwise db restore`) sees whose sessions
        # these are, unless DATABASE_URL names them otherwise.
        if not dbapi_connection.info.parameter_status("application_name"):
            dbapi_connection.execute("SET application_name = 'stepwise'")
        dbapi_connection.commit()


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        # pysqlite's own transaction handling would issue a deferred BEGIN; we take over so
        # that every transaction starts with BEGIN IMMEDIATE below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "before_cursor_execute")
    def _refuse_nul(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        # PostgreSQL text cannot hold NUL, and its driver refuses one; SQLite would store it, and
        # the data would then neither move to PostgreSQL nor import back from its own export.
        # Raised as the driver's DataError, the app answers it as PostgreSQL's: a 422. Single
        # statements only: a bulk insert is an import, which refuses NUL line by line.
        if executemany or not parameters:
            return
        values = parameters.values() if isinstance(parameters, dict) else parameters
        if any(type(value) is str and "\x00" in value for value in values):
            raise sqlite3.DataError("text contains a NUL character (0x00), which the database cannot store")

    @event.listens_for(engine, "begin")
    def _on_begin(connection):  # type: ignore[no-untyped-def]
        # SQLite has no row locks: taking the write lock at BEGIN serialises writers, which is
        # what makes leasing a task safe there (PostgreSQL uses FOR UPDATE SKIP LOCKED instead).
        # A session that only reads (session_scope's reads_only) takes none: under WAL it reads
        # a snapshot while writers go on.
        reads_only = connection.get_execution_options().get(_READS_ONLY, False)
        connection.exec_driver_sql("BEGIN DEFERRED" if reads_only else "BEGIN IMMEDIATE")


# The execution option that marks a session's connection as reading only (see session_scope).
_READS_ONLY = "stepwise_reads_only"


class RuleLock(IntEnum):
    """A rule that a check and the write after it must keep across concurrent transactions; its
    value is its PostgreSQL advisory lock key (see hold_rule)."""

    user_names = 1
    active_admins = 2


# The first key of PostgreSQL's two-key advisory locks, so that another application sharing
# the database with its own advisory locks cannot collide with ours.
_ADVISORY_NAMESPACE = 0x5374_6570  # "Step"


def hold_rule(session: Session, rule: RuleLock) -> None:
    """Wait until no other transaction is checking `rule`, and keep others waiting until this one
    ends. Without it, two transactions under READ COMMITTED each check, see nothing of the other's
    uncommitted write, and both write. SQLite needs nothing: BEGIN IMMEDIATE already serialises
    every writing transaction there."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(_ADVISORY_NAMESPACE, int(rule))))


def named_alike(session: Session, column: InstrumentedAttribute[str], name: str) -> list[Any]:
    """The row whose `column` is exactly `name`, else those of that name in another case (two at
    most): names of users and projects are one name whatever their case (create_user,
    create_project), but a database may hold two from before that rule."""
    table = column.class_
    exact = session.scalar(select(table).where(column == name))
    if exact is not None:
        return [exact]
    return list(session.scalars(select(table).where(func.lower(column) == name.lower()).limit(2)))


def one_named(session: Session, column: InstrumentedAttribute[str], name: str, kind: str) -> Any:
    """named_alike's one row; NotFound for none, Conflict for two names alike but for case."""
    alike = named_alike(session, column, name)
    if not alike:
        raise NotFound(f"no {kind} named {name!r}")
    if len(alike) > 1:
        raise Conflict(f"several {kind}s are named {name!r} in different cases: give the name exactly")
    return alike[0]


def create_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session], *, reads_only: bool = False) -> Iterator[Session]:
    """A session in one transaction, committed at the end, rolled back on any error.
    `reads_only`: for a session that writes nothing and may last, as a streamed export does: on
    SQLite it holds the write lock for as long, and every labeler's submit waited on it."""
    session = factory()
    if reads_only:
        session.connection(execution_options={_READS_ONLY: True})
    try:
        yield session
        session.commit()
    except BaseException:
        # Detached first, loaded objects keep their values: a rollback would expire them, and
        # the error page rendered after this needs the logged-in user it already loaded.
        session.expunge_all()
        session.rollback()
        raise
    finally:
        session.close()


def end_reads(session: Session) -> None:
    """End the session's transaction early, so that its connection goes back to the pool
    instead of idling in a transaction while the request works on (scoring with a model, for
    seconds). Loaded objects keep their values (the factory does not expire on commit);
    `session_scope`'s commit at the end then has nothing to do."""
    session.commit()


async def in_transaction(request: Request, work: Callable[[Session], T]) -> T:
    """`work(session)` in one `session_scope`, in one worker thread, committed on return.

    For the hot path (next-task, submit): a SessionDep endpoint crosses to a worker thread
    four times (its caller's lookup, its body, the check of its answer, the commit). Crossing
    once took a fifth off the server's CPU per next + submit pair, and served 1.27x the labels
    at 16 labelers (three alternating same-day runs). Not cancelled when the client goes: a
    label being stored is stored. At most STEPWISE_LABELING_CONCURRENCY of them run at once
    (see app.config).
    """

    def run() -> T:
        with session_scope(request.app.state.session_factory) as session:
            return work(session)

    return await anyio.to_thread.run_sync(run, limiter=request.app.state.hot_path_limiter)


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's session, through `session_scope`.

    Entering makes a Session object and opens no connection, so it happens on the event loop;
    leaving commits or rolls back, which waits on the database, so it runs in a worker thread
    as FastAPI runs a plain generator's exit: shielded from cancellation, and outside the
    threadpool's capacity limit, so that a full pool cannot keep a connection from coming back.
    A plain generator would also enter in a thread: one more hop for every request.
    """
    scope = session_scope(request.app.state.session_factory)
    session = scope.__enter__()
    exit_limiter = anyio.CapacityLimiter(1)
    try:
        yield session
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            handled = await anyio.to_thread.run_sync(
                scope.__exit__, type(exc), exc, exc.__traceback__, limiter=exit_limiter
            )
        if not handled:
            raise
    else:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(scope.__exit__, None, None, None, limiter=exit_limiter)
