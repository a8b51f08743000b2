from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class PickReason(enum.StrEnum):
    # The PRM rates the solution highly but its final answer is wrong: the labels teach most.
    convincing_wrong = "convincing_wrong"
    top_scored = "top_scored"
    # Uniformly drawn, so that the gain of the rule over uniform can be measured.
    random_control = "random_control"
    qc = "qc"
    # No model has been served yet, so there is nothing to rank with.
    no_model = "no_model"
    # Drawn uniformly: the project's selector mode is uniform.
    uniform = "uniform"
    # Drawn uniformly: the selector does not yet rank well enough on held-out labels
    # (RoundSettings.selector_min_step_auroc).
    selector_warmup = "selector_warmup"
    # Routed to humans because machine labels contradict each other or the served PRM, or a
    # rollout could not tell; the pick's detail says which (active_learning.disagreement).
    machine_disagreement = "machine_disagreement"
    machine_uncertain = "machine_uncertain"
    # One machine source and no PRM to check it against.
    machine_unchecked = "machine_unchecked"


class RoundPick(Base):
    """A solution a round put in the labeling queue, and why."""

    __tablename__ = "round_picks"
    __table_args__ = (
        UniqueConstraint("round_id", "solution_id"),
        Index("ix_round_picks_solution_id", "solution_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"))
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"))
    model_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("model_versions.id", ondelete="SET NULL"), index=True
    )
    rank: Mapped[int] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[PickReason] = mapped_column(Enum(PickReason, native_enum=False, length=24))
    # The solution's graded answer when it was picked (right / wrong / no_answer / ungraded).
    answer_grade: Mapped[str] = mapped_column(String(16))
    priority: Mapped[float] = mapped_column(Float)
    # Why, in words, for a routed pick ("rollout and PRM disagree on step 3"); shown to
    # managers and researchers, never to labelers.
    detail: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
