"""Every PRM800K shape the importer takes is one the PRM trainer and scorer take too.

Import → export → `stepwise prm train` → `stepwise prm score`, and the round's label snapshot,
over the sample (phase 1 and 2, human completion objects, chosen_completion null, QC, give_up
and bad_problem, alternatives, unknown keys) and human completions given as bare strings.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from active_learning.cli import prm
from active_learning.data import load_examples
from app.db import session_scope
from app.imports.fields import Invalid
from app.imports.prm800k import parse_prm800k
from app.models import Label
from app.rounds.pool import label_records
from tests.conftest import make_project
from tests.exports.conftest import export
from tests.imports.conftest import import_bytes, jsonl, row_counts, sample_records


def _string_human_records() -> list[dict[str, Any]]:
    """Phase 1 and phase 2 records whose human completion is a string, and one whose human
    completion is null where nothing was chosen."""
    records = sample_records()
    phase1 = copy.deepcopy(next(r for r in records if "pre_generated_steps" not in r["question"]
                                and any(s["human_completion"] for s in r["label"]["steps"])))
    phase1["labeler"] = "string-human-phase-1"
    phase1["label"]["steps"][1]["human_completion"] = "$g(-2) = 9$, written by hand."
    phase2 = copy.deepcopy(next(r for r in records if r["question"].get("pre_generated_steps")
                                and r["label"]["finish_reason"] == "found_error"))
    phase2["labeler"] = "string-human-phase-2"
    phase2["label"]["steps"][-1]["human_completion"] = "A step the labeler wrote instead."
    open_end = copy.deepcopy(phase1)
    open_end["labeler"] = "nothing-chosen"
    open_end["label"]["steps"] = open_end["label"]["steps"][:2]
    open_end["label"]["steps"][1]["human_completion"] = None
    open_end["label"]["finish_reason"] = "found_error"
    return [phase1, phase2, open_end]


EMPTY_STEP = {"completions": None, "human_completion": None, "chosen_completion": None}


def _empty_end_record() -> dict[str, Any]:
    """A phase-1 record whose label ends in a step with nothing in it, as some of PRM800K's
    phase-1 labels do (TRL's conversion script stops at one)."""
    record = copy.deepcopy(next(r for r in sample_records() if "pre_generated_steps" not in r["question"]))
    record["labeler"] = "empty-end"
    record["label"]["steps"] += [EMPTY_STEP, {**EMPTY_STEP, "unknown_key": 1}]
    return record


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_string_human_completion_is_stored_as_an_object_and_exported_as_given(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    records = _string_human_records()
    import_bytes(session_factory, project, jsonl(records))
    with session_scope(session_factory) as session:
        label = session.scalar(select(Label).where(Label.foreign_labeler == "string-human-phase-1"))
        assert label is not None
        assert label.steps[1]["human_completion"] == {
            "text": "$g(-2) = 9$, written by hand.", "rating": None, "source": "human",
            "flagged": None, "corrected_rating": None,
        }
    exported = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    # The sample's phase 1 records leave out some null question fields, which come back as null.
    assert [_without_nulls(r) for r in exported] == [_without_nulls(r) for r in records]
    assert exported[0]["label"]["steps"][1]["human_completion"] == "$g(-2) = 9$, written by hand."
    assert exported[1]["label"]["steps"][-1]["human_completion"] == "A step the labeler wrote instead."
    # The content hash is taken from the string as given: the export adds nothing back.
    before = row_counts(session_factory)["labels"]
    result = import_bytes(session_factory, project, export(session_factory, project))
    assert result.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert row_counts(session_factory)["labels"] == before


def test_string_human_completion_keeps_the_hash_earlier_imports_gave_it() -> None:
    # Label hashes of these records as computed before strings were stored as objects (b54eed1).
    earlier = ["aaadb5d4e52c4600", "832e55d0b4739183", "04f2df25cba3eee3"]
    hashes = []
    for record in _string_human_records():
        parsed = parse_prm800k(orjson.dumps(record), {"file": "x"}, datetime(2024, 1, 1, tzinfo=UTC))
        assert parsed.label is not None
        hashes.append(parsed.label.hash_for(parsed.solution.hash_for(parsed.problem.hash))[:16])
    assert hashes == earlier


def test_empty_steps_ending_a_label_come_back_as_given(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    record = _empty_end_record()
    import_bytes(session_factory, project, jsonl([record]))
    with session_scope(session_factory) as session:
        label = session.scalar(select(Label).where(Label.foreign_labeler == "empty-end"))
        assert label is not None and len(label.steps) == len(record["label"]["steps"]) - 2
    [exported] = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    assert exported["label"]["steps"][-2:] == [EMPTY_STEP, {**EMPTY_STEP, "unknown_key": 1}]
    assert _without_nulls(exported) == _without_nulls(record)
    result = import_bytes(session_factory, project, export(session_factory, project))
    assert result.added == {"problems": 0, "solutions": 0, "labels": 0}


def test_an_empty_step_before_the_end_is_refused() -> None:
    record = _empty_end_record()
    record["label"]["steps"].insert(1, EMPTY_STEP)
    with pytest.raises(Invalid) as caught:
        parse_prm800k(orjson.dumps(record), {"file": "x"}, datetime(2024, 1, 1, tzinfo=UTC))
    assert (caught.value.field, caught.value.message) == (
        "label.steps[1].completions", "is null, which only an empty step at the end of a label may be")


def test_every_imported_shape_trains_and_scores(session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(sample_records() + _string_human_records() + [_empty_end_record()]))
    exported = tmp_path / "export.jsonl"
    exported.write_bytes(export(session_factory, project))
    assert b'"human_completion":"$g(-2) = 9$, written by hand."' in exported.read_bytes()

    examples = load_examples(str(exported))
    assert any("$g(-2) = 9$, written by hand." in e.steps for e in examples)
    # A round reads the labels from the database, not from the export.
    with session_scope(session_factory) as session:
        snapshot = load_examples(label_records(session, project.id, 10**9))
    assert sorted(map(repr, snapshot)) == sorted(map(repr, examples))

    runner = CliRunner()
    model = tmp_path / "prm"
    trained = runner.invoke(prm, ["train", "--train", str(exported), "--eval", str(exported), "--output",
                                  str(model), "--base", "tiny", "--steps", "2", "--batch-size", "2"])
    assert trained.exit_code == 0, trained.output
    scores = tmp_path / "scores.jsonl"
    scored = runner.invoke(prm, ["score", "--model", str(model), "--input", str(exported), "--output",
                                 str(scores), "--device", "cpu"])
    assert scored.exit_code == 0, scored.output
    rows = [orjson.loads(line) for line in scores.read_bytes().splitlines()]
    assert len(rows) == len(exported.read_bytes().splitlines())
    assert all(row["step_scores"] and None not in row["step_scores"] for row in rows)
