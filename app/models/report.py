from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, ForeignKey, Index, Integer, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class ReportKind(enum.StrEnum):
    give_up = "give_up"
    bad_problem = "bad_problem"
    flagged_step = "flagged_step"


class ReportStatus(enum.StrEnum):
    open = "open"
    dismissed = "dismissed"


class Report(Base):
    """Something a labeler raised for a manager: a give-up, a bad problem, a flagged step.

    Written with the label that carries it, one row per give-up or bad-problem label and one
    per flagged step, so that each can be dismissed on its own; a correction that still raises
    it takes it over, keeping when it was first raised (app.reports.service.carry_reports). The
    reason is the carrying label's `finish_note` (a flag has none). Imported labels raise no reports: their flags were
    somebody else's to look at.
    """

    __tablename__ = "reports"
    __table_args__ = (
        Index("ix_reports_project_id", "project_id", "id"),
        Index("ix_reports_label_id", "label_id"),
        # The queue's look-up of the problems a labeler called bad: a handful per labeler.
        Index(
            "ix_reports_bad_problems",
            "user_id",
            "problem_id",
            postgresql_where=text("kind = 'bad_problem'"),
            sqlite_where=text("kind = 'bad_problem'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    label_id: Mapped[int] = mapped_column(ForeignKey("labels.id", ondelete="CASCADE"))
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"), index=True)
    # Copied from the solution so that the queue's filter needs no join.
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    kind: Mapped[ReportKind] = mapped_column(Enum(ReportKind, native_enum=False, length=16))
    # The flagged step's index from 0; null for a report on the whole solution.
    step: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[ReportStatus] = mapped_column(
        Enum(ReportStatus, native_enum=False, length=16), default=ReportStatus.open
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    dismissed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    dismissed_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
