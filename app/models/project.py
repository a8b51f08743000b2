from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, Enum, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class LabelingMode(enum.StrEnum):
    # PRM800K phase 2: rate top to bottom, the first -1 ends the solution.
    first_error = "first_error"
    full = "full"
    # PRM800K phase 1: each step comes with alternative completions; the labeler rates every
    # one, then continues with one of them or with a step of their own.
    phase1 = "phase1"


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (
        CheckConstraint("overlap >= 1 AND overlap <= 20", name="overlap_range"),
        CheckConstraint("lease_minutes >= 1 AND lease_minutes <= 1440", name="lease_range"),
        CheckConstraint(
            "correction_window_hours >= 0 AND correction_window_hours <= 720",
            name="correction_window_range",
        ),
        CheckConstraint("screening_items >= 0 AND screening_items <= 100", name="screening_items_range"),
        CheckConstraint("screening_pass_mark >= 0 AND screening_pass_mark <= 1", name="screening_pass_mark_range"),
        CheckConstraint("qc_rate >= 0 AND qc_rate <= 1", name="qc_rate_range"),
        CheckConstraint("qc_pause_below >= 0 AND qc_pause_below <= 1", name="qc_pause_below_range"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    # What labelers read before and while labeling here: Markdown with math (app.projects.guidelines);
    # "" when there are none, which the schemas also make of a blank text.
    guidelines: Mapped[str] = mapped_column(Text, default="", server_default="")
    # When the text last changed: a labeler who read it before then has read an older version.
    guidelines_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
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
    # Screening (PRM800K's initial screening questions): a labeler's first `screening_items`
    # tasks are the project's screening gold items, and below `screening_pass_mark` agreement
    # they get no other task until a manager admits them. 0 items: no screening.
    screening_items: Mapped[int] = mapped_column(Integer, default=0)
    screening_pass_mark: Mapped[float] = mapped_column(Float, default=0.0)
    # The chance that next-task serves a QC gold item the labeler has not labeled yet.
    qc_rate: Mapped[float] = mapped_column(Float, default=0.0)
    # Whether the submit receipt of a QC or screening item shows the labeler the gold.
    qc_feedback: Mapped[bool] = mapped_column(Boolean, default=False)
    # A labeler whose QC accuracy (over at least 5 items) falls below this is paused; 0: never.
    qc_pause_below: Mapped[float] = mapped_column(Float, default=0.0)
    is_demo: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set while a manager has paused labeling here: no new task is handed out (one in hand can
    # still be submitted). `paused` is the setting the API and the audit speak of.
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    @paused.setter
    def paused(self, value: bool) -> None:
        if not value:
            self.paused_at = None
        elif self.paused_at is None:
            self.paused_at = utcnow()
