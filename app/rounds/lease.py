"""Which worker runs a round: a lease in the round's row, renewed while the worker lives.

A worker claims a round by writing its name and an expiry into the row, in one conditional
UPDATE, so two workers never both win. Every stage ends with a transaction that checks the
lease is still ours before it records the stage, so a worker that lost its lease (it froze, the
round was cancelled) changes nothing. A killed worker simply stops renewing; once the lease
runs out, any worker may claim the round and continue from its recorded stage.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Round, RoundStage, RoundStatus, utcnow
from app.rounds.config import get_worker_settings


def stale_claim() -> timedelta:
    """How long a comparison's claim lasts unrenewed: a round's lease. The measuring worker
    renews it three times as often, so an older one belongs to a worker that died, and another
    measures the comparison again (a comparison only reads, so measuring twice is harmless)."""
    return timedelta(seconds=get_worker_settings().round_lease_s)


class LeaseLost(Exception):
    """The round was cancelled or taken over; the worker must stop touching it."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _claimable(now: datetime) -> ColumnElement[bool]:
    """Queued rounds whose retry (if any) is due, and running ones whose worker has stopped
    renewing its lease."""
    return or_(
        (Round.status == RoundStatus.queued) & or_(Round.retry_at.is_(None), Round.retry_at <= now),
        (Round.status == RoundStatus.running)
        & or_(Round.lease_expires_at.is_(None), Round.lease_expires_at < now),
    )


def runnable_rounds(session: Session) -> list[int]:
    return list(session.scalars(select(Round.id).where(_claimable(utcnow())).order_by(Round.id)))


def claim(session: Session, round_id: int, owner: str, lease_s: float) -> bool:
    now = utcnow()
    result = session.execute(
        update(Round)
        .where(Round.id == round_id, _claimable(now))
        .values(
            status=RoundStatus.running,
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_s),
            attempts=Round.attempts + 1,
            retry_at=None,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return False
    session.execute(
        update(Round)
        .where(Round.id == round_id, Round.started_at.is_(None))
        .values(started_at=now)
        .execution_options(synchronize_session=False)
    )
    return True


def advance(
    session: Session, round_id: int, owner: str, stage: RoundStage, to: RoundStage, **values: Any
) -> None:
    """Record that `stage` is done, in the caller's transaction, if the lease is still ours."""
    result = session.execute(
        update(Round)
        .where(
            Round.id == round_id,
            Round.lease_owner == owner,
            Round.status == RoundStatus.running,
            Round.stage == stage,
        )
        .values(stage=to, updated_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise LeaseLost(f"round {round_id} is no longer ours at stage {stage.value}")


def report(session: Session, round_id: int, owner: str, **values: Any) -> None:
    """Progress (percent, ETA, message) within a stage; also proves the lease is ours."""
    result = session.execute(
        update(Round)
        .where(Round.id == round_id, Round.lease_owner == owner, Round.status == RoundStatus.running)
        .values(updated_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise LeaseLost(f"round {round_id} is no longer ours")


def finish(session: Session, round_id: int, owner: str, stage: RoundStage, message: str) -> None:
    now = utcnow()
    advance(
        session, round_id, owner, stage, RoundStage.done,
        status=RoundStatus.done, percent=100.0, eta_at=None, message=message,
        finished_at=now, lease_owner=None, lease_expires_at=None,
    )


def fail(session: Session, round_id: int, owner: str, message: str, error: str | None = None) -> None:
    """Fails the round for good, with no retry. `error` is given when an attempt failed on one
    (a base no attempt can load, training that diverged): it is kept and counted as
    give_up_or_retry keeps and counts one, so that the API's `error` and `failures` agree with the
    message. A round whose workers kept dying failed on none, and is given none."""
    now = utcnow()
    on_error = {} if error is None else {"error": _clip(error, ERROR_CHARS), "failures": Round.failures + 1,
                                         "retry_at": None}
    report(session, round_id, owner, status=RoundStatus.failed, message=_clip(message, MESSAGE_CHARS),
           finished_at=now, eta_at=None, lease_owner=None, lease_expires_at=None, **on_error)


MESSAGE_CHARS = 500  # Round.message's column
ERROR_CHARS = 4000  # kept of an error: Round.error is text, but a page shows it whole


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The longest wait between attempts, however many a deployment allows.
MAX_RETRY_DELAY = timedelta(hours=1)


def retry_delay(failures: int, retry_after_s: float) -> timedelta:
    """How long a round waits after its `failures`-th failed attempt: `retry_after_s`, doubled
    for each failure before it, so that what made it fail (a Hub or a disk) has time to mend; an
    hour at most."""
    return min(timedelta(seconds=retry_after_s * 2 ** min(max(0, failures - 1), 20)), MAX_RETRY_DELAY)


def give_up_or_retry(
    factory: sessionmaker[Session], round_id: int, owner: str, error: str, max_attempts: int,
    retry_after_s: float,
) -> RoundStatus | None:
    """After an error: back to the queue, claimed again after `retry_delay`, while failed
    attempts remain (a worker killed mid-round failed none), else failed for good. `error`, the exception in one line, is kept and goes into the
    message: what a researcher needs, and all that the pages and the API show. The traceback,
    with the server's paths, stays in the worker's log."""
    with session_scope(factory) as session:
        round_ = session.scalar(
            select(Round).where(Round.id == round_id, Round.lease_owner == owner).with_for_update()
        )
        if round_ is None or round_.status != RoundStatus.running:
            return None
        now = utcnow()
        round_.error = _clip(error, ERROR_CHARS)
        round_.lease_owner = None
        round_.lease_expires_at = None
        round_.updated_at = now
        round_.eta_at = None
        round_.failures += 1
        if round_.failures >= max_attempts:
            round_.status = RoundStatus.failed
            round_.finished_at = now
            message = f"failed at {round_.stage.value} after {round_.failures} failed attempts"
        else:
            round_.status = RoundStatus.queued
            round_.retry_at = now + retry_delay(round_.failures, retry_after_s)
            message = f"error at {round_.stage.value}; will retry at {round_.retry_at:%H:%M:%S} UTC"
        round_.message = _clip(f"{message}: {error}", MESSAGE_CHARS)
        return round_.status


class Heartbeat:
    """Calls `beat` in a transaction of its own every `every_s` seconds, from a thread, while
    the worker's main work (training, measuring) runs. `beat` raises LeaseLost once the work is
    no longer this worker's; the heartbeat then stops and says so in `lost`."""

    def __init__(self, factory: sessionmaker[Session], every_s: float, beat: Callable[[Session], None],
                 name: str) -> None:
        self.factory, self.every_s, self.beat = factory, every_s, beat
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                with session_scope(self.factory) as session:
                    self.beat(session)
            except LeaseLost:
                self.lost = True
                return
            except Exception:  # noqa: BLE001 - a database hiccup: try again next beat
                continue


def lease_keeper(factory: sessionmaker[Session], round_id: int, owner: str, lease_s: float,
                 on_beat: Callable[[Session], None] | None = None) -> Heartbeat:
    """Renews the round's lease three times a lease, and runs `on_beat` with each renewal."""

    def beat(session: Session) -> None:
        report(session, round_id, owner, lease_expires_at=utcnow() + timedelta(seconds=lease_s))
        if on_beat is not None:
            on_beat(session)

    return Heartbeat(factory, lease_s / 3, beat, f"lease-round-{round_id}")
