from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class GuidelinesRead(Base):
    """The version of a project's guidelines a person last read to the end (closed the dialog on
    the labeling page, or acknowledged through the API): managers see who has read the current one."""

    __tablename__ = "guidelines_reads"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    # app.projects.guidelines.guidelines_version of the text read.
    version: Mapped[str] = mapped_column(String(16))
    read_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
