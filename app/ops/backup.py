"""`stepwise db backup` and `stepwise db restore`: one file holds the whole database.

SQLite through its online backup API, which copies a consistent snapshot while the server goes
on writing (a plain file copy could catch a write half done, and misses the WAL). PostgreSQL
through pg_dump's custom format, which pg_restore can restore selectively and in parallel.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from app.errors import BadInput
from app.migrate import known_revision
from app.ops.files import output_file, written_aside


def backup(database_url: str, target: Path) -> None:
    url = make_url(database_url)
    source = _sqlite_path(url) if url.get_backend_name() == "sqlite" else None
    if source is not None and not source.is_file():
        raise BadInput(f"no database at {source}: nothing to back up")
    with written_aside(output_file(target)) as partial:
        if source is not None:
            _sqlite_copy(source, partial)
        else:
            _run("pg_dump", url, ["--format=custom", "--no-owner", f"--file={partial}"])


def restore(database_url: str, source: Path) -> str | None:
    """Replace the database's contents with the backup's; returns the backup's migration
    revision where it is read first (SQLite), which may be older than this version's."""
    if not source.is_file():
        raise BadInput(f"no backup at {source}")
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        target = _sqlite_path(url)
        revision = _stepwise_revision(source)
        _sqlite_copy(source, target)
        return revision
    # One transaction: a backup that fails halfway leaves the database as it was.
    _run("pg_restore", url, ["--clean", "--if-exists", "--no-owner", "--single-transaction", "--exit-on-error", str(source)])
    return None


def _stepwise_revision(source: Path) -> str:
    """The backup's migration revision, checked before the live database is touched: SQLite
    opens any file, an empty or foreign one included, and copying that over the live database
    would empty it."""
    refusal = f"{source} is not a Stepwise backup"
    try:
        with closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error as exc:
        raise BadInput(f"{refusal}: {exc}") from None
    if len(rows) != 1 or not known_revision(rows[0][0]):
        found = ", ".join(str(r[0]) for r in rows) or "none"
        raise BadInput(f"{refusal} this version can restore: its schema revision ({found}) is none of this "
                       "version's (a backup made by a newer Stepwise needs that version)")
    return rows[0][0]


def _sqlite_path(url: URL) -> Path:
    if not url.database or url.database == ":memory:":
        raise BadInput("an in-memory SQLite database has nothing to back up")
    return Path(url.database)


def _sqlite_copy(source: Path, target: Path) -> None:
    try:
        with closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as src, \
                closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
    except sqlite3.Error as exc:
        raise BadInput(f"cannot copy {source} to {target}: {exc}") from None


def _run(tool: str, url: URL, arguments: list[str]) -> None:
    executable = shutil.which(tool)
    if executable is None:
        raise BadInput(f"{tool} is not installed: install PostgreSQL's client tools (apt install postgresql-client)")
    # The password through the environment: on the command line, `ps` would show it.
    env = {**os.environ, **({"PGPASSWORD": url.password} if url.password else {})}
    libpq = url.set(drivername="postgresql", password=None).render_as_string(hide_password=False)
    dbname = ["--dbname", libpq] if tool == "pg_restore" else [libpq]
    result = subprocess.run([executable, *arguments, *dbname], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise BadInput(f"{tool} failed: {result.stderr.strip()[-2000:]}")
