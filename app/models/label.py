from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONDocument, UTCDateTime, utcnow
from app.models.project import LabelingMode


class FinishReason(enum.StrEnum):
    found_error = "found_error"
    solution = "solution"
    bad_problem = "bad_problem"
    give_up = "give_up"


class LabelSource(enum.StrEnum):
    """Who made a label: a labeler (or an imported labeler), or a machine.

    Only human labels fill overlap slots, name labelers and enter agreement, quality control
    and standings; machine labels are data that exports and training may take, by choice.
    """

    human = "human"
    rollout = "rollout"
    judge = "judge"
    prm = "prm"


MACHINE_SOURCES = (LabelSource.rollout, LabelSource.judge, LabelSource.prm)


class Label(Base):
    """One labeler's verdict on one solution.

    `steps` keeps PRM800K's per-step shape (`completions[{text, rating, flagged}]`,
    `human_completion`, `chosen_completion`) so that alternative and human completions survive
    an import; a completion whose text is the solution's own step omits `text`, and export puts
    it back.
    """

    __tablename__ = "labels"
    __table_args__ = (
        UniqueConstraint("project_id", "content_hash"),
        UniqueConstraint("user_id", "idempotency_key"),
        UniqueConstraint("assignment_id"),
        # One correction per label: two racing corrections of the same label cannot both land.
        UniqueConstraint("supersedes_id"),
        Index("ix_labels_solution_id", "solution_id"),
        Index("ix_labels_project_created", "project_id", "created_at"),
        Index("ix_labels_project_source", "project_id", "source"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"))
    assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id", ondelete="SET NULL")
    )
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # Labeler id from an imported file (PRM800K's `labeler`); null for labels made here.
    foreign_labeler: Mapped[str | None] = mapped_column(String(100))
    generation: Mapped[int | None] = mapped_column(Integer)
    is_quality_control: Mapped[bool] = mapped_column(Boolean, default=False)
    is_initial_screening: Mapped[bool] = mapped_column(Boolean, default=False)
    finish_reason: Mapped[FinishReason | None] = mapped_column(
        Enum(FinishReason, native_enum=False, length=16)
    )
    finish_note: Mapped[str | None] = mapped_column(Text)
    # The mode its task was served in (see Assignment.labeling_mode), which a correction keeps:
    # the project's mode may change after labeling, and exports and corrections read each label
    # by its own mode's rules. None for a label that came from a file or a machine: nothing says
    # which rules it was made under.
    labeling_mode: Mapped[LabelingMode | None] = mapped_column(Enum(LabelingMode, native_enum=False, length=16))
    total_time_ms: Mapped[int | None] = mapped_column(Integer)
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONDocument)
    idempotency_key: Mapped[str | None] = mapped_column(String(100))
    content_hash: Mapped[str | None] = mapped_column(String(64))
    import_batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_batches.id", ondelete="SET NULL"), index=True
    )
    # Imported fields Stepwise has no column for, and imported values whose canonical
    # rendering would differ, so that export gives the file back as it came.
    extra: Mapped[dict[str, Any]] = mapped_column(JSONDocument, default=dict)
    source: Mapped[LabelSource] = mapped_column(
        # The database's default, not Python's: the labeling hot path inserts through Core
        # (app.labeling.service) and then need not name the column.
        Enum(LabelSource, native_enum=False, length=16),
        server_default=LabelSource.human.value,
    )
    # For machine labels: the generator (model, backend), its sampling parameters and what it
    # measured per step, so that a label can be traced to what made it and made again.
    source_detail: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A labeler's correction is a new row naming the label it replaces; the replaced row stays,
    # marked superseded, so that nothing a labeler sent is lost. Current labels are those with
    # no superseded_at: they are what exports, counts and training read.
    supersedes_id: Mapped[int | None] = mapped_column(ForeignKey("labels.id", ondelete="SET NULL"))
    superseded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
