"""The PostgreSQL job queue (procrastinate): it wakes workers, it does not hold round state.

A round is one `run_round(round_id)` job, a comparison of two model versions one
`run_comparison(comparison_id)` job. A queueing lock keeps one waiting job for each; the round's
own lease (app.rounds.lease), or the comparison's claim, keeps one worker on it. Procrastinate's tables live in
their own schema (see migration 0002), so its connections search that schema.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache

from procrastinate import App, PsycopgConnector
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

log = logging.getLogger("stepwise.rounds")

JOB_QUEUE_SCHEMA = "procrastinate"
# procrastinate's newest schema migration that our migrations' job queue schema includes: see
# pyproject.toml's note on procrastinate.
JOB_QUEUE_SCHEMA_MIGRATION = "03.04.00_50_post_add_retry_failed_job_procedure"
QUEUE = "rounds"
RUN_ROUND = "stepwise.run_round"
RUN_COMPARISON = "stepwise.run_comparison"


def conninfo(database_url: str) -> str:
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def make_job_app(database_url: str, *, pool_size: int = 2) -> App:
    connector = PsycopgConnector(
        conninfo=conninfo(database_url),
        min_size=1,
        max_size=pool_size,
        kwargs={"options": f"-c search_path={JOB_QUEUE_SCHEMA}"},
    )
    app = App(connector=connector)

    @app.task(name=RUN_ROUND, queue=QUEUE)
    def run_round_job(round_id: int) -> None:
        from app.rounds.worker import run_one

        run_one(database_url, round_id)

    @app.task(name=RUN_COMPARISON, queue=QUEUE)
    def run_comparison_job(comparison_id: int) -> None:
        from app.rounds.worker import compare_one

        compare_one(database_url, comparison_id)

    return app


@lru_cache
def sender(database_url: str) -> App:
    """This process's connection to the queue, for deferring jobs (opened once, kept)."""
    return make_job_app(database_url, pool_size=1).open()


def defer_round(app: App, round_id: int) -> bool:
    """Queue a job for the round; False when one is already waiting."""
    try:
        app.configure_task(RUN_ROUND, queueing_lock=f"round-{round_id}").defer(round_id=round_id)
    except AlreadyEnqueued:
        return False
    return True


def defer_comparison(app: App, comparison_id: int) -> bool:
    """Queue a job for the comparison; False when one is already waiting."""
    try:
        app.configure_task(RUN_COMPARISON, queueing_lock=f"comparison-{comparison_id}").defer(
            comparison_id=comparison_id)
    except AlreadyEnqueued:
        return False
    return True


def wake_after_commit(session: Session, round_id: int) -> None:
    """Wake a worker for the round once the transaction that created it has committed."""
    _after_commit(session, lambda app: defer_round(app, round_id), f"round {round_id}")


def wake_comparison_after_commit(session: Session, comparison_id: int) -> None:
    """Wake a worker for the comparison once the transaction that queued it has committed."""
    _after_commit(session, lambda app: defer_comparison(app, comparison_id), f"comparison {comparison_id}")


def _after_commit(session: Session, defer: Callable[[App], bool], what: str) -> None:
    """On SQLite nothing is needed: the local worker polls. If deferring fails, the workers'
    sweep finds the queued work within a poll interval anyway."""
    bind = session.get_bind()
    if bind.dialect.name != "postgresql":
        return
    url = bind.url.render_as_string(hide_password=False)

    def _defer(_session: Session) -> None:
        try:
            defer(sender(url))
        except Exception:  # noqa: BLE001 - the sweep is the fallback; the request succeeded
            log.warning("could not queue a job for %s; the sweep will", what, exc_info=True)

    event.listen(session, "after_commit", _defer, once=True)


def revive(app: App, round_ids: list[int]) -> None:
    """Get a job onto every runnable round: retry the job of a worker that died holding it,
    or queue a new one."""
    doing = {
        job.task_kwargs.get("round_id"): job.id
        for job in app.job_manager.list_jobs(task=RUN_ROUND, status="doing")
    }
    for round_id in round_ids:
        job_id = doing.get(round_id)
        try:
            if job_id is not None:
                app.job_manager.retry_job_by_id(job_id, retry_at=datetime.now(UTC))
            else:
                defer_round(app, round_id)
        except ConnectorException:
            # A job for the round is already waiting: nothing to add.
            continue


def queue_comparisons(app: App, comparison_ids: list[int]) -> None:
    """Get a job onto every comparison waiting for a worker (queued, or claimed by one that
    died); one already waiting is left as it is."""
    for comparison_id in comparison_ids:
        defer_comparison(app, comparison_id)
