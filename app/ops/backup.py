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


def backup(database_url: str, target: Path) -> None:
    url = make_url(database_url)
    # Written aside and renamed: a backup cut short never passes for a whole one.
    partial = target.with_name(target.name + ".partial")
    if url.get_backend_name() == "sqlite":
        _sqlite_copy(_sqlite_path(url), partial)
    else:
        _run("pg_dump", url, ["--format=custom", "--no-owner", f"--file={partial}"])
    partial.replace(target)


def restore(database_url: str, source: Path) -> None:
    """Replace the database's contents with the backup's."""
    if not source.is_file():
        raise BadInput(f"no backup at {source}")
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        _sqlite_copy(source, _sqlite_path(url))
    else:
        # One transaction: a backup that fails halfway leaves the database as it was.
        _run("pg_restore", url, ["--clean", "--if-exists", "--no-owner", "--single-transaction", "--exit-on-error", str(source)])


def _sqlite_path(url: URL) -> Path:
    if not url.database or url.database == ":memory:":
        raise BadInput("an in-memory SQLite database has nothing to back up")
    return Path(url.database)


def _sqlite_copy(source: Path, target: Path) -> None:
    with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


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
