from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, Float, ForeignKey, Index, Integer, UniqueConstraint, desc, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime
from app.models.project import LabelingMode


class AssignmentStatus(enum.StrEnum):
    waiting = "waiting"
    leased = "leased"
    done = "done"


class Assignment(Base):
    """One label a solution still needs: a queue slot, leased to one labeler at a time.

    A solution gets `overlap` slots, so at most `overlap` labelers hold or finish it; a lease
    that runs out puts the slot back to `waiting` and keeps the last holder, so that a late
    submit from that holder is still accepted while nobody else has taken the slot.
    """

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("solution_id", "slot"),
        # The queue's scan, read backwards: waiting slots of a project by priority, then each
        # solution's first slot before its later ones (hence slot DESC), oldest first (hence id
        # DESC): a file's solutions in the file's order.
        Index(
            "ix_assignments_queue",
            "project_id",
            "priority",
            desc("slot"),
            desc("id"),
            postgresql_where=text("status = 'waiting'"),
            sqlite_where=text("status = 'waiting'"),
        ),
        Index(
            "ix_assignments_leases",
            "expires_at",
            postgresql_where=text("status = 'leased'"),
            sqlite_where=text("status = 'leased'"),
        ),
        Index("ix_assignments_user", "user_id", "solution_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"))
    slot: Mapped[int] = mapped_column(Integer)
    # Copied from the solution so that the queue scan needs one index and no join.
    priority: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[AssignmentStatus] = mapped_column(
        Enum(AssignmentStatus, native_enum=False, length=16), default=AssignmentStatus.waiting
    )
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    generation: Mapped[int | None] = mapped_column(Integer)
    leased_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The project's mode when the task was served: its label is taken by that mode's rules if a
    # manager changes the mode meanwhile. None on slots no one leased since (and from before).
    labeling_mode: Mapped[LabelingMode | None] = mapped_column(Enum(LabelingMode, native_enum=False, length=16))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
