from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Enum, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONType, UTCDateTime, utcnow


class RoundStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"


# A round holds its project's slot from the moment it is asked for until it ends.
ACTIVE_ROUND_STATUSES = (RoundStatus.queued, RoundStatus.running)
_ACTIVE_SQL = text("status IN ('queued', 'running')")


class RoundStage(enum.StrEnum):
    """The steps of a round, in order; `stage` names the next one to run."""

    autolabel = "autolabel"
    snapshot = "snapshot"
    train = "train"
    evaluate = "evaluate"
    promote = "promote"
    score = "score"
    select = "select"
    enqueue = "enqueue"
    done = "done"


class RoundTrigger(enum.StrEnum):
    manual = "manual"
    labels = "labels"
    schedule = "schedule"


class Round(Base):
    """One cycle of snapshot → train → evaluate → promote → score → select → enqueue.

    The row is the round's whole state: a worker that dies leaves it here, and the next worker
    continues from `stage` once the lease has run out. The job queue only wakes workers up.
    """

    __tablename__ = "rounds"
    __table_args__ = (
        UniqueConstraint("project_id", "number"),
        # At most one round per project at a time, enforced where two triggers could race.
        Index(
            "uq_rounds_one_active",
            "project_id",
            unique=True,
            postgresql_where=_ACTIVE_SQL,
            sqlite_where=_ACTIVE_SQL,
        ),
        Index("ix_rounds_active", "status", postgresql_where=_ACTIVE_SQL, sqlite_where=_ACTIVE_SQL),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    # The generation its picks are labeled with (PRM800K's `generation`).
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[RoundStatus] = mapped_column(
        Enum(RoundStatus, native_enum=False, length=16), default=RoundStatus.queued
    )
    stage: Mapped[RoundStage] = mapped_column(
        Enum(RoundStage, native_enum=False, length=16), default=RoundStage.autolabel
    )
    percent: Mapped[float] = mapped_column(Float, default=0.0)
    eta_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    message: Mapped[str] = mapped_column(String(500), default="")
    trigger: Mapped[RoundTrigger] = mapped_column(
        Enum(RoundTrigger, native_enum=False, length=16), default=RoundTrigger.manual
    )
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # The label snapshot: every label of the project with id <= snapshot_label_id. Labels are
    # never edited, so the id alone pins the data a resumed round trains on.
    snapshot_label_id: Mapped[int | None] = mapped_column(Integer)
    snapshot_labels: Mapped[int | None] = mapped_column(Integer)
    snapshot_hash: Mapped[str | None] = mapped_column(String(64))
    promoted: Mapped[bool | None] = mapped_column()
    # {"candidate": {...}, "served": {...}, "rule": str, "passed": bool, "picks": {...}}
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    # Claims by a worker, one killed mid-round included (see STEPWISE_ROUND_MAX_CLAIMS), and
    # attempts that failed on an error (STEPWISE_ROUND_MAX_ATTEMPTS).
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A round queued again after an error is not claimed before this: a Hub that cannot be
    # reached, say, is given time to come back instead of three attempts in a second.
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def stage_text(self) -> str:
        """The stage as people read it: a round no worker took yet, queued or cancelled so, has
        reached none."""
        return self.stage.value if self.attempts else "not started"

    @property
    def status_text(self) -> str:
        """The status as people read it: a round that ended without training a model (too few
        labels) says so, where "done" would suggest a new model. Evaluation records the
        candidate's metrics for every model a round trains, so their absence tells."""
        if self.status == RoundStatus.done and "candidate" not in self.metrics:
            return "done, no model trained"
        if self.stalled:
            return "stalled, no worker"
        return self.status.value

    @property
    def stalled(self) -> bool:
        """Running under a lease its worker stopped renewing (killed, its machine gone): the
        round waits for a worker to take it over, which one does once it runs."""
        return (self.status == RoundStatus.running and self.lease_expires_at is not None
                and self.lease_expires_at < utcnow())
