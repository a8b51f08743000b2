from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class ApiToken(Base):
    """A bearer token for the JSON API and scripts."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # To the minute or so (app.auth.service.LAST_USE_EVERY): a write per request would cost more.
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # None: until revoked.
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # GET requests and scoring only (app.deps): a script that reads, leaked, changes nothing.
    read_only: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= utcnow()
