from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class Problem(Base):
    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("project_id", "content_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    statement: Mapped[str] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text)
    reference_solution: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str | None] = mapped_column(String(100))
    level: Mapped[int | None] = mapped_column(Integer)
    split: Mapped[str | None] = mapped_column(String(32))
    # The id the problem had where it came from (MATH's unique_id, for example).
    source_id: Mapped[str | None] = mapped_column(String(255))
    # Hash of statement and answer: the same problem imported twice is one row.
    content_hash: Mapped[str] = mapped_column(String(64))
    is_demo: Mapped[bool] = mapped_column(Boolean, default=False)
    # Set when a manager retires the problem: its solutions are not served again, and the
    # labels it already has stay and export as before.
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The file that added it, so that removing the file can take it away again.
    import_batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_batches.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
