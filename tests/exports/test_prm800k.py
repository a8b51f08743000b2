"""PRM800K export: imported records come back as they went in; labels made here export too."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from app.db import session_scope
from app.exports.prm800k import UNROUNDED_GENERATION
from app.models import Label, User
from tests.conftest import api_headers, make_project, make_user
from tests.exports.conftest import export, label_in_stepwise
from tests.imports.conftest import SAMPLE, import_bytes, jsonl, row_counts, sample_records


# PRM800K's keys in its order, each always written: the question's depend on the phase.
RECORD = [
    "labeler",
    "timestamp",
    "generation",
    "is_quality_control_question",
    "is_initial_screening_question",
    "question",
    "label",
]
PHASE_1_QUESTION = ["problem", "ground_truth_answer"]
PHASE_2_QUESTION = [
    "problem",
    "ground_truth_solution",
    "ground_truth_answer",
    "pre_generated_steps",
    "pre_generated_answer",
    "pre_generated_verifier_score",
]
LABEL = ["steps", "total_time", "finish_reason"]
PRM800K_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$")


def _assert_prm800k_shape(record: dict[str, Any], question: list[str], label: list[str] = LABEL) -> None:
    assert list(record) == RECORD
    assert list(record["question"]) == question
    assert list(record["label"]) == label
    assert PRM800K_TIMESTAMP.match(record["timestamp"]), record["timestamp"]
    if question == PHASE_1_QUESTION:
        assert record["generation"] is None
    else:
        assert type(record["generation"]) is int


def test_import_then_export_gives_the_records_back(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    original = sample_records()
    exported = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    assert len(exported) == len(original)
    # Every record comes back: keys left out stay out, and nulls, types and timestamps are as
    # written (keys unknown to PRM800K may move within their object).
    for i, (want, got) in enumerate(zip(original, exported, strict=True)):
        assert got == want, f"record {i + 1}"
        assert orjson.dumps(got, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            want, option=orjson.OPT_SORT_KEYS
        ), f"record {i + 1}"
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
    assert datetime.fromisoformat(record["timestamp"]).replace(tzinfo=UTC) == created_at
    # No round picked the solution: the generation stands in for one (see UNROUNDED_GENERATION).
    assert record["generation"] == UNROUNDED_GENERATION and record["is_quality_control_question"] is False
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


@pytest.mark.parametrize("ratings", [[-1], [1, -1], [1, 1, 1, 1, 1]])
def test_a_label_made_here_on_a_solution_of_a_phase_1_path_comes_back_from_its_export(client, session_factory, ratings) -> None:  # type: ignore[no-untyped-def]
    # The solution is a phase-1 labeler's path; a label made here rates it as given, as PRM800K's
    # phase 2 does: rendered as phase 1, the path it rated was lost, and a -1 on its first step
    # left nothing to make the solution of.
    project = make_project(session_factory, overlap=2)
    import_bytes(session_factory, project, jsonl([r for r in sample_records() if r["generation"] is None][:1]))
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    steps = task["solution"]["steps"]
    ratings = (ratings + [1] * len(steps))[:len(steps)] if -1 not in ratings else ratings
    submitted = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
        "idempotency_key": "phase-1-path-0001", "ratings": [{"rating": r} for r in ratings],
        "finish_reason": "found_error" if -1 in ratings else "solution", "total_time_ms": 1000})
    assert submitted.status_code == 200, submitted.text
    exported = export(session_factory, project)
    made_here = orjson.loads(exported.splitlines()[-1])
    assert made_here["question"]["pre_generated_steps"] == steps and made_here["generation"] == UNROUNDED_GENERATION
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert row_counts(session_factory) == {**before, "import_batches": before["import_batches"] + 1}


def test_phase_1_record_comes_back_in_prm800k_shape(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    original = sample_records()[3]
    assert original["generation"] is None and "pre_generated_steps" not in original["question"]
    record = orjson.loads(export(session_factory, project).splitlines()[3])
    _assert_prm800k_shape(record, PHASE_1_QUESTION)
    assert record == original


def test_phase_2_record_comes_back_in_prm800k_shape(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    original = sample_records()[0]
    record = orjson.loads(export(session_factory, project).splitlines()[0])
    _assert_prm800k_shape(record, PHASE_2_QUESTION)
    assert record == original and record["timestamp"] == "2023-01-22T04:34:27.052924"


def test_phase_2_record_missing_a_question_key_comes_back_without_it(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    # Another record gives the shared problem row a reference solution this one lacks.
    record = sample_records()[0]
    without = {**record, "labeler": "other", "question": dict(record["question"])}
    del without["question"]["ground_truth_solution"]
    import_bytes(session_factory, project, jsonl([record, without]))
    exported = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    assert exported == [record, without]


def test_give_up_made_here_keeps_its_note_in_prm800k_shape(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = label_in_stepwise(client, session_factory, [1], "give_up", note="Step 2 uses an unstated lemma.")
    exported = export(session_factory, project)
    record = orjson.loads(exported)
    _assert_prm800k_shape(record, PHASE_2_QUESTION, [*LABEL, "finish_note"])
    with session_scope(session_factory) as session:
        created_at = session.scalar(select(Label.created_at))
    assert record["timestamp"] == created_at.replace(tzinfo=None).isoformat()
    assert record["label"]["finish_reason"] == "give_up"
    assert record["label"]["finish_note"] == "Step 2 uses an unstated lemma."
    # Imported elsewhere, the note is the label's own again, and the export is the same.
    other = make_project(session_factory, "other")
    assert import_bytes(session_factory, other, exported).added["labels"] == 1
    with session_scope(session_factory) as session:
        notes = session.scalars(select(Label.finish_note).where(Label.project_id == other.id)).all()
    assert notes == ["Step 2 uses an unstated lemma."]
    assert export(session_factory, other) == exported


def test_label_made_here_without_a_note_has_no_note_key(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = label_in_stepwise(client, session_factory, [1, 1, 1], "solution")
    _assert_prm800k_shape(orjson.loads(export(session_factory, project)), PHASE_2_QUESTION)
