from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime


class LoginKeyKind(enum.StrEnum):
    username = "username"
    address = "address"


class LoginFailure(Base):
    """Failed logins of one username, or from one client address, in the current window.

    In the database, not in a process's memory, so that every server process and replica
    counts the same failures (see app.auth.throttle).
    """

    __tablename__ = "login_failures"

    kind: Mapped[LoginKeyKind] = mapped_column(
        Enum(LoginKeyKind, native_enum=False, length=16), primary_key=True
    )
    # A username as typed (lowercased), whether or not such a user exists, or an address.
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)
    window_started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
