from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, Float, ForeignKey, false
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class SolutionScore(Base):
    """What one model version thought of one solution."""

    __tablename__ = "solution_scores"

    model_version_id: Mapped[int] = mapped_column(
        ForeignKey("model_versions.id", ondelete="CASCADE"), primary_key=True
    )
    solution_id: Mapped[int] = mapped_column(
        ForeignKey("solutions.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    # The solution score the project's settings ask for (product or minimum of the steps).
    score: Mapped[float] = mapped_column(Float)
    # P(step is correct) per step; null for a step that alone is longer than the length limit. Plain
    # JSON: read whole for the picks inspector, never queried inside.
    step_scores: Mapped[list[float | None]] = mapped_column(JSON)
    # A step went unscored, so `score` lacks its factor: the rule ranks the solution below those
    # read whole, as best-of-N does.
    truncated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
