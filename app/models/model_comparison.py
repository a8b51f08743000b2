from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Enum, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONType, UTCDateTime, utcnow


class ComparisonStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"


class ModelComparison(Base):
    """Two model versions measured on the same held-out labels, as they stood when compared, with
    the paired 95% interval of each metric's difference (active_learning.evaluate.compare_examples).
    A worker measures it (app.rounds.comparison): it loads both checkpoints."""

    __tablename__ = "model_comparisons"

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    version_a_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"), index=True)
    version_b_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"), index=True)
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    status: Mapped[ComparisonStatus] = mapped_column(
        Enum(ComparisonStatus, native_enum=False, length=16), default=ComparisonStatus.queued
    )
    # Why it failed, in a sentence; empty otherwise.
    message: Mapped[str] = mapped_column(String(500), default="")
    # Once measured: the newest label read (the held-out set is the project's human labels up to
    # it), how many held-out labels, and the results.
    snapshot_label_id: Mapped[int | None] = mapped_column(Integer)
    heldout_labels: Mapped[int | None] = mapped_column(Integer)
    results: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # Renewed while a worker measures: one that died stops renewing, and another takes the
    # comparison once this is older than a round's lease.
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The worker holding the claim (app.rounds.lease.worker_name): only it renews the claim and
    # records the results.
    claimed_by: Mapped[str | None] = mapped_column(String(100))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
