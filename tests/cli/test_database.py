"""A database the command cannot use: not migrated, not there, not reachable, a revision it lacks."""

from __future__ import annotations

import socket
from pathlib import Path

from sqlalchemy import create_engine, inspect

from app.migrate import upgrade
from tests.cli.conftest import refused


def test_a_database_without_schema_says_to_upgrade(stepwise, fresh_database: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    records = tmp_path / "problems.jsonl"
    records.write_text('{"problem": "1+1?", "answer": "2"}\n')
    if fresh_database.startswith("sqlite"):
        Path(fresh_database.removeprefix("sqlite:///")).touch()
    for args in (["projects", "list"], ["import", "--project", "p", "--format", "math", records]):
        refused(stepwise(fresh_database, *args), "has no schema", "stepwise db upgrade")
    assert inspect(create_engine(fresh_database)).get_table_names() == []


def test_a_missing_sqlite_file_is_not_created(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "none.db"
    refused(stepwise(f"sqlite:///{path}", "projects", "list"), f"no database at {path}", "stepwise db upgrade")
    assert not path.exists()


def test_an_unreachable_database_is_named_without_its_password(stepwise) -> None:  # type: ignore[no-untyped-def]
    down = "postgresql://ann:secret@127.0.0.1:1/stepwise"
    for args in (["projects", "list"], ["db", "upgrade"]):
        result = stepwise(down, *args)
        refused(result, "cannot use the database at postgresql+psycopg://ann:***@127.0.0.1:1/stepwise")
        assert "secret" not in result.output
    refused(stepwise("sqlite:////nonexistent/dir/x.db", "db", "upgrade"), "cannot use the database at sqlite:////nonexistent/dir/x.db")


def test_a_database_that_never_answers_is_given_up_on(stepwise, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A server that accepts connections and says nothing: libpq alone waits forever.
    monkeypatch.setattr("app.db.CONNECT_TIMEOUT_S", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://ann@127.0.0.1:{silent.getsockname()[1]}/stepwise"
        for args in (["users", "list"], ["db", "upgrade"]):
            refused(stepwise(url, *args), "cannot use the database at", "timeout expired")


def test_a_relative_downgrade_says_where_the_database_is(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'steps.db'}"
    upgrade(url, "0007")
    done = stepwise(url, "db", "downgrade", "-1", "--yes")
    assert done.exit_code == 0 and done.output.strip().endswith("database at 0006"), done.output
    assert stepwise(url, "db", "downgrade", "base", "--yes").output.strip().endswith("database at base (no migration applied)")


def test_a_downgrade_says_what_it_drops_and_asks_first(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'steps.db'}"
    upgrade(url)
    kept = stepwise(url, "db", "downgrade", "0033", input="n\n")
    assert kept.exit_code == 1 and "Aborted" in kept.output
    assert "0035  an API token may be read-only" in kept.output and "0034  a browser session records" in kept.output
    assert "Tokens made read-only or to expire are revoked first" in kept.output
    assert "0033" not in kept.output.split("Revert", 1)[1].split("?", 1)[0]
    assert "api_tokens" in inspect(create_engine(url)).get_table_names()
    assert "read_only" in {c["name"] for c in inspect(create_engine(url)).get_columns("api_tokens")}
    done = stepwise(url, "db", "downgrade", "0033", input="y\n")
    assert done.exit_code == 0 and done.output.strip().endswith("database at 0033"), done.output
    assert stepwise(url, "db", "downgrade", "0033").output.strip() == "nothing to revert\ndatabase at 0033"


def test_an_unknown_revision_is_refused(stepwise, database_url: str) -> None:  # type: ignore[no-untyped-def]
    refused(stepwise(database_url, "db", "upgrade", "--revision", "zzz"), "cannot upgrade to 'zzz'", "zzz")
    refused(stepwise(database_url, "db", "downgrade", "zzz"), "cannot downgrade to 'zzz'")
    assert stepwise(database_url, "projects", "list").exit_code == 0


def test_a_file_that_is_not_a_database_is_named(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, but long enough for SQLite to read a header from it\n" * 20)
    refused(stepwise(f"sqlite:///{notes}", "projects", "list"), "cannot use the database at", "not a database")
    refused(stepwise(f"sqlite:///{notes}", "db", "upgrade"), "cannot use the database at", "not a database")


def test_the_demo_refuses_a_production_database(stepwise, database_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("STEPWISE_ENV", "production")
    refused(stepwise(database_url, "demo", "--no-serve"), "not with STEPWISE_ENV=production")
    assert "demo-admin" not in stepwise(database_url, "users", "list").output


def test_a_database_behind_on_migrations_says_to_upgrade(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    refused(stepwise(url, "projects", "list"), "migrations are not at head (database at 0007", "stepwise db upgrade")


def test_a_database_migrated_by_newer_code_does_not_say_to_upgrade(stepwise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A rolling deploy, or this code rolled back: `db upgrade` from here cannot help.
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    upgrade(url)
    with create_engine(url).begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    refused(stepwise(url, "projects", "list"), "the database is at a revision this code does not know (database at 9999",
            "`stepwise db downgrade` with that code")
