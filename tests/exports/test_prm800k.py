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
from app.models import Label, Project, User
from app.projects.schemas import ProjectUpdate
from app.projects.service import update_project
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


# The sample's phase-2 record of five pre-generated steps, rated with alternatives at the third.
PHASE_2_RECORD = sample_records()[0]


def _phase_1_task(client, session_factory, records, username="lena", overlap=3):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="phase1", overlap=overlap)
    import_bytes(session_factory, project, jsonl(records))
    make_user(session_factory, username, "labeler")
    headers = api_headers(client, username)
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    return project, headers, task


def _went_on(rated: list[int], chosen: int | None = 0, human: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"ratings": [{"rating": r} for r in rated], "chosen": chosen}
    if human is not None:
        step["human"] = {"text": human, "rating": 1}
    return step


def _submit_alternatives(client, headers, task, steps, reason="solution", note=None):  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
        "idempotency_key": f"alternatives-{task['assignment_id']}", "alternatives": steps,
        "finish_reason": reason, "finish_note": note, "total_time_ms": 2000})
    assert response.status_code == 200, response.text


WRITTEN = "The largest such integer is $\\gcd(20!, 200{,}000)$."


@pytest.mark.parametrize("went_on", ["alternative", "written step"])
def test_a_phase_1_label_off_a_pre_generated_solution_exports_as_phase_1(client, session_factory, went_on) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _phase_1_task(client, session_factory, [PHASE_2_RECORD])
    alternatives = task["solution"]["alternatives"]
    steps = PHASE_2_RECORD["question"]["pre_generated_steps"]
    assert [len(a) for a in alternatives] == [1, 1, 3, 1, 1] and alternatives[2][0] == steps[2]
    if went_on == "alternative":
        # The solution's third step rated -1, the second alternative chosen.
        sent = [_went_on([1]), _went_on([1]), _went_on([-1, 1, -1], chosen=1), _went_on([1]), _went_on([1])]
        path = [steps[0], steps[1], alternatives[2][1], steps[3], steps[4]]
    else:
        sent = [_went_on([-1], chosen=None, human=WRITTEN), _went_on([1]), _went_on([1, 0, -1]), _went_on([1]),
                _went_on([1])]
        path = [WRITTEN, *steps[1:]]
    _submit_alternatives(client, headers, task, sent)
    exported = export(session_factory, project)
    record = orjson.loads(exported.splitlines()[-1])
    # Phase 1's shape: the path is the label's chosen and written steps, not the solution it left.
    assert list(record["question"]) == PHASE_1_QUESTION
    assert record["question"] == {"problem": PHASE_2_RECORD["question"]["problem"],
                                  "ground_truth_answer": PHASE_2_RECORD["question"]["ground_truth_answer"]}
    taken = [s["human_completion"]["text"] if s["human_completion"] else s["completions"][s["chosen_completion"]]["text"]
             for s in record["label"]["steps"]]
    assert taken == path and record["label"]["finish_reason"] == "solution"
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0} and again.duplicates == 2
    assert row_counts(session_factory) == {**before, "import_batches": before["import_batches"] + 1}


def test_a_phase_1_label_that_went_on_with_the_solutions_steps_exports_as_phase_2(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _phase_1_task(client, session_factory, [PHASE_2_RECORD])
    _submit_alternatives(client, headers, task, [_went_on([1]), _went_on([1]), _went_on([-1, 0, -1], chosen=None)],
                         reason="found_error")
    exported = export(session_factory, project)
    record = orjson.loads(exported.splitlines()[-1])
    # What PRM800K's phase 2 records: the solution's steps rated, alternatives at the error.
    _assert_prm800k_shape(record, PHASE_2_QUESTION)
    assert record["question"]["pre_generated_steps"] == PHASE_2_RECORD["question"]["pre_generated_steps"]
    assert [c["rating"] for c in record["label"]["steps"][2]["completions"]] == [-1, 0, -1]
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}


def _phase_1_body(alternatives: list[list[str]], plan: str) -> tuple[list[dict[str, Any]], str, str | None]:
    """A phase-1 label of the task's alternatives: (steps, finish reason, note)."""
    good = [_went_on([1] * len(a)) for a in alternatives]
    if plan == "alternative":
        # Off the path at the first step that offers another alternative, else by a written step.
        at = next((i for i, a in enumerate(alternatives) if len(a) > 1), None)
        if at is None:
            return [_went_on([-1], chosen=None, human=WRITTEN), *good[1:]], "solution", None
        return [*good[:at], _went_on([-1] + [1] * (len(alternatives[at]) - 1), chosen=1), *good[at + 1:]], \
            "solution", None
    if plan == "written step":
        return [*good[:-1], _went_on([-1] * len(alternatives[-1]), chosen=None, human=WRITTEN)], "solution", None
    if plan == "found error":
        return [_went_on([-1] * len(alternatives[0]), chosen=None)], "found_error", None
    if plan == "give up":
        return [_went_on([0] * len(alternatives[0]), chosen=None)], "give_up", "Not sure what step 1 claims."
    if plan == "bad problem":
        return [], "bad_problem", "The problem has no answer."
    return good, "solution", None


@pytest.mark.parametrize("plan", ["alternative", "written step"])
def test_phase_1_labels_off_phase_1_paths_import_back_as_duplicates(client, session_factory, plan) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="phase1", overlap=3)
    # Phase 1's records: their solutions are the imported labelers' paths, one of them shorter
    # than its label (a found error after the first step).
    import_bytes(session_factory, project, jsonl([r for r in sample_records() if r["generation"] is None]))
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    for _ in range(2):
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        steps, reason, note = _phase_1_body(task["solution"]["alternatives"], plan)
        _submit_alternatives(client, headers, task, steps, reason, note)
    exported = export(session_factory, project)
    assert [len(orjson.loads(line)["question"]) for line in exported.splitlines()] == [2, 2, 2, 2]
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert again.duplicates == 4 and again.queued == 0
    assert row_counts(session_factory) == {**before, "import_batches": before["import_batches"] + 1}
    assert export(session_factory, project) == exported


def _ratings_body(mode: str, plan: str, n_steps: int, key: int) -> dict[str, Any]:
    if plan == "found error":
        # Full mode rates every step, after the -1 too.
        ratings = [-1] + [1] * (n_steps - 1) if mode == "full" else [1] * (n_steps - 1) + [-1]
        return {"idempotency_key": f"ratings-{key:04}", "ratings": [{"rating": r} for r in ratings],
                "finish_reason": "found_error", "total_time_ms": 1000}
    return {"idempotency_key": f"ratings-{key:04}", "ratings": [{"rating": 1}] if plan == "give up" else [],
            "finish_reason": plan.replace(" ", "_"), "finish_note": "A note.", "total_time_ms": 1000}


def test_a_projects_own_export_imports_back_as_duplicates_whatever_its_labels(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="phase1", overlap=4)
    # Phase-1 and phase-2 records: their solutions are paths and pre-generated steps.
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    plans = {
        "phase1": ["alternative", "written step", "found error", "give up", "bad problem", "alternative",
                   "written step", "solution"],
        "first_error": ["found error", "give up"],
        "full": ["found error", "bad problem"],
    }
    made = 0
    for mode, labels in plans.items():
        with session_scope(session_factory) as session:
            update_project(session, session.get(Project, project.id), ProjectUpdate(labeling_mode=mode))
        for plan in labels:
            made += 1
            make_user(session_factory, f"labeler{made}", "labeler")
            headers = api_headers(client, f"labeler{made}")
            task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
            assert task is not None, "the queue ran dry"
            if mode == "phase1":
                steps, reason, note = _phase_1_body(task["solution"]["alternatives"], plan)
                _submit_alternatives(client, headers, task, steps, reason, note)
                continue
            response = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers,
                                   json=_ratings_body(mode, plan, len(task["solution"]["steps"]), made))
            assert response.status_code == 200, response.text
    exported = export(session_factory, project)
    records = [orjson.loads(line) for line in exported.splitlines()]
    made_here = records[len(sample_records()):]
    assert len(made_here) == made
    # Both shapes are there: labels off their solution are phase 1's, the others phase 2's.
    assert {len(r["question"]) for r in made_here} == {len(PHASE_1_QUESTION), len(PHASE_2_QUESTION)}
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, exported, filename="export.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert again.duplicates == len(records) and again.queued == 0
    assert row_counts(session_factory) == {**before, "import_batches": before["import_batches"] + 1}
    assert export(session_factory, project) == exported
