from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, Enum, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class LabelingMode(enum.StrEnum):
    # PRM800K phase 2: rate top to bottom, the first -1 ends the solution.
    first_error = "first_error"
    full = "full"


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (
        CheckConstraint("overlap >= 1 AND overlap <= 20", name="overlap_range"),
        CheckConstraint("lease_minutes >= 1 AND lease_minutes <= 1440", name="lease_range"),
        CheckConstraint(
            "correction_window_hours >= 0 AND correction_window_hours <= 720",
            name="correction_window_range",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    labeling_mode: Mapped[LabelingMode] = mapped_column(
        Enum(LabelingMode, native_enum=False, length=16), default=LabelingMode.first_error
    )
    # How many different labelers must label each solution.
    overlap: Mapped[int] = mapped_column(Integer, default=1)
    lease_minutes: Mapped[int] = mapped_column(Integer, default=30)
    # How long after labeling a solution a labeler may still correct that label; 0 closes
    # corrections.
    correction_window_hours: Mapped[int] = mapped_column(Integer, default=24)
    # Every labeler may label here; when False, only the labelers in project_members may.
    open_to_all: Mapped[bool] = mapped_column(Boolean, default=True)
    is_demo: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
