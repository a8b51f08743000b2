from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class InstanceSecret(Base):
    """A random key made once per database, shared by every server process and replica.

    In the database rather than in the configuration so that replicas agree without anyone
    configuring them, and a restored backup keeps its key with its data.
    """

    __tablename__ = "instance_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
