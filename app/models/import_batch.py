from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONType, UTCDateTime, utcnow


class ImportFormat(enum.StrEnum):
    prm800k = "prm800k"
    math = "math"
    solutions = "solutions"


class ImportBatch(Base):
    """One imported file: where rows came from, and what it added."""

    __tablename__ = "import_batches"

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    filename: Mapped[str] = mapped_column(String(255))
    format: Mapped[ImportFormat] = mapped_column(Enum(ImportFormat, native_enum=False, length=16))
    file_sha256: Mapped[str] = mapped_column(String(64), index=True)
    # Where a solutions file's text was cut into steps; null for other formats, and for batches
    # imported before it was kept.
    separator: Mapped[str | None] = mapped_column(String(100))
    lines: Mapped[int] = mapped_column(Integer, default=0)
    # {"problems": n, "solutions": n, "labels": n, "duplicates": n}
    added: Mapped[dict[str, int]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
