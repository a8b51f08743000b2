"""Declarative base, naming convention and the column types every table shares."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, MetaData, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

# Named constraints let Alembic alter them on SQLite, whose batch mode rebuilds tables by name.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")
# Documents written in bulk and read whole (steps, a label's extra, a solution's origin): never
# queried inside, so PostgreSQL's json, which keeps the text as given, instead of jsonb, which
# builds a tree of it on every insert (a 1,000,000-step import took 20.0 / 20.3 s against 21.5 /
# 21.7 s, PostgreSQL's CPU 11 / 11 s against 13 / 14 s).
JSONDocument = JSON()

# Integer columns, ids included, are 32-bit INTEGER on PostgreSQL: a larger value sent in a
# query is an error there, so inputs are bounded by this.
INT32_MAX = 2**31 - 1


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both databases (SQLite drops the offset on its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:  # type: ignore[no-untyped-def]
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a timezone-aware column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:  # type: ignore[no-untyped-def]
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
