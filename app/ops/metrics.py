"""Prometheus metrics, added up over every server process.

`stepwise serve --workers N` gives each process a file of its own under PROMETHEUS_MULTIPROC_DIR
(made per start by app.server); a scrape, answered by whichever process the kernel picks, merges
them all. prometheus_client reads that variable when it is first imported, so the server sets it
before its workers start.

No metric carries user data: requests are labelled by route template, never by path, and the
queue by project id.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Assignment, AssignmentStatus, Project, Round, RoundStatus
from app.models.base import utcnow

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUESTS = Counter(
    "stepwise_http_requests_total", "HTTP requests answered", ["method", "route", "status"]
)
REQUEST_SECONDS = Histogram(
    "stepwise_http_request_duration_seconds",
    "Time to answer an HTTP request",
    ["method", "route"],
    # Next-task and submit answer in milliseconds; exports and imports in seconds or minutes.
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LABELS_SUBMITTED = Counter(
    "stepwise_labels_submitted_total", "Labels stored (a resent idempotency key not counted)", ["finish_reason"]
)
ROUND_STAGE_SECONDS = Histogram(
    "stepwise_round_stage_duration_seconds",
    "Time a round stage took, in the process that ran it",
    ["stage"],
    buckets=(1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 43200),
)
ROUND_STAGE_FAILURES = Counter(
    "stepwise_round_stage_failures_total", "Round stages that raised an error", ["stage"]
)


class QueueCollector(Collector):
    """Read from the database at scrape time, so every process reports the same numbers."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        waiting = GaugeMetricFamily(
            "stepwise_queue_waiting_slots", "Label slots waiting for a labeler", labels=["project_id"]
        )
        leases = GaugeMetricFamily(
            "stepwise_leases", "Leased slots, by whether the lease has run out", labels=["state"]
        )
        rounds = GaugeMetricFamily("stepwise_rounds", "Rounds by status", labels=["status"])
        stalled = GaugeMetricFamily(
            "stepwise_rounds_stalled", "Running rounds whose worker stopped renewing their lease (killed, or gone)")
        up = GaugeMetricFamily("stepwise_database_up", "1 when the queue's numbers could be read, else 0")
        now = utcnow()
        try:
            with session_scope(self.factory) as session:
                # Every project, an empty queue at 0: a series that vanished at 0 never met an
                # alert on `== 0`.
                counted = (select(Assignment.project_id, func.count().label("slots"))
                           .where(Assignment.status == AssignmentStatus.waiting)
                           .group_by(Assignment.project_id).subquery())
                for project_id, count in session.execute(
                    select(Project.id, func.coalesce(counted.c.slots, 0))
                    .outerjoin(counted, counted.c.project_id == Project.id).order_by(Project.id)
                ):
                    waiting.add_metric([str(project_id)], count)
                expired = Assignment.expires_at < now
                outstanding, past = session.execute(
                    select(func.count(), func.count().filter(expired)).where(Assignment.status == AssignmentStatus.leased)
                ).one()
                by_status = dict(session.execute(select(Round.status, func.count()).group_by(Round.status)).all())
                lost = session.scalar(select(func.count()).select_from(Round).where(
                    Round.status == RoundStatus.running, Round.lease_expires_at < now)) or 0
        except (OperationalError, ProgrammingError):
            # The database down or unmigrated: the process's own counters (the 5xx an alert
            # watches among them) are still worth a scrape; the queue's numbers are left out.
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        leases.add_metric(["active"], outstanding - past)
        leases.add_metric(["expired"], past)
        for status in RoundStatus:
            rounds.add_metric([status.value], by_status.get(status, 0))
        stalled.add_metric([], lost)
        yield waiting
        yield leases
        yield rounds
        yield stalled


def exposition(factory: sessionmaker[Session]) -> bytes:
    """The text a scrape gets: this process's counters (or every process's), then the queue."""
    if os.environ.get(MULTIPROC_ENV):
        merged = CollectorRegistry()
        MultiProcessCollector(merged)
        counters = generate_latest(merged)
    else:
        counters = generate_latest(REGISTRY)
    queue = CollectorRegistry()
    queue.register(QueueCollector(factory))
    return counters + generate_latest(queue)
