"""PRM800K export: imported records come back as they went in; labels made here export too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import select

from app.db import session_scope
from app.models import Label, User
from tests.conftest import make_project
from tests.exports.conftest import export, label_in_stepwise
from tests.imports.conftest import SAMPLE, import_bytes, row_counts, sample_records


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_import_then_export_gives_the_records_back(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    original = sample_records()
    exported = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    assert len(exported) == len(original)
    for want, got in zip(original, exported, strict=True):
        assert _without_nulls(got) == _without_nulls(want)
    # Records that spell out every key come back exactly, nulls, types and timestamps included.
    complete = [0, 1, 2, 5, 6, 8]
    for i in complete:
        assert exported[i] == original[i], f"record {i + 1}"
        assert orjson.dumps(exported[i], option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            original[i], option=orjson.OPT_SORT_KEYS
        )
    assert type(exported[2]["question"]["pre_generated_verifier_score"]) is int
    assert exported[2]["timestamp"] == "2022-11-30T23:59:59+01:00"


def test_export_of_an_import_of_an_export_is_the_same_file(session_factory) -> None:  # type: ignore[no-untyped-def]
    first = make_project(session_factory, "first")
    second = make_project(session_factory, "second")
    import_bytes(session_factory, first, SAMPLE.read_bytes())
    once = export(session_factory, first)
    import_bytes(session_factory, second, once)
    assert export(session_factory, second) == once


def test_export_imported_into_the_same_project_adds_nothing(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    before = row_counts(session_factory)
    result = import_bytes(session_factory, project, export(session_factory, project), filename="export.jsonl")
    assert result.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert row_counts(session_factory)["labels"] == before["labels"]


def test_label_made_here_exports_with_the_labelers_uuid(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, steps = label_in_stepwise(client, session_factory, [1, 0, 1], "solution")
    [line] = export(session_factory, project).splitlines()
    record = orjson.loads(line)
    with session_scope(session_factory) as session:
        uuid = session.scalar(select(User.labeler_uuid).where(User.username == "lena"))
        created_at = session.scalar(select(Label.created_at))
    assert record["labeler"] == uuid
    assert datetime.fromisoformat(record["timestamp"]) == created_at
    assert record["timestamp"] == created_at.isoformat()
    assert record["generation"] is None and record["is_quality_control_question"] is False
    assert record["question"]["pre_generated_steps"] == steps
    assert record["question"]["ground_truth_answer"] == "42"
    assert record["question"]["pre_generated_answer"] == "42"
    assert record["label"] == {
        "steps": [
            {
                "completions": [{"text": steps[i], "rating": r, "flagged": i == 1}],
                "human_completion": None,
                "chosen_completion": 0,
            }
            for i, r in enumerate([1, 0, 1])
        ],
        "total_time": 65432,
        "finish_reason": "solution",
    }


def test_labels_made_here_come_back_once_from_their_own_export(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = label_in_stepwise(client, session_factory, [1, 1, -1], "found_error")
    exported = export(session_factory, project)
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
    after = row_counts(session_factory)
    # Only the import's own record is new.
    assert after == {**before, "import_batches": before["import_batches"] + 1}
    # Another project has no such label: there the same file adds it.
    other = make_project(session_factory, "other")
    elsewhere = import_bytes(session_factory, other, exported, filename="export.jsonl")
    assert elsewhere.added == {"problems": 1, "solutions": 1, "labels": 1}
    assert export(session_factory, other) == exported
