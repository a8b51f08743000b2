"""The job queue's schema is ours to upgrade: procrastinate's release must not be newer than it."""

from __future__ import annotations

from importlib.resources import files

from app.rounds.jobs import JOB_QUEUE_SCHEMA, JOB_QUEUE_SCHEMA_MIGRATION


def test_the_installed_job_queue_needs_no_schema_our_migrations_lack() -> None:
    migrations = sorted(
        entry.name.removesuffix(".sql") for entry in files("procrastinate.sql.migrations").iterdir()
        if entry.name.endswith(".sql")
    )
    assert migrations[-1] == JOB_QUEUE_SCHEMA_MIGRATION, (
        f"procrastinate's schema moved on to {migrations[-1]}: write an Alembic migration that applies its "
        f"migrations after {JOB_QUEUE_SCHEMA_MIGRATION} to the {JOB_QUEUE_SCHEMA} schema, then move "
        "JOB_QUEUE_SCHEMA_MIGRATION and pyproject.toml's bound"
    )
