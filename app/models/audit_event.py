from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONType, UTCDateTime, utcnow


class AuditEvent(Base):
    """Who changed an account, a role, a project, its members, imports, problems, gold, labelers'
    standing or rounds, and when (see app.audit.service): what an admin reads back when something
    changed and nobody says they did it."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Kept when the user is gone, by name: the row says who it was then.
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    # A username, or None for the command line (whoever ran it on the server) and for a wrong
    # password, whose typist is not known.
    actor: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(40), index=True)
    # What it was done to, in words that outlive it ("user ann", "project Algebra").
    target: Mapped[str] = mapped_column(String(200))
    details: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
