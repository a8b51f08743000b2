"""The one Alembic history runs both ways on both databases and matches the models."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from app.config import normalize_database_url
from app.migrate import downgrade, upgrade
from app.models import Base
from tests.conftest import _postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        yield from _postgres_database()


def _tables(url: str) -> set[str]:
    engine = create_engine(normalize_database_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(fresh_url: str) -> None:
    upgrade(fresh_url)
    assert _tables(fresh_url) >= {t.name for t in Base.metadata.sorted_tables}
    downgrade(fresh_url, "base")
    assert _tables(fresh_url) == set()
    upgrade(fresh_url)
    assert _tables(fresh_url) >= {"users", "labels", "assignments"}


def test_models_and_migrations_agree(fresh_url: str) -> None:
    upgrade(fresh_url)
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == [], f"models differ from the migrations: {diff}"
