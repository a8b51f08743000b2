"""Hugging Face `datasets` export: the Parquet export's rows, saved by `Dataset.save_to_disk`
with a dataset card, for `datasets.load_from_disk`.

The rows go through the Parquet export into a file and `Dataset.from_parquet` reads it into a
memory-mapped Arrow cache beside it, so an export of any size is never held in memory; both are
temporary. A directory is not a stream, so only the CLI writes this format.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.orm import Session

from app.exports.parquet import EVERY_COMPLETION_SCHEMA, SCHEMA
from app.ops.files import output_directory
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from app.models import LabelingMode, Project

# What each column holds, for the card; the schema is the Parquet export's.
COLUMNS = {
    "label_id": "the label's id in Stepwise",
    "labeler": "imported labeler id, or the UUID of the Stepwise user",
    "created_at": "when the label was submitted (UTC)",
    "generation": "active-learning round or PRM800K generation, as stored; null where none was: a PRM800K "
                  "phase-1 record, or a label made on a solution no round picked (the PRM800K export writes 1 there)",
    "is_quality_control": "the label is quality-control gold",
    "is_initial_screening": "PRM800K's screening questions (generation -1)",
    "finish_reason": "solution, found_error, give_up or bad_problem",
    "finish_note": "the labeler's reason for give_up or bad_problem",
    "total_time_ms": "active time on the task",
    "problem_id": "the problem's id in Stepwise",
    "problem_unique_id": "the id the problem's file gave it (MATH's unique_id), if any",
    "problem": "the problem statement",
    "ground_truth_answer": "the problem's reference answer",
    "solution_id": "the solution's id in Stepwise",
    "solution_origin": "JSON: where the solution came from (file and line, the other keys its file gave, "
    "such as the model that wrote it, under meta; or the generator's settings)",
    "final_answer": "the answer the solution reaches",
    "answer_grade": "that answer against the reference: right, wrong, no_answer or ungraded",
    "verifier_score": "the score the generating pipeline gave the solution",
    "steps": "the steps the labeler went through, in order",
    "ratings": "one per step: 1, 0, -1, or null where the step was not rated",
    "flagged": "one per step: the labeler marked it unsure",
    "human_written": "one per step: the labeler wrote it (PRM800K's human completion)",
    "alternative_at": "on a rated alternative's row, its step's index (the steps before it are the "
    "labeler's); null on the label's own row",
    "source": "who labeled: human, or a machine (rollout, judge, prm)",
    "source_detail": "for a machine label, JSON naming the model, its parameters and what it measured",
    "labeling_mode": "the mode the label was made in: first_error, full or phase1; null where not known: "
    "imported, made by a machine, or made before Stepwise kept it",
}

_MODES = {
    LabelingMode.first_error: (
        "PRM800K phase 2's: steps are rated top to bottom and the first -1 ends the label, so "
        "`ratings` stop at it; the steps after it were not judged, neither right nor wrong"
    ),
    LabelingMode.full: "every step is rated, after a -1 too",
    LabelingMode.phase1: (
        "PRM800K phase 1's: each step came with alternative completions, every one rated; `steps` "
        "are the ones the labeler continued with (chosen or self-written)"
    ),
}


def write_dataset(session: Session, project: Project, filters: ExportFilters, directory: Path) -> int:
    """Save the export as a `datasets` directory at `directory`, which must not exist yet;
    returns the number of labels. Written beside it and renamed, so that a failed export leaves
    nothing at `directory`."""
    import datasets

    output_directory(directory)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix=f".{directory.name}.", dir=directory.parent) as work:
        parquet = Path(work) / "labels.parquet"
        with parquet.open("wb") as sink:
            count = write_export(session, project, "parquet", filters, sink)
        schema = EVERY_COMPLETION_SCHEMA if filters.completions == "all" else SCHEMA
        features = datasets.Features.from_arrow_schema(schema)
        if count:
            dataset = datasets.Dataset.from_parquet(
                str(parquet), features=features, cache_dir=str(Path(work) / "cache")
            )
        else:
            # from_parquet refuses a file without rows.
            dataset = datasets.Dataset.from_dict({name: [] for name in schema.names}, features=features)
        staged = Path(work) / "dataset"
        # An empty dataset is saved with no shard at all unless one is asked for, and then
        # load_from_disk fails on it.
        dataset.save_to_disk(str(staged), num_shards=None if count else 1)
        (staged / "README.md").write_text(dataset_card(project, filters, dataset.data.table), encoding="utf-8")
        staged.rename(directory)
    return count


def dataset_card(project: Project, filters: ExportFilters, table: pa.Table) -> str:
    # The counts are of labels: with every completion exported, an alternative's row repeats the
    # steps before it, which counted would rate them again and finish the label twice.
    own = table.filter(pc.is_null(table["alternative_at"])) if "alternative_at" in table.column_names else table
    alternatives = table.num_rows - own.num_rows
    ratings = pc.list_flatten(own["ratings"])
    counts = _value_counts(ratings)
    reasons = _value_counts(own["finish_reason"])
    chosen = filters.model_dump(exclude={"neutral"}, exclude_defaults=True, mode="json")
    lines = [
        f"# Stepwise labels: {project.name}",
        "",
        "Step-level human ratings of math solutions, exported by Stepwise "
        "(`stepwise export --format hf`). Load with `datasets.load_from_disk(DIR)`.",
        "",
        "## Ratings",
        "",
        "Each step is rated as in PRM800K:",
        "",
        "- `1` (+1): correct and advances the solution;",
        "- `0` (neutral): correct but no progress, or reasonable but not clearly right; "
        "kept as 0 here (the TRL export is where a neutral becomes good or bad);",
        "- `-1`: wrong, or misleading;",
        "- null: not rated.",
        "",
        "A step a labeler wrote themselves (PRM800K's `human_completion`) is rated 1 where its record "
        "left it unrated: PRM800K's labelers wrote their own step only as a correct one.",
        "",
        "A `give_up` or `bad_problem` label keeps the ratings made before it, and its reason in `finish_note`.",
        "",
        "## Labeling modes",
        "",
        "Each label made in Stepwise was made in the mode its `labeling_mode` names, the one its task was "
        "served in (a project may change mode between labels):",
        "",
        *_mode_lines(own),
        "",
        *_guidelines_section(project.guidelines),
        "## Filters",
        "",
        *([f"- `{key}`: {value}" for key, value in chosen.items()] or ["- none: every current label"]),
        "- only current labels: a corrected label gives way to its correction",
        "",
        "## Counts",
        "",
        f"- labels: {own.num_rows}"
        + (f", and {alternatives} rows of rated alternatives (`alternative_at`), not counted below"
           if alternatives else ""),
        f"- rated steps: {len(ratings) - ratings.null_count} of {len(ratings)} steps",
        f"- ratings: +1: {counts.get(1, 0)}, 0: {counts.get(0, 0)}, -1: {counts.get(-1, 0)}",
        "- finish reasons: " + (", ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=str)) or "none"),
        "",
        "## Columns",
        "",
        "| column | type | meaning |",
        "| --- | --- | --- |",
        *[f"| `{field.name}` | `{field.type}` | {COLUMNS[field.name]} |" for field in table.schema],
        "",
    ]
    return "\n".join(lines)


def _mode_lines(labels: pa.Table) -> list[str]:
    counts = _value_counts(labels["labeling_mode"])
    lines = [f"- `{mode}` ({_labels(counts[mode])}): {_MODES[mode]}" for mode in LabelingMode if mode in counts]
    if without := labels["labeling_mode"].null_count:
        lines.append(f"- null ({_labels(without)}): not known: imported or made by a machine (the ratings are "
                     "the file's or the machine's), or made before Stepwise kept each label's mode")
    return lines or ["- no labels"]


def _labels(count: int) -> str:
    return f"{count} label{'' if count == 1 else 's'}"


def _guidelines_section(guidelines: str) -> list[str]:
    if not guidelines:
        return []
    # Quoted, so that their own headings stay inside this section.
    quoted = [f"> {line}".rstrip() for line in guidelines.strip().splitlines()]
    return [
        "## Labeling guidelines",
        "",
        "What the project's labelers read before labeling, as they stand at export time (a label "
        "made before an edit was made under the earlier text):",
        "",
        *quoted,
        "",
    ]


def _value_counts(values: Any) -> dict[Any, int]:
    counted = pc.value_counts(values)
    return {v["values"]: v["counts"] for v in counted.to_pylist() if v["values"] is not None}
