"""`stepwise db backup` and `stepwise db restore`: one file holds the whole database.

SQLite through its online backup API, which copies a consistent snapshot while the server goes
on writing (a plain file copy could catch a write half done, and misses the WAL). PostgreSQL
through pg_dump's custom format, which pg_restore can restore selectively and in parallel.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import tempfile
from contextlib import closing
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from app.errors import BadInput
from app.migrate import known_revision
from app.ops.files import output_file, written_aside
from app.rounds.jobs import JOB_QUEUE_SCHEMA


def backup(database_url: str, target: Path) -> None:
    url = make_url(database_url)
    source = _sqlite_path(url) if url.get_backend_name() == "sqlite" else None
    if source is not None and not source.is_file():
        raise BadInput(f"no database at {source}: nothing to back up")
    with written_aside(output_file(target)) as partial:
        # Made before either writer opens it, readable by its owner alone: a backup holds the
        # password hashes, token digests and the instance's secrets.
        os.close(os.open(partial, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
        if source is not None:
            _sqlite_copy(source, partial)
        else:
            _run("pg_dump", url, ["--format=custom", "--no-owner", f"--file={partial}"])


def restore(database_url: str, source: Path) -> str:
    """Replace the database's contents with the backup's; returns the backup's migration
    revision, read and checked before the database is touched, which may be older than this
    version's."""
    if not source.is_file():
        raise BadInput(f"no backup at {source}")
    url = make_url(database_url)
    _same_kind(source, url.get_backend_name())
    if url.get_backend_name() == "sqlite":
        target = _sqlite_path(url)
        revision = _known_revision(source, _sqlite_revisions(source))
        _sqlite_copy(source, target)
        return revision
    revision = _known_revision(source, _dump_revisions(source))
    _postgres_restore(url, source)
    return revision


# The "dead man switch" byte of SQLite's WAL index (the -shm file): SQLite's unix VFS locks byte
# 128 (UNIX_SHM_BASE 120 + SQLITE_SHM_NLOCK 8) for as long as a connection has the index open.
_SHM_DMS_BYTE = 128


def sqlite_open_elsewhere(database_url: str) -> bool:
    """Whether another process has the SQLite database open: a server or a worker, whose
    connections would go on over the tables replaced under them. SQLite keeps no list of its
    sessions; but every connection in WAL mode (Stepwise opens each so, app.db) holds a shared
    lock on the WAL index's dead-man-switch byte while it is open, which SQLite itself relies on
    to tell whether it is the first to open the database. An exclusive lock on that byte, taken
    and let go at once, is refused while any other process holds one; a process that died lets
    go of its lock with it, so an -shm file it left behind reads as unused. A program that opens
    the file without WAL (none of Stepwise's) is not seen.

    Run before this process opens the database: closing the descriptor ends every POSIX lock
    this process holds on the file, its own SQLite connections' included."""
    shm = _sqlite_path(make_url(database_url))
    shm = shm.with_name(shm.name + "-shm")
    try:
        descriptor = os.open(shm, os.O_RDWR)
    except FileNotFoundError:
        return False  # nobody has it open in WAL mode: the first to open it makes the file
    except OSError:
        return False  # not ours to lock: the restore itself will say what is wrong
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE)
        return False
    finally:
        os.close(descriptor)


# How each kind of backup begins: a SQLite database file, and pg_dump's custom format.
_BACKUP_HEADERS = {"sqlite": b"SQLite format 3\x00", "postgresql": b"PGDMP"}


def _same_kind(source: Path, backend: str) -> None:
    """A backup of the other database kind is said to be one, where each kind's own reader
    would call it no backup at all."""
    with source.open("rb") as f:
        head = f.read(16)
    for kind, header in _BACKUP_HEADERS.items():
        if kind != backend and head.startswith(header):
            other = "SQLite" if kind == "sqlite" else "PostgreSQL"
            raise BadInput(f"{source} is a backup of a {other} database, and DATABASE_URL names a "
                           f"{'SQLite' if backend == 'sqlite' else 'PostgreSQL'} one: restore it into {other} "
                           "(from one kind to the other, export and import the data instead)")


def _known_revision(source: Path, found: list[str]) -> str:
    """The backup's one migration revision, if this version knows it: restoring a backup made
    by a newer Stepwise would leave a schema no migration of this one can read or upgrade."""
    if len(found) != 1 or not known_revision(found[0]):
        raise BadInput(f"{source} is not a Stepwise backup this version can restore: its schema revision "
                       f"({', '.join(found) or 'none'}) is none of this version's (a backup made by a newer "
                       "Stepwise needs that version)")
    return found[0]


def _sqlite_revisions(source: Path) -> list[str]:
    """SQLite opens any file, an empty or foreign one included, and copying that over the live
    database would empty it: the revision is read first."""
    try:
        with closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as db:
            return [str(row[0]) for row in db.execute("SELECT version_num FROM alembic_version")]
    except sqlite3.Error as exc:
        raise BadInput(f"{source} is not a Stepwise backup: {exc}") from None


def _dump_revisions(source: Path) -> list[str]:
    """The revision in a pg_dump archive, read from the archive alone (pg_restore writing the
    one table's data as SQL, no database involved)."""
    executable = _tool("pg_restore")
    result = subprocess.run([executable, "--data-only", "--table=alembic_version", "--file=-", str(source)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise BadInput(f"{source} is not a Stepwise backup: {_last_line(result.stderr)}")
    rows: list[str] = []
    copying = False
    for line in result.stdout.splitlines():
        if line.startswith("COPY ") and "alembic_version" in line:
            copying = True
        elif copying and line == "\\.":
            break
        elif copying:
            rows.append(line)
    return rows


# Everything of Stepwise's in `public` (not the schema itself, which only its owner, often a
# superuser, may drop; nor an extension's objects), and the job queue's schema, which our
# migration made.
_CLEAR = f"""
DROP SCHEMA IF EXISTS {JOB_QUEUE_SCHEMA} CASCADE;
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e') LOOP
        EXECUTE format('DROP %s IF EXISTS public.%I CASCADE',
                       CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
                       r.relname);
    END LOOP;
    FOR r IN SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
             WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = t.oid AND d.deptype = 'e') LOOP
        EXECUTE format('DROP TYPE IF EXISTS public.%I CASCADE', r.typname);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public'
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') LOOP
        EXECUTE format('DROP ROUTINE IF EXISTS %s CASCADE', r.signature);
    END LOOP;
END $$;
"""


def _postgres_restore(url: URL, source: Path) -> None:
    """Stepwise's objects are dropped and the archive's replayed in one transaction: a restore
    that fails halfway leaves the database as it was. pg_restore --clean would drop only what
    the archive holds, leaving the tables of later migrations in the way of `db upgrade` after
    an older backup. The archive is written out as SQL whole first: piped, a pg_restore that died
    partway would end psql's input early, and psql would commit what it had."""
    env = _environment(url)
    with tempfile.TemporaryDirectory(prefix="stepwise-restore-") as folder:
        script = Path(folder) / "restore.sql"
        written = subprocess.run([_tool("pg_restore"), "--no-owner", f"--file={script}", str(source)],
                                 capture_output=True, text=True, env=env)
        if written.returncode != 0:
            raise BadInput(f"pg_restore cannot read {source}, nothing was restored: {written.stderr.strip()[-2000:]}")
        load = subprocess.run(
            [_tool("psql"), "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction",
             f"--command={_CLEAR}", f"--file={script}", "--dbname", _libpq(url)],
            capture_output=True, text=True, env=env,
        )
    if load.returncode != 0:
        raise BadInput(f"psql failed, nothing was restored: {load.stderr.strip()[-2000:]}")


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
    result = subprocess.run([_tool(tool), *arguments, _libpq(url)], env=_environment(url), capture_output=True, text=True)
    if result.returncode != 0:
        raise BadInput(f"{tool} failed: {result.stderr.strip()[-2000:]}")


def _tool(name: str) -> str:
    executable = shutil.which(name)
    if executable is None:
        raise BadInput(f"{name} is not installed: install PostgreSQL's client tools (apt install postgresql-client)")
    return executable


def _environment(url: URL) -> dict[str, str]:
    # The password through the environment: on the command line, `ps` would show it.
    return {**os.environ, **({"PGPASSWORD": url.password} if url.password else {})}


def _libpq(url: URL) -> str:
    return url.set(drivername="postgresql", password=None).render_as_string(hide_password=False)


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "unreadable"
