"""`stepwise projects create --guidelines` and `stepwise projects guidelines`: guidelines kept in
a file (in git, say) go to the project, and back out unchanged."""

from __future__ import annotations

from pathlib import Path

from app.projects.guidelines import GUIDELINES_MAX_LENGTH
from tests.cli.conftest import refused
from tests.conftest import make_project
from tests.projects.test_guidelines import GUIDELINES, stored_guidelines


def test_the_cli_sets_prints_and_removes_guidelines(stepwise, database_url, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "guidelines.md"
    source.write_text(GUIDELINES, encoding="utf-8")
    created = stepwise(database_url, "projects", "create", "algebra", "--guidelines", source)
    assert created.exit_code == 0, created.output
    assert stored_guidelines(session_factory) == GUIDELINES
    shown = stepwise(database_url, "projects", "guidelines", "algebra")
    assert shown.exit_code == 0 and shown.stdout == GUIDELINES
    replaced = stepwise(database_url, "projects", "guidelines", "algebra", "-", input="Only this.\n")
    assert replaced.exit_code == 0 and "guidelines set, 2 words" in replaced.stdout
    assert stored_guidelines(session_factory) == "Only this.\n"
    removed = stepwise(database_url, "projects", "guidelines", "algebra", "-", input="")
    assert "guidelines removed" in removed.stdout and stored_guidelines(session_factory) == ""
    none = stepwise(database_url, "projects", "guidelines", "algebra")
    assert none.exit_code == 0 and none.stdout == "" and "has no guidelines" in none.stderr


def test_the_cli_refuses_guidelines_it_cannot_store(stepwise, database_url, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "algebra", guidelines="Kept.")
    latin1 = tmp_path / "latin1.md"
    latin1.write_bytes("Très bien".encode("latin-1"))
    refused(stepwise(database_url, "projects", "guidelines", "algebra", latin1), "not UTF-8 text")
    huge = tmp_path / "huge.md"
    huge.write_text("x" * (GUIDELINES_MAX_LENGTH + 1))
    result = stepwise(database_url, "projects", "guidelines", "algebra", huge)
    # Refused as it is, as click refuses a bad value: exit status 2.
    assert result.exit_code == 2 and "guidelines" in result.stderr and "Traceback" not in result.output
    assert stored_guidelines(session_factory) == "Kept."
    refused(stepwise(database_url, "projects", "create", "other", "--guidelines", latin1), "not UTF-8 text")
