"""`stepwise db backup` then `stepwise db restore`: the labels come back exactly as they were."""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy import delete, select

from app.cli import cli
from app.config import Settings, get_settings
from app.db import create_db_engine, create_session_factory
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from app.migrate import heads, upgrade
from app.ops import backup as backup_module
from app.models import Label, Project
from tests.conftest import add_solutions, api_headers, make_project, make_user

STEPWISE = str(Path(sys.executable).parent / "stepwise")


def _export(session_factory, project_id: int) -> bytes:  # type: ignore[no-untyped-def]
    with session_factory() as session:
        sink = io.BytesIO()
        write_export(session, session.get(Project, project_id), "prm800k", ExportFilters(), sink)
        return sink.getvalue()


def _stepwise(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STEPWISE, *args], env={**os.environ, "DATABASE_URL": database_url},
                          capture_output=True, text=True, timeout=300)


def test_a_backup_restores_the_labels_as_they_were(backend, database_url, client, session_factory, db, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if backend == "postgresql" and shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed here: PostgreSQL backups cannot be tested")
    project = make_project(session_factory, "algebra")
    add_solutions(session_factory, project, 3, steps=2)
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    for key in ("a", "b"):
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        label = {"idempotency_key": f"backup-{key}", "ratings": [{"rating": 1}, {"rating": -1}], "finish_reason": "found_error", "total_time_ms": 5}
        assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=label).status_code == 200
    before = _export(session_factory, project.id)
    assert before.count(b"\n") == 2

    backup = tmp_path / "stepwise.backup"
    made = _stepwise(database_url, "db", "backup", str(backup))
    assert made.returncode == 0, made.stderr
    assert backup.stat().st_size > 0 and not backup.with_name(backup.name + ".partial").exists()
    # Password hashes and token digests: for its owner alone.
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600

    db.execute(delete(Label))
    db.commit()
    assert _export(session_factory, project.id) == b""

    client.app.state.engine.dispose()  # no pooled connection holds the tables being replaced
    # --force: this process's other connections (the job queue's, say) are no server to stop.
    restored = _stepwise(database_url, "db", "restore", "--force", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert _export(session_factory, project.id) == before


def test_restoring_a_missing_file_is_refused(sqlite_url) -> None:  # type: ignore[no-untyped-def]
    result = _stepwise(sqlite_url, "db", "restore", "/nonexistent/backup")
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_a_failed_pg_dump_is_named_without_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed here")
    result = _stepwise("postgresql://nobody@127.0.0.1:1/none", "db", "backup", str(tmp_path / "x"))
    assert result.returncode == 1 and "pg_dump failed" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists()


def _restore(monkeypatch, database_url: str, file: Path, *, force: bool = True):  # type: ignore[no-untyped-def]
    """--force unless told: the test's own pooled connections are no server to stop."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(cli, ["db", "restore", *(["--force"] if force else []), str(file)])
    finally:
        get_settings.cache_clear()


def _foreign(path: Path, statements: str) -> Path:
    with closing(sqlite3.connect(path)) as db:
        db.executescript(statements)
    return path


@pytest.mark.parametrize("backend", ["sqlite"])
def test_only_a_stepwise_backup_is_restored(monkeypatch, database_url, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "kept")
    empty = tmp_path / "empty.db"
    empty.touch()
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but longer than a SQLite header would be\n" * 4)
    other = _foreign(tmp_path / "other.db", "CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    unknown = _foreign(tmp_path / "unknown.db", "CREATE TABLE alembic_version (version_num TEXT); INSERT INTO alembic_version VALUES ('zzz');")
    for file in (empty, text, other, unknown):
        result = _restore(monkeypatch, database_url, file)
        assert result.exit_code == 1 and f"Error: {file} is not a Stepwise backup" in result.stderr, result.output
        assert isinstance(result.exception, SystemExit)
    with session_factory() as session:
        assert [p.name for p in session.scalars(select(Project))] == [project.name]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_backup_at_an_older_revision_is_restored_with_a_note(monkeypatch, database_url, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = tmp_path / "old.db"
    with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as live, closing(sqlite3.connect(old)) as copy:
        live.backup(copy)
        copy.execute("UPDATE alembic_version SET version_num = '0016'")
        copy.commit()
    result = _restore(monkeypatch, database_url, old)
    assert result.exit_code == 0 and "revision 0016" in result.stderr and "stepwise db upgrade" in result.stderr
    with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as live:
        # The schema is head's already: only the revision it was given goes back.
        live.execute("UPDATE alembic_version SET version_num = ?", (next(iter(heads())),))
        live.commit()


def _postgres_only() -> None:
    if shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed here: PostgreSQL backups cannot be tested")


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_postgres_restore_replaces_the_schema_whole(monkeypatch, database_url, engine, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pg_restore --clean drops only what the archive holds: a table a later migration made
    would stay, in the way of `db upgrade` after an older backup. The restore drops it too."""
    _postgres_only()
    make_project(session_factory, "kept")
    backup = tmp_path / "stepwise.dump"
    assert _stepwise(database_url, "db", "backup", str(backup)).returncode == 0
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE from_a_later_migration (x int)")
        connection.exec_driver_sql("DELETE FROM projects")
    engine.dispose()
    result = _restore(monkeypatch, database_url, backup)
    assert result.exit_code == 0, result.output
    assert "older than this version's" not in result.stderr
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT to_regclass('public.from_a_later_migration')").scalar() is None
        assert connection.exec_driver_sql("SELECT name FROM projects").scalars().all() == ["kept"]
        assert connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() in heads()
        # The job queue's schema came back with it.
        assert connection.exec_driver_sql("SELECT to_regclass('procrastinate.procrastinate_jobs')").scalar() is not None


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_postgres_backup_of_a_newer_version_or_none_is_refused_untouched(monkeypatch, database_url, engine, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _postgres_only()
    head = next(iter(heads()))
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    newer = tmp_path / "newer.dump"
    assert _stepwise(database_url, "db", "backup", str(newer)).returncode == 0
    with engine.begin() as connection:
        connection.exec_driver_sql(f"UPDATE alembic_version SET version_num = '{head}'")
    make_project(session_factory, "kept")
    text = tmp_path / "notes.txt"
    text.write_text("not an archive\n")
    for file, says in ((newer, "its schema revision (9999_from_the_future) is none of this version's"),
                       (text, "is not a Stepwise backup: ")):
        result = _restore(monkeypatch, database_url, file)
        assert result.exit_code == 1 and says in result.stderr, result.output
    with session_factory() as session:
        assert [p.name for p in session.scalars(select(Project))] == ["kept"]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_truncated_postgres_backup_changes_nothing(monkeypatch, database_url, engine, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Piped into psql, a pg_restore that died partway ended psql's input, and psql committed the
    dropped objects with half the tables: the archive is read whole before anything is dropped.
    (The revision check, which refuses most damaged files first, is passed here as a damaged
    archive whose revision reads well would pass it.)"""
    _postgres_only()
    project = make_project(session_factory, "kept")
    add_solutions(session_factory, project, 40, steps=3)
    backup = tmp_path / "stepwise.dump"
    assert _stepwise(database_url, "db", "backup", str(backup)).returncode == 0
    data = backup.read_bytes()
    cut = tmp_path / "cut.dump"
    cut.write_bytes(data[: len(data) * 3 // 4])
    monkeypatch.setattr(backup_module, "_dump_revisions", lambda source: [next(iter(heads()))])
    engine.dispose()
    result = _restore(monkeypatch, database_url, cut)
    assert result.exit_code == 1 and "nothing was restored" in result.stderr, result.output
    with session_factory() as session:
        assert [p.name for p in session.scalars(select(Project))] == ["kept"]


def test_a_backup_of_the_other_database_kind_is_named_as_such(monkeypatch, backend, database_url, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "kept")
    if backend == "sqlite":
        other, kind = tmp_path / "stepwise.dump", "PostgreSQL"
        other.write_bytes(b"PGDMP\x01\x0e\x00" + b"\x00" * 64)
    else:
        other, kind = _foreign(tmp_path / "stepwise.db", "CREATE TABLE t (x);"), "SQLite"
    result = _restore(monkeypatch, database_url, other)
    assert result.exit_code == 1, result.output
    assert f"Error: {other} is a backup of a {kind} database, and DATABASE_URL names a" in result.stderr
    with session_factory() as session:
        assert [p.name for p in session.scalars(select(Project))] == [project.name]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_postgres_restore_is_refused_while_others_are_connected(monkeypatch, database_url, engine, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _postgres_only()
    make_project(session_factory, "kept")
    backup = tmp_path / "stepwise.dump"
    assert _stepwise(database_url, "db", "backup", str(backup)).returncode == 0
    make_project(session_factory, "made after the backup")
    engine.dispose()
    with psycopg.connect(database_url, application_name="stepwise-api"), \
            psycopg.connect(database_url, application_name="stepwise-worker"):
        result = _restore(monkeypatch, database_url, backup, force=False)
        assert result.exit_code == 1, result.output
        # (This process may hold a connection of its own too: the job queue's, from another test.)
        assert re.search(r"Error: \d+ other sessions are connected to the database at .*: stop the server and "
                         r"workers first, or pass --force", result.stderr), result.stderr
        assert "1 stepwise-api" in result.stderr and "1 stepwise-worker" in result.stderr
        with session_factory() as session:
            assert len(session.scalars(select(Project)).all()) == 2
        engine.dispose()
        forced = _restore(monkeypatch, database_url, backup)
    assert forced.exit_code == 0, forced.output
    with session_factory() as session:
        assert [p.name for p in session.scalars(select(Project))] == ["kept"]


def test_a_sqlite_restore_is_refused_while_another_process_has_the_database_open(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLite keeps no list of sessions: the lock every WAL connection holds on its index is
    what says a server or worker has the database open. A database of its own, which no
    connection of this test process (other tests' engines) holds."""
    live = tmp_path / "live.db"
    url = f"sqlite:///{live}"
    upgrade(url)
    engine = create_db_engine(Settings(database_url=url, STEPWISE_ENV="test"))
    make_project(create_session_factory(engine), "kept")
    backup = tmp_path / "stepwise.backup"
    backup_module.backup(url, backup)
    make_project(create_session_factory(engine), "made after the backup")
    engine.dispose()

    def projects() -> list[str]:
        with closing(sqlite3.connect(live)) as db:
            return [name for (name,) in db.execute("SELECT name FROM projects ORDER BY id")]

    # A server's connection, as app.db opens it: in WAL mode, having read the database.
    server = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(live)!r}); db.execute('PRAGMA journal_mode=WAL')\n"
        "db.execute('SELECT count(*) FROM projects').fetchall(); print('open', flush=True); time.sleep(120)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "open"
        refused = _stepwise(url, "db", "restore", str(backup))
        # It went ahead: the server went on over tables replaced under it.
        assert refused.returncode == 1, refused.stderr
        assert f"another process has the database at {url} open (a server or worker): stop the server and " \
               "workers first, or pass --force" in refused.stderr
        assert projects() == ["kept", "made after the backup"]
    finally:
        server.kill()
        server.wait()
    # The -shm file a killed server leaves behind holds no lock: no refusal.
    assert live.with_name("live.db-shm").exists()
    restored = _stepwise(url, "db", "restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert projects() == ["kept"]
