"""Alembic environment: metadata from app.models, URL from the settings (or the caller)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from app.config import get_settings, normalize_database_url
from app.db import connect_timeout_args
from app.models import Base

config = context.config
url = normalize_database_url(config.get_main_option("sqlalchemy.url") or get_settings().database_url)


def run_migrations() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = create_engine(url, poolclass=pool.NullPool, connect_args=connect_timeout_args(url))
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    is_postgres = connection.dialect.name == "postgresql"
    if is_postgres:
        # A migration waiting on a labeler's row lock must fail fast rather than queue every
        # request behind it.
        connection.exec_driver_sql("SET lock_timeout = '10s'")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    if connection.in_transaction():
        connection.commit()


run_migrations()
