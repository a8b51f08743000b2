"""Round workers. `stepwise worker` on PostgreSQL runs procrastinate's worker; on SQLite, and in
the embedded server's thread, a loop polls the rounds table. Both run the same jobs
(`app.rounds.stages.run_round`, and `app.rounds.comparison.run_comparison` for comparisons of two
model versions) and the same sweep: start due triggers, find rounds and comparisons that are
queued or whose worker died, and clear away what cancelled rounds and dead workers left.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import create_db_engine, create_session_factory, session_scope
from app.models import ACTIVE_ROUND_STATUSES, ComparisonStatus, ModelComparison, Round, RoundStage, RoundStatus, utcnow
from app.ops.service import driver_reason
from app.rounds.config import WorkerSettings, get_worker_settings
from app.rounds.lease import runnable_rounds, worker_name
from app.rounds.triggers import start_due_rounds

if TYPE_CHECKING:
    from procrastinate import App

log = logging.getLogger("stepwise.rounds")


def sweep(factory: sessionmaker[Session], worker: WorkerSettings) -> list[int]:
    """Start due rounds, drop cancelled rounds' unfinished checkpoints; return the ids of rounds
    waiting for a worker."""
    with session_scope(factory) as session:
        for round_ in start_due_rounds(session):
            log.info("round %s of project %s started by %s", round_.number, round_.project_id,
                     round_.trigger.value)
    drop_cancelled_checkpoints(factory, worker)
    with session_scope(factory) as session:
        return runnable_rounds(session)


def drop_cancelled_checkpoints(factory: sessionmaker[Session], worker: WorkerSettings) -> None:
    """A round cancelled in training leaves its checkpoint, whole or a snapshot, on disk no
    version points to (a version is recorded in the step that leaves training). Its own worker
    removes it, unless that worker was dead when the round was cancelled. A lease after the
    cancel, a live worker has stopped writing there."""
    with session_scope(factory) as session:
        rounds = session.execute(
            select(Round.project_id, Round.number).where(
                Round.status == RoundStatus.cancelled, Round.stage == RoundStage.train,
                Round.finished_at < utcnow() - timedelta(seconds=worker.round_lease_s))).all()
    for project_id, number in rounds:
        # RoundRun.checkpoint_dir, and train()'s folder beside it.
        output = worker.models_dir / f"project-{project_id}" / f"round-{number}"
        for folder in (output, output.with_name(output.name + ".partial")):
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
                log.info("removed %s: its round was cancelled", folder)


def waiting_comparisons(factory: sessionmaker[Session]) -> list[int]:
    from app.rounds.comparison import runnable_comparisons

    with session_scope(factory) as session:
        return runnable_comparisons(session)


def run_comparisons(factory: sessionmaker[Session], comparison_ids: list[int],
                    stop: threading.Event | None = None) -> None:
    from app.rounds.comparison import run_comparison

    for comparison_id in comparison_ids:
        if stop is not None and stop.is_set():
            return
        run_comparison(factory, comparison_id)


def run_rounds(factory: sessionmaker[Session], round_ids: list[int], worker: WorkerSettings,
               owner: str, stop: threading.Event | None = None) -> None:
    # Imported here: torch and transformers cost seconds, and an idle server never needs them.
    from app.rounds.stages import run_round

    for round_id in round_ids:
        if stop is not None and stop.is_set():
            return
        run_round(factory, round_id, owner, worker)


class LocalWorker:
    """Polls for rounds in a thread: the embedded server's worker, and `stepwise worker` on
    SQLite. Leases make several of them (several server processes) safe together."""

    def __init__(self, factory: sessionmaker[Session], worker: WorkerSettings | None = None) -> None:
        self.factory = factory
        self.worker = worker or get_worker_settings()
        self.owner = worker_name()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        ids = sweep(self.factory, self.worker)
        if ids:
            run_rounds(self.factory, ids, self.worker, self.owner, self._stop)
        comparisons = waiting_comparisons(self.factory)
        run_comparisons(self.factory, comparisons, self._stop)
        return len(ids) + len(comparisons)

    def run_forever(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception as exc:  # noqa: BLE001 - the worker outlives any one sweep
                log_failed_sweep("round worker sweep", exc)
                busy = 0
            if not busy:
                self._stop.wait(self.worker.worker_poll_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run_forever, name="round-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        # A round in the middle of training does not stop for this; its lease runs out and the
        # next worker continues it.
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def start_local_worker(settings: Settings, factory: sessionmaker[Session]) -> LocalWorker | None:
    """The embedded server's round worker: SQLite only, and only if not turned off."""
    worker = get_worker_settings()
    if not settings.is_sqlite or not worker.local_worker:
        return None
    local = LocalWorker(factory, worker)
    local.start()
    return local


@lru_cache
def _factory(database_url: str) -> sessionmaker[Session]:
    return create_session_factory(create_db_engine(Settings(database_url=database_url)))


# Set while a job of this process's runs (procrastinate runs one at a time here): a worker asked
# to stop during an outage lets a round end, and waits for nothing else.
_job_running = threading.Event()


@contextmanager
def _running_job() -> Iterator[None]:
    _job_running.set()
    try:
        yield
    finally:
        _job_running.clear()


def run_one(database_url: str, round_id: int) -> None:
    """The body of the PostgreSQL job."""
    with _running_job():
        run_rounds(_factory(database_url), [round_id], get_worker_settings(), worker_name())


def compare_one(database_url: str, comparison_id: int) -> None:
    """The body of the PostgreSQL comparison job."""
    from app.rounds.comparison import run_comparison

    with _running_job():
        run_comparison(_factory(database_url), comparison_id)


# Seconds between a PostgreSQL worker's looks for a queued job.
JOB_POLL_S = 2
# Seconds a worker asked to stop, and running no job, gives procrastinate to end its job loop
# (it unregisters the worker on the way out) before closing the loop's connections under it: in
# an outage the loop waits 30 s for a connection, twice, where a healthy database ends it at once.
STOP_GRACE_S = 5


class StopSignals:
    """SIGTERM and SIGINT for the whole life of a PostgreSQL worker, the database down or not:
    the first asks it to stop (a round in progress ends first), a second stops it at once.
    Procrastinate's own handlers would cover its job loop only, not the loop's start nor the
    waits between two of its runs, and a stop they took would be lost to the next run."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        # Called, in the main thread, on the first signal: ends the job loop running then.
        self.on_stop: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *_: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: object) -> None:
        if self.requested.is_set():
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        log.info("stop requested (%s)", signal.Signals(signum).name)
        self.requested.set()
        if self.on_stop is not None:
            self.on_stop()


# What the driver says of a PostgreSQL that is down, starting, stopping, full or closed to
# connections (ALLOW_CONNECTIONS false), all of which pass. Anything else (no such database or
# role, a refused password, an unknown host) is the configuration's, which no wait mends.
_PASSING = ("connection refused", "no such file or directory", "is not currently accepting connections",
            "the database system is", "too many clients", "remaining connection slots", "timeout expired",
            "connection timed out", "server closed the connection", "could not receive data")
# The longest wait between two tries for a database that does not answer.
DATABASE_WAIT_MAX_S = 30


def wait_for_database(settings: Settings) -> bool:
    """Wait for a PostgreSQL that does not answer yet, trying again with a back-off, as the
    server waits for it. True once it answers, or fails for a reason that waiting would not
    mend (the caller's check names it); False when a stop is asked for meanwhile."""
    if settings.is_sqlite:
        return True
    import psycopg

    from app.db import connect_timeout_args
    from app.rounds.jobs import conninfo

    delay = 1
    with StopSignals() as signals:
        while True:
            try:
                psycopg.connect(conninfo(settings.database_url), **connect_timeout_args(settings.database_url)).close()
                return True
            except psycopg.OperationalError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if not any(words in str(exc).lower() for words in _PASSING):
                    return True
            log.warning("waiting for the database: %s; trying again in %s s", reason, delay)
            if signals.requested.wait(delay):
                return False
            delay = min(delay * 2, DATABASE_WAIT_MAX_S)


def run_postgres_worker(settings: Settings, once: bool = False) -> None:
    import psycopg
    from procrastinate.exceptions import ConnectorException

    from app.rounds.jobs import QUEUE, make_job_app, queue_comparisons, revive, sender

    worker = get_worker_settings()
    factory = _factory(settings.database_url)
    # The sweeper thread talks to the queue through its own synchronous pool: the worker's
    # asynchronous one belongs to the worker's event loop.
    queue = sender(settings.database_url)
    stop = threading.Event()

    def sweep_once() -> None:
        revive(queue, sweep(factory, worker))
        queue_comparisons(queue, waiting_comparisons(factory))
        finish_orphaned_jobs(queue, settings.database_url, factory, worker)

    def sweeper() -> None:
        while True:
            try:
                sweep_once()
            except Exception as exc:  # noqa: BLE001 - the worker outlives any one sweep
                log_failed_sweep("round sweep", exc)
            if stop.wait(worker.worker_poll_s):
                return

    if once:
        sweep_once()
    else:
        threading.Thread(target=sweeper, name="round-sweeper", daemon=True).start()
    with StopSignals() as signals:
        try:
            while not signals.requested.is_set():
                try:
                    asyncio.run(_job_loop(
                        make_job_app(settings.database_url), signals,
                        queues=[QUEUE],
                        concurrency=1,
                        wait=not once,
                        # Polled, not listened for: procrastinate's listener (3.10) dies with its
                        # connection in a database outage and is not started again, leaving a
                        # worker that polls all the same, with a traceback when it stops. A round
                        # waits at most this long.
                        listen_notify=False,
                        fetch_job_polling_interval=JOB_POLL_S,
                        delete_jobs="successful",
                        update_heartbeat_interval=worker.round_lease_s / 3,
                        stalled_worker_timeout=worker.round_lease_s,
                    ))
                    return
                except (ConnectorException, psycopg.OperationalError) as exc:
                    # procrastinate's job loop ends on a query that fails, as one does once an
                    # outage outlasts the pool's 30 s wait for a connection. Rounds and their
                    # leases are in the database: the worker starts again rather than leave the
                    # queue unserved, unless it was asked to stop, which is what ended the loop.
                    if signals.requested.is_set():
                        return
                    if once:
                        raise
                    log.warning("the job queue lost the database; starting again in %s s (%s)",
                                worker.worker_poll_s, driver_reason(exc.__cause__ or exc))  # type: ignore[arg-type]
                    signals.requested.wait(worker.worker_poll_s)
        finally:
            stop.set()


async def _job_loop(app: App, signals: StopSignals, **options: Any) -> None:
    """One run of procrastinate's worker, which a stop request ends as procrastinate's own
    signal handler would: no job is taken after it, and the one running ends first."""
    from procrastinate import PsycopgConnector

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    connector = app.connector
    assert task is not None and isinstance(connector, PsycopgConnector)

    def stop_now() -> None:
        task.cancel()
        closing.append(loop.call_later(STOP_GRACE_S, close_if_idle))

    def close_if_idle() -> None:
        # Waiters for a connection fail at once on a closed pool, rather than after its timeout.
        if not _job_running.is_set():
            loop.create_task(connector.pool.close())

    closing: list[asyncio.TimerHandle] = []
    signals.on_stop = lambda: loop.call_soon_threadsafe(stop_now)
    try:
        if signals.requested.is_set():
            return
        async with app.open_async():
            await app.run_worker_async(install_signal_handlers=False, **options)
    except asyncio.CancelledError:
        if not signals.requested.is_set():
            raise
    finally:
        signals.on_stop = None
        for handle in closing:
            handle.cancel()


def finish_orphaned_jobs(queue: App, database_url: str, factory: sessionmaker[Session],
                         worker: WorkerSettings) -> None:
    """End the jobs that dead workers left `doing` for rounds and comparisons that are over
    (cancelled, say): revive() retries those of rounds still to run, and nothing else would end
    these. Procrastinate prunes dead workers' rows only as a worker starts, which misses one
    that died less than a lease before; pruned here, its jobs lose their worker."""
    from procrastinate.exceptions import ConnectorException

    from app.rounds.jobs import RUN_COMPARISON, RUN_ROUND

    asyncio.run(_prune_dead_workers(database_url, worker.round_lease_s))
    orphans = [job for job in queue.job_manager.list_jobs(status="doing") if job.worker_id is None]
    if not orphans:
        return
    with session_scope(factory) as session:
        open_rounds = set(session.scalars(select(Round.id).where(Round.status.in_(ACTIVE_ROUND_STATUSES))))
        open_comparisons = set(session.scalars(select(ModelComparison.id).where(
            ModelComparison.status.in_((ComparisonStatus.queued, ComparisonStatus.running)))))
    for job in orphans:
        assert job.id is not None
        if job.task_name == RUN_ROUND and job.task_kwargs.get("round_id") in open_rounds or \
                job.task_name == RUN_COMPARISON and job.task_kwargs.get("comparison_id") in open_comparisons:
            continue
        try:
            # A `doing` job asked to abort fails when retried: procrastinate's one way, short of
            # its worker, to end a job in hand.
            queue.job_manager.cancel_job_by_id(job.id, abort=True)
            queue.job_manager.retry_job_by_id(job.id, retry_at=datetime.now(UTC))
        except ConnectorException:
            # Another worker's sweep ended it first.
            continue
        log.info("job %s (%s %s) of a dead worker marked failed: its work is over", job.id,
                 job.task_name, job.task_kwargs)


async def _prune_dead_workers(database_url: str, lease_s: float) -> None:
    from app.rounds.jobs import make_job_app

    async with make_job_app(database_url, pool_size=1).open_async() as app:
        await app.job_manager.prune_stalled_workers(lease_s)


def warm_up() -> None:
    """Import what a round runs on (torch and transformers: seconds, tens on a busy machine)
    while the worker waits for its first round, rather than while that round holds its lease.
    A round claimed meanwhile waits for the same import, not for a second one."""
    def load() -> None:
        start = time.monotonic()
        import app.rounds.stages  # noqa: F401

        log.info("torch and transformers loaded in %.1f s", time.monotonic() - start)

    threading.Thread(target=load, name="round-warm-up", daemon=True).start()


def run_worker(settings: Settings, once: bool = False) -> None:
    """`stepwise worker`."""
    if not once:
        warm_up()
    if not settings.is_sqlite:
        run_postgres_worker(settings, once)
        return
    local = LocalWorker(_factory(settings.database_url))
    if once:
        local.run_once()
    else:
        local.run_forever()


def run_here(settings: Settings, round_id: int, waiting: Callable[[str], None] = log.info) -> tuple[str, bool]:
    """Run one round in this process (`stepwise rounds start --wait`) to its end: its outcome
    in a line, and whether it is done. A worker that claimed it first (a server's own, polling
    SQLite) is waited for, said through `waiting`; should it die, this process takes the round
    over. An error to be retried is said, and the round tried again here once the retry is due
    (or by whichever worker claims it first)."""
    from app.models import Round, RoundStatus
    from app.rounds.stages import run_round

    factory = _factory(settings.database_url)
    worker = get_worker_settings()
    owner = worker_name()

    def run() -> RoundStatus | None:
        status = run_round(factory, round_id, owner, worker)
        return None if status == RoundStatus.queued else status

    def describe(round_: Round) -> str:
        if round_.status == RoundStatus.queued and round_.retry_at is not None:
            return f"round {round_.number}: {round_.message}"
        return f"round {round_.number}: {round_.lease_owner or 'another worker'} runs it; waiting for it to end"

    _run_or_wait(run, _while_open(factory, Round, round_id, describe), waiting)
    with session_scope(factory) as session:
        round_ = session.get(Round, round_id)
        assert round_ is not None
        # A failed round's message says so itself ("failed: …", "failed at train after …").
        said = round_.message if round_.message.startswith(round_.status.value) else \
            f"{round_.status.value}: {round_.message}"
        return f"round {round_.number}: {said}", round_.status == RoundStatus.done


def compare_here(factory: sessionmaker[Session], comparison_id: int, waiting: Callable[[str], None] = log.info) -> None:
    """Measure a comparison in this process (`stepwise rounds compare`), or wait for the worker
    that claimed it first, said once through `waiting`; a claim gone stale is taken over."""
    from app.models import ModelComparison
    from app.rounds.comparison import run_comparison

    _run_or_wait(
        lambda: run_comparison(factory, comparison_id),
        _while_open(factory, ModelComparison, comparison_id,
                    lambda c: f"a worker is measuring this comparison (id {c.id}); waiting for it to end"),
        waiting)


def _while_open(factory: sessionmaker[Session], model: type[Any], row_id: int,
                describe: Callable[[Any], str]) -> Callable[[], str | None]:
    """_run_or_wait's `holder` for a round or a comparison: `describe(row)` while the row is
    queued or running (both kinds name those states alike), None once it is over."""
    def holder() -> str | None:
        with session_scope(factory) as session:
            row = session.get(model, row_id)
            assert row is not None
            return describe(row) if row.status in ("queued", "running") else None

    return holder


def _run_or_wait(run: Callable[[], object | None], holder: Callable[[], str | None],
                 waiting: Callable[[str], None]) -> None:
    """Call `run` until it claims the work and ends it (it answers None while another worker
    holds it, or the work waits for a retry); meanwhile wait, saying each new reason once.
    `holder` says why it waits, None once the work is over. A holder that dies leaves a stale
    claim, which `run` then takes over."""
    said = None
    while run() is None:
        held = holder()
        if held is None:
            return
        if held != said:
            waiting(held)
            said = held
        time.sleep(get_worker_settings().worker_poll_s)


def log_failed_sweep(what: str, exc: Exception) -> None:
    """One line for a database down or without its schema, which the next sweep retries and a
    traceback every poll would only bury; a traceback for anything else, which is a bug. The
    queue's own connections (procrastinate's, psycopg's pool) fail in their own words."""
    import psycopg
    from procrastinate.exceptions import ConnectorException

    if isinstance(exc, (OperationalError, ProgrammingError, psycopg.OperationalError, ConnectorException)):
        log.warning("%s failed, trying again: the database is not available or not migrated (%s)",
                    what, driver_reason(exc.__cause__ or exc if isinstance(exc, ConnectorException) else exc))  # type: ignore[arg-type]
    else:
        log.exception("%s failed; trying again", what)
