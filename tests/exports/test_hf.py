"""`stepwise export --format hf`: a `datasets` directory whose rows are the Parquet export's."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.config import get_settings
from app.exports.parquet import SCHEMA
from tests.conftest import make_project
from tests.exports.conftest import export, label_in_stepwise, labels_in_two_modes
from tests.imports.conftest import SAMPLE, import_bytes

datasets = pytest.importorskip("datasets", reason="the hf extra (pip install '.[hf]')")


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[None]:
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _export_hf(project_name: str, output: Path, *options: str) -> str:
    result = CliRunner().invoke(
        cli, ["export", "--project", project_name, "--format", "hf", "--output", str(output), *options]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_hf_export_loads_as_the_parquet_exports_rows(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    output = tmp_path / "labels"
    assert _export_hf(project.name, output, "--qc", "exclude") == f"exported 8 labels to {output}\n"
    loaded = datasets.load_from_disk(str(output))
    parquet = pq.read_table(io.BytesIO(export(session_factory, project, "parquet", qc="exclude")))
    assert loaded.column_names == SCHEMA.names
    assert loaded.data.table.schema.types == SCHEMA.types
    assert loaded.to_list() == parquet.to_pylist()
    card = (output / "README.md").read_text()
    assert "- `qc`: exclude" in card
    assert "- labels: 8" in card
    # Imported labels were made under no mode of this project.
    assert "- null (8 labels): not known: imported or made by a machine" in card and "first -1 ends the label" not in card
    ratings = [r for row in parquet.column("ratings").to_pylist() for r in row]
    assert f"+1: {ratings.count(1)}, 0: {ratings.count(0)}, -1: {ratings.count(-1)}" in card
    assert all(f"| `{name}` |" in card for name in SCHEMA.names)
    # Nothing is left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels"]


def test_the_card_quotes_the_guidelines_the_labelers_read(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with_guidelines = make_project(session_factory, "graded", guidelines="# Grading\n\nRate $x$ **+1** when right.\n")
    without = make_project(session_factory, "bare")
    for project in (with_guidelines, without):
        import_bytes(session_factory, project, SAMPLE.read_bytes())
        _export_hf(project.name, tmp_path / project.name)
    card = (tmp_path / "graded" / "README.md").read_text()
    assert "## Labeling guidelines" in card
    assert "> # Grading\n>\n> Rate $x$ **+1** when right.\n" in card
    assert card.index("## Labeling guidelines") < card.index("## Filters")
    assert "## Labeling guidelines" not in (tmp_path / "bare" / "README.md").read_text()


def test_hf_export_keeps_a_give_up_note(cli_env, client, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project, _ = label_in_stepwise(client, session_factory, [1], "give_up", note="The problem is ambiguous.")
    _export_hf(project.name, tmp_path / "labels")
    [row] = datasets.load_from_disk(str(tmp_path / "labels")).to_list()
    assert row["finish_reason"] == "give_up" and row["finish_note"] == "The problem is ambiguous."
    assert row["ratings"] == [1]


def test_hf_export_of_nothing_is_an_empty_dataset(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _export_hf(project.name, tmp_path / "labels")
    loaded = datasets.load_from_disk(str(tmp_path / "labels"))
    assert len(loaded) == 0 and loaded.column_names == SCHEMA.names


def test_hf_export_refuses_an_existing_directory(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "mine.txt").write_text("keep")
    result = CliRunner().invoke(
        cli, ["export", "--project", project.name, "--format", "hf", "--output", str(tmp_path / "labels")]
    )
    assert result.exit_code == 1
    assert "already exists" in result.stderr
    assert [p.name for p in (tmp_path / "labels").iterdir()] == ["mine.txt"]


def test_hf_export_refuses_standard_output(cli_env, session_factory, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["export", "--project", project.name, "--format", "hf", "--output", "-"])
    assert result.exit_code == 1
    assert "a dataset is a directory, not standard output" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_file_formats_refuse_a_directory(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    result = CliRunner().invoke(
        cli, ["export", "--project", project.name, "--format", "parquet", "--output", str(tmp_path)]
    )
    assert result.exit_code == 1 and "is a directory" in result.stderr


def test_hf_export_with_every_completion_has_the_marked_columns(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    output = tmp_path / "every"
    _export_hf(project.name, output, "--completions", "all")
    loaded = datasets.load_from_disk(str(output))
    parquet = pq.read_table(io.BytesIO(export(session_factory, project, "parquet", completions="all")))
    assert loaded.column_names == [*SCHEMA.names, "human_written", "alternative_at"]
    assert loaded.to_list() == parquet.to_pylist()
    card = (output / "README.md").read_text()
    assert "- `completions`: all" in card and "| `human_written` |" in card
    # Counted by label, as without the alternatives: their rows repeat the steps before them.
    labels = [row for row in parquet.to_pylist() if row["alternative_at"] is None]
    ratings = [r for row in labels for r in row["ratings"]]
    assert f"- labels: {len(labels)}, and {parquet.num_rows - len(labels)} rows of rated alternatives" in card
    assert f"+1: {ratings.count(1)}, 0: {ratings.count(0)}, -1: {ratings.count(-1)}" in card
    reasons = sorted({row["finish_reason"] for row in labels})
    counted = ", ".join(f"{reason}: {sum(row['finish_reason'] == reason for row in labels)}" for reason in reasons)
    assert f"- finish reasons: {counted}" in card


def test_the_card_counts_the_modes_the_labels_were_made_in(cli_env, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project, *_ = labels_in_two_modes(session_factory)
    _export_hf(project.name, tmp_path / "labels")
    loaded = datasets.load_from_disk(str(tmp_path / "labels"))
    assert Counter(loaded["labeling_mode"]) == {"first_error": 1, "full": 1, None: 10}
    card = (tmp_path / "labels" / "README.md").read_text()
    # Not the project's mode now: the mode of each label.
    assert "- `first_error` (1 label): PRM800K phase 2's: steps are rated top to bottom" in card
    assert "- `full` (1 label): every step is rated, after a -1 too" in card
    assert "- null (10 labels): not known: imported or made by a machine" in card
    assert "- `phase1`" not in card
    assert "| `labeling_mode` | `string` |" in card
