from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONDocument, UTCDateTime, utcnow


class AnswerGrade(enum.StrEnum):
    right = "right"
    wrong = "wrong"
    no_answer = "no_answer"
    ungraded = "ungraded"


class StepsSource(enum.StrEnum):
    # The solution was given as a list of steps (PRM800K phase 2, candidate files, demo).
    given = "given"
    # PRM800K phase 1 has no pre-generated steps: the steps are the completions a labeler chose.
    label = "label"


class Solution(Base):
    __tablename__ = "solutions"
    __table_args__ = (
        UniqueConstraint("project_id", "content_hash"),
        Index("ix_solutions_problem_id", "problem_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    # The ordered step texts. Steps are always read and written as a whole (to show, to label,
    # to export, to train on), never one by one, so a JSON array keeps a 1,000,000-step import
    # to one row per solution instead of one per step.
    steps: Mapped[list[str]] = mapped_column(JSONDocument)
    steps_source: Mapped[StepsSource] = mapped_column(
        Enum(StepsSource, native_enum=False, length=16), default=StepsSource.given
    )
    final_answer: Mapped[str | None] = mapped_column(String(1000))
    answer_grade: Mapped[AnswerGrade] = mapped_column(
        Enum(AnswerGrade, native_enum=False, length=16), default=AnswerGrade.ungraded
    )
    grader_version: Mapped[str | None] = mapped_column(String(64))
    verifier_score: Mapped[float | None] = mapped_column(Float)
    # Where the solution came from: file name, generator model and sampling parameters, demo
    # procedure.
    origin: Mapped[dict[str, Any]] = mapped_column(JSONDocument, default=dict)
    generation: Mapped[int | None] = mapped_column(Integer)
    priority: Mapped[float] = mapped_column(Float, default=0.0)
    content_hash: Mapped[str] = mapped_column(String(64))
    import_batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_batches.id", ondelete="SET NULL"), index=True
    )
    is_demo: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
