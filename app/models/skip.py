from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class Skip(Base):
    """A solution a labeler passed over without labeling it: the queue serves it to them no more
    (as Label Studio's skip and Prodigy's ignore), and their slot goes to the next labeler."""

    __tablename__ = "skips"

    # The queue's look-up is by labeler and solution, the key's order.
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    solution_id: Mapped[int] = mapped_column(
        ForeignKey("solutions.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    # The solution's own, kept so that a project's skips are counted without a join.
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    skipped_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
