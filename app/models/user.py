from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import Boolean, Enum, String, false
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class Role(enum.StrEnum):
    labeler = "labeler"
    manager = "manager"
    researcher = "researcher"
    admin = "admin"


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[Role] = mapped_column(Enum(Role, native_enum=False, length=16))
    # PRM800K identifies labelers by an opaque UUID; exports use this one, never the username.
    labeler_uuid: Mapped[str] = mapped_column(
        String(36), unique=True, default=lambda: str(uuid.uuid4())
    )
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Set when an admin chose the password (a new account, a reset): until its owner chooses
    # their own, their logins may do nothing else (app.deps), since the admin knows it too.
    must_change_password: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
