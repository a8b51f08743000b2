"""Alembic, driven from code so that `stepwise db upgrade` needs no alembic.ini."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError

from app.errors import BadInput

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is ConfigParser's interpolation character and may appear in URL-encoded passwords.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    try:
        command.upgrade(alembic_config(database_url), revision)
    except CommandError as exc:
        raise BadInput(f"cannot upgrade to {revision!r}: {exc}") from None


def downgrade(database_url: str, revision: str) -> None:
    try:
        command.downgrade(alembic_config(database_url), revision)
    except CommandError as exc:
        raise BadInput(f"cannot downgrade to {revision!r}: {exc}") from None


def reverted_by(database_url: str, revision: str) -> list[tuple[str, str]]:
    """(revision, what it added) of each migration a downgrade to `revision` reverts, newest
    first; BadInput for a revision the migrations do not know."""
    current = current_revision(database_url)
    if current is None:
        return []
    scripts = _scripts()
    try:
        if revision.startswith("-") and revision[1:].isdigit():
            # Relative: that many steps down the one line of migrations.
            reverted = list(scripts.iterate_revisions(current, "base"))[:int(revision[1:])]
        else:
            reverted = list(scripts.iterate_revisions(current, revision))
    except (CommandError, RevisionError) as exc:
        raise BadInput(f"cannot downgrade to {revision!r}: {exc}") from None
    return [(script.revision, (script.doc or "").strip()) for script in reverted]


def current_revision(database_url: str) -> str | None:
    """The revision the database is at now (None: no migration applied)."""
    from sqlalchemy import create_engine, pool

    from app.db import connect_timeout_args

    engine = create_engine(database_url, poolclass=pool.NullPool, connect_args=connect_timeout_args(database_url))
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    # The migrations this code was written for; the files do not change while it runs.
    return ScriptDirectory(str(MIGRATIONS_DIR))


def heads() -> frozenset[str]:
    return frozenset(_scripts().get_heads())


def known_revision(revision: object) -> bool:
    """Whether `revision` is one of this version's migrations."""
    return isinstance(revision, str) and revision in {script.revision for script in _scripts().walk_revisions()}
