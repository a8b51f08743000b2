"""An option the chosen format does not read is refused by name, not silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_project


@pytest.mark.parametrize("args, message", [
    (["export", "--format", "prm800k", "--neutral", "negative"], "--neutral applies to --format trl, not prm800k"),
    (["export", "--format", "parquet", "--neutral", "negative"], "--neutral applies to --format trl, not parquet"),
    (["export", "--format", "prm800k", "--completions", "all"],
     "--completions applies to --format trl or parquet or hf, not prm800k"),
    (["import", "--format", "prm800k", "--separator", "##"], "--separator applies to --format solutions, not prm800k"),
    (["import", "--format", "math", "--separator", "##"], "--separator applies to --format solutions, not math"),
])
def test_an_option_the_format_does_not_read_is_refused(
    stepwise, database_url, session_factory, tmp_path: Path, args: list[str], message: str  # type: ignore[no-untyped-def]
) -> None:
    make_project(session_factory, "P1")
    data = tmp_path / "data.jsonl"
    data.write_text('{"problem": "What is 1+1?", "answer": "2"}\n')
    where = ["--output", tmp_path / "out"] if args[0] == "export" else [data]
    result = stepwise(database_url, *args, "--project", "P1", *where)
    assert result.exit_code == 2 and message in result.output, result.output
    assert list(tmp_path.iterdir()) == [data]


def test_the_same_options_are_taken_where_they_apply(stepwise, database_url, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "P1")
    result = stepwise(database_url, "export", "--project", "P1", "--format", "trl", "--neutral", "negative",
                      "--completions", "all", "--output", tmp_path / "out.jsonl")
    assert result.exit_code == 0, result.output
