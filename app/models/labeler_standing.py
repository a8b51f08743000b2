from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class StandingDecision(enum.StrEnum):
    # Labels regardless of screening; QC accuracy counts afresh from the decision on.
    admitted = "admitted"
    # Gets no more tasks in the project.
    retired = "retired"


class LabelerStanding(Base):
    """A manager's decision about one labeler in one project; none means the screening and QC
    rules alone decide."""

    __tablename__ = "labeler_standings"

    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    decision: Mapped[StandingDecision] = mapped_column(
        Enum(StandingDecision, native_enum=False, length=16)
    )
    decided_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
