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
    # Nothing matched (the project has no labels): said, though an export since the last may
    # rightly find nothing.
    assert "warning: no label matches these filters; the export is empty" in result.output


# Exit status 2 for arguments refused as they are (as click's own refusals), 1 for arguments
# well formed that name nothing there is (no labels by that labeler here).
@pytest.mark.parametrize("args, lines, status", [
    (["export", "--project", "P1", "--format", "trl", "--source", "human,robot", "--min-agreement", "3"],
     ["--source (value 2): must be one of 'human', 'rollout', 'judge' or 'prm'", "--min-agreement: must be at most 1"], 2),
    (["export", "--project", "P1", "--format", "trl", "--generation", "1", "--generation", "99999999999"],
     ["--generation (value 2): must be at most 2147483647"], 2),
    (["export", "--project", "P1", "--format", "trl", "--labeler", "", "--since", "2020-02-30"],
     ["--labeler (value 1): must be at least 1 characters long", "--since: must be a date (YYYY-MM-DD)"], 2),
    (["export", "--project", "P1", "--format", "trl", "--since", "2030-01-01", "--until", "2020-01-01"],
     ["--since/--until: since (labeled on or after) must be before until (labeled before)"], 2),
    (["export", "--project", "P1", "--format", "trl", "--labeler", "nobody", "--generation", "-4"],
     ["--labeler: no labels by 'nobody' here"], 1),
    (["export", "--project", "P1", "--format", "trl", "--generation", "-4"],
     ["--generation: no labels of generation -4 here"], 1),
    (["projects", "create", "x" * 101, "--overlap", "0"],
     ["NAME: must be at most 100 characters long", "--overlap: must be at least 1"], 2),
    (["projects", "create", "caf\u00e9"], ["NAME: use only 1-100 letters (A-Z, without accents), digits, space, _ . -"], 2),
])
def test_a_bad_value_is_named_by_the_option_that_gave_it(
    stepwise, database_url, session_factory, tmp_path: Path, args: list[str], lines: list[str], status: int  # type: ignore[no-untyped-def]
) -> None:
    make_project(session_factory, "P1")
    where = ["--output", tmp_path / "out.jsonl"] if args[0] == "export" else []
    result = stepwise(database_url, *args, *where)
    assert result.exit_code == status and result.stderr.startswith("Error: "), result.output
    for line in lines:
        assert f"  {line}" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_short_password_from_standard_input_is_named_as_such(stepwise, database_url) -> None:  # type: ignore[no-untyped-def]
    result = stepwise(database_url, "users", "create", "--username", "ana", "--role", "labeler", input="short\n")
    assert result.exit_code == 2
    assert "  the password: must be at least 8 characters long" in result.stderr, result.stderr


@pytest.mark.parametrize("args, option", [
    (["tokens", "revoke", "abc"], "'TOKEN_ID'"),
    (["tokens", "create", "--username", "ann", "--expires-in-days", "abc"], "'--expires-in-days'"),
    (["worker", "--metrics-port", "abc"], "'--metrics-port'"),
    (["prm", "synth", "--error-rate", "half"], "'--error-rate'"),
])
def test_a_word_for_a_number_is_said_to_be_no_number(stepwise, database_url, args: list[str], option: str) -> None:  # type: ignore[no-untyped-def]
    result = stepwise(database_url, *args)
    # click's ranges lent their name to the error: "'abc' is not a valid integer range".
    assert result.exit_code == 2, result.output
    number = "float" if option == "'--error-rate'" else "integer"
    assert f"Invalid value for {option}: {args[-1]!r} is not a valid {number}." in result.stderr, result.stderr
    assert "range" not in result.stderr.splitlines()[-1]
