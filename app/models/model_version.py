from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONType, UTCDateTime, utcnow


class ModelVersion(Base):
    """A trained PRM checkpoint: a complete `save_pretrained` directory, never a partial one."""

    __tablename__ = "model_versions"
    __table_args__ = (
        UniqueConstraint("round_id"),
        # One served version per project; promotion swaps it in a single transaction.
        Index(
            "uq_model_versions_served",
            "project_id",
            unique=True,
            postgresql_where=text("is_served"),
            sqlite_where=text("is_served"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    round_id: Mapped[int | None] = mapped_column(ForeignKey("rounds.id", ondelete="SET NULL"))
    path: Mapped[str] = mapped_column(String(1000))
    base: Mapped[str] = mapped_column(String(255))
    data_hash: Mapped[str] = mapped_column(String(64))
    train_labels: Mapped[int] = mapped_column(Integer)
    # Metrics on the held-out split of the round that made it.
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    passed: Mapped[bool | None] = mapped_column(Boolean)
    is_served: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    promoted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
