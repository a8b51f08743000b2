"""`autolabel` and `generate` with a generator they cannot use: a message, not a traceback."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from app.models import Label, Solution
from tests.cli.conftest import refused
from tests.conftest import add_solutions, make_project


def test_an_unreachable_endpoint_is_a_message(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    add_solutions(session_factory, make_project(session_factory, "P1"), 2, steps=2)
    for spec in ("http://127.0.0.1:1/v1#m", "http://127.0.0.1:1/v1"):
        result = stepwise(database_url, "autolabel", "--project", "P1", "--generator", spec)
        refused(result, "cannot reach http://127.0.0.1:1/v1/")
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_generate_refuses_a_model_it_cannot_load(stepwise, database_url, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    add_solutions(session_factory, make_project(session_factory, "P1"), 1)
    refused(stepwise(database_url, "generate", "--project", "P1", "--model", tmp_path / "missing"),
            "no such model directory")
    (tmp_path / "config.json").write_text("{}")  # a directory without a tokenizer or weights
    refused(stepwise(database_url, "generate", "--project", "P1", "--model", tmp_path), str(tmp_path))
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Solution)) == 1
