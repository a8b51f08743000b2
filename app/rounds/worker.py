"""Round workers. `stepwise worker` on PostgreSQL runs procrastinate's worker; on SQLite, and in
the embedded server's thread, a loop polls the rounds table. Both run the same jobs
(`app.rounds.stages.run_round`, and `app.rounds.comparison.run_comparison` for comparisons of two
model versions) and the same sweep: start due triggers, and find rounds and comparisons that are
queued or whose worker died.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import create_db_engine, create_session_factory, session_scope
from app.ops.service import driver_reason
from app.rounds.config import WorkerSettings, get_worker_settings
from app.rounds.lease import runnable_rounds, worker_name
from app.rounds.triggers import start_due_rounds

log = logging.getLogger("stepwise.rounds")


def sweep(factory: sessionmaker[Session]) -> list[int]:
    """Start due rounds; return the ids of rounds waiting for a worker."""
    with session_scope(factory) as session:
        for round_ in start_due_rounds(session):
            log.info("round %s of project %s started by %s", round_.number, round_.project_id,
                     round_.trigger.value)
    with session_scope(factory) as session:
        return runnable_rounds(session)


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
        ids = sweep(self.factory)
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


def run_one(database_url: str, round_id: int) -> None:
    """The body of the PostgreSQL job."""
    run_rounds(_factory(database_url), [round_id], get_worker_settings(), worker_name())


def compare_one(database_url: str, comparison_id: int) -> None:
    """The body of the PostgreSQL comparison job."""
    from app.rounds.comparison import run_comparison

    run_comparison(_factory(database_url), comparison_id)


# Seconds between a PostgreSQL worker's looks for a queued job.
JOB_POLL_S = 2


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
        revive(queue, sweep(factory))
        queue_comparisons(queue, waiting_comparisons(factory))

    def sweeper() -> None:
        while not stop.wait(worker.worker_poll_s):
            try:
                sweep_once()
            except Exception as exc:  # noqa: BLE001 - the worker outlives any one sweep
                log_failed_sweep("round sweep", exc)

    sweep_once()
    if not once:
        threading.Thread(target=sweeper, name="round-sweeper", daemon=True).start()
    try:
        while True:
            try:
                make_job_app(settings.database_url).run_worker(
                    queues=[QUEUE],
                    concurrency=1,
                    wait=not once,
                    # Polled, not listened for: procrastinate's listener (3.10) dies with its
                    # connection in a database outage and is not started again, leaving a worker
                    # that polls all the same, with a traceback when it stops. A round waits at
                    # most this long.
                    listen_notify=False,
                    fetch_job_polling_interval=JOB_POLL_S,
                    delete_jobs="successful",
                    update_heartbeat_interval=worker.round_lease_s / 3,
                    stalled_worker_timeout=worker.round_lease_s,
                )
                return
            except (ConnectorException, psycopg.OperationalError) as exc:
                # procrastinate's job loop ends on a query that fails, as one does once an outage
                # outlasts the pool's 30 s wait for a connection. Rounds and their leases are in
                # the database: the worker starts again rather than leave the queue unserved.
                if once:
                    raise
                log.warning("the job queue lost the database; starting again in %s s (%s)",
                            worker.worker_poll_s, driver_reason(exc.__cause__ or exc))  # type: ignore[arg-type]
                if not _wait_unless_stopped(worker.worker_poll_s):
                    return
    finally:
        stop.set()


def _wait_unless_stopped(seconds: float) -> bool:
    """Waits `seconds`; False as soon as SIGTERM or SIGINT comes, which stops the worker between
    two runs of procrastinate's, whose own handlers are gone then."""
    stopped = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return not stopped.wait(seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
    traceback every poll would only bury; a traceback for anything else, which is a bug."""
    if isinstance(exc, (OperationalError, ProgrammingError)):
        log.warning("%s failed, trying again: the database is not available or not migrated (%s)",
                    what, driver_reason(exc))
    else:
        log.exception("%s failed; trying again", what)
