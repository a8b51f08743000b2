from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class AuthSession(Base):
    """A browser login. Kept server-side so that logging out really ends it."""

    __tablename__ = "auth_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Only a hash of the cookie is stored: a leaked database does not leak live sessions.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # To the minute (see app.auth.service.LAST_USE_EVERY): a session unused for
    # STEPWISE_SESSION_IDLE_MINUTES ends before expires_at.
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
