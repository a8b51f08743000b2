"""PRM800K import through the service: what each record becomes, and that nothing comes twice."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from sqlalchemy import select

from active_learning.grading import GRADER_VERSION
from app.db import session_scope
from app.models import AnswerGrade, Assignment, FinishReason, ImportBatch, Label, Problem, Solution, StepsSource
from tests.conftest import make_project
from tests.exports.conftest import export
from tests.imports.conftest import SAMPLE, import_bytes, jsonl, row_counts, sample_records


def _labels_by_labeler(factory) -> dict[tuple[str, int], Label]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        labels = session.scalars(select(Label).order_by(Label.id)).all()
        return {(label.foreign_labeler, label.total_time_ms): label for label in labels}  # type: ignore[misc]


def test_sample_becomes_problems_solutions_and_labels(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    result = import_bytes(session_factory, project, SAMPLE.read_bytes(), filename="phase2_train.jsonl")
    # Records 1 and 8 share problem and solution; every record is a label of its own.
    assert result.lines == 9
    assert result.added == {"problems": 8, "solutions": 8, "labels": 9}
    assert result.duplicates == 0
    assert "phase2_train.jsonl" in result.summary() and "9 labels" in result.summary()
    with session_scope(session_factory) as session:
        batch = session.get(ImportBatch, result.batch_id)
        assert batch is not None and batch.lines == 9 and batch.added["labels"] == 9
        gcf = session.scalar(select(Problem).where(Problem.answer == "40,\\!000"))
        assert gcf is not None and gcf.reference_solution and gcf.reference_solution.startswith("The prime")
        solution = session.scalar(select(Solution).where(Solution.problem_id == gcf.id))
        assert solution is not None
        assert solution.steps_source == StepsSource.given and len(solution.steps) == 5
        assert solution.final_answer == "320,000" and solution.verifier_score == 0.010779580529581414
        assert solution.answer_grade == AnswerGrade.wrong and solution.grader_version == GRADER_VERSION
        assert solution.import_batch_id == result.batch_id


def test_label_fields_survive(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    labels = _labels_by_labeler(session_factory)

    first = labels[("340d89bc-f5b7-45e9-b272-909ba68ee363", 278270)]
    assert first.created_at == datetime(2023, 1, 22, 4, 34, 27, 52924, tzinfo=UTC)
    assert first.generation == 9 and first.finish_reason == FinishReason.found_error
    assert first.user_id is None and first.assignment_id is None
    # Texts equal to the solution's own step are left out; alternatives keep theirs.
    assert first.steps[0] == {"completions": [{"rating": 0, "flagged": None}], "human_completion": None, "chosen_completion": 0}
    third = first.steps[2]
    assert third["chosen_completion"] is None
    assert "text" not in third["completions"][0] and third["completions"][0]["rating"] == -1
    assert third["completions"][1]["text"].startswith("To factor $20 !$")
    assert first.extra == {"record": {"timestamp": "2023-01-22T04:34:27.052924"}}

    qc = labels[("8b2e4c1a-9f0d-4e5b-a1c2-3d4e5f6a7b8c", 41200)]
    assert qc.is_quality_control and not qc.is_initial_screening
    assert qc.steps[1]["completions"][0]["flagged"] is True

    screening = labels[("f00dfeed-0000-4000-8000-000000000001", 900000)]
    assert screening.is_initial_screening and screening.generation == -1
    assert screening.finish_reason == FinishReason.give_up
    assert screening.created_at == datetime(2022, 11, 30, 22, 59, 59, tzinfo=UTC)
    assert screening.extra["question"] == {"pre_generated_verifier_score": 1}

    assert labels[("8b2e4c1a-9f0d-4e5b-a1c2-3d4e5f6a7b8c", 5000)].finish_reason == FinishReason.bad_problem

    unknown = labels[("5e6f7a8b-0000-4abc-9def-0123456789ab", 60000)]
    assert unknown.extra["record"]["source_batch"] == "vendor-β"
    assert unknown.extra["question"] == {"unique_id": "test/precalculus/123.json"}
    assert unknown.extra["label"] == {"reviewer": {"id": 7, "note": "checked"}}
    assert unknown.extra["steps"] == {"0": {"comment": "fine"}}
    assert unknown.extra["completions"] == {"0.0": {"corrected_rating": 0}}

    # The same solution from a record without the reference solution keeps it left out.
    again = labels[("9c8b7a65-4321-4fed-8cba-987654321000", 51234)]
    assert again.solution_id == first.solution_id
    assert again.extra["absent"] == {"question": ["ground_truth_solution"]} and "question" not in again.extra


def test_phase1_solution_is_the_chosen_trajectory(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    labels = _labels_by_labeler(session_factory)
    label = labels[("340d89bc-f5b7-45e9-b272-909ba68ee363", 102345)]
    with session_scope(session_factory) as session:
        solution = session.get(Solution, label.solution_id)
        assert solution is not None
        assert solution.steps_source == StepsSource.label
        assert solution.steps == [
            "To find $f(g(-2))$, I first need $g(-2)$.",
            "$g(-2) = (-2 - 1)^2 = (-3)^2 = 9$.",
            "Then $f(9) = 3 \\cdot 9 + 2 = 29$.\n\n# Answer\n\n29",
        ]
        assert solution.final_answer == "29" and solution.answer_grade == AnswerGrade.right
    assert label.generation is None
    assert label.steps[1]["human_completion"]["source"] == "human"
    assert "text" not in label.steps[0]["completions"][0]
    assert label.steps[0]["completions"][1]["text"] == "I'll plug $-2$ into $f$ first."

    open_end = labels[("0a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9", 15000)]
    with session_scope(session_factory) as session:
        short = session.get(Solution, open_end.solution_id)
        assert short is not None and short.steps == ["$36 = 2^2 \\cdot 3^2$."]
        assert short.answer_grade == AnswerGrade.no_answer
    assert [c["rating"] for c in open_end.steps[1]["completions"]] == [-1, -1]


def test_same_file_again_adds_nothing_not_even_a_batch(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    first = import_bytes(session_factory, project, SAMPLE.read_bytes())
    before = row_counts(session_factory)
    again = import_bytes(session_factory, project, SAMPLE.read_bytes(), filename="renamed.jsonl")
    assert again.already_imported and again.batch_id == first.batch_id
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert "already imported" in again.summary()
    assert row_counts(session_factory) == before


def test_same_records_in_another_file_add_nothing(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    before = row_counts(session_factory)
    records = sample_records()
    # Other bytes (key order, spacing, a missing key that was null) but the same records.
    for record in records:
        if "pre_generated_answer" in record["question"] and record["question"]["pre_generated_answer"] is None:
            del record["question"]["pre_generated_answer"]
    reordered = jsonl([dict(reversed(list(r.items()))) for r in records] + [records[0]])
    result = import_bytes(session_factory, project, reordered, filename="copy.jsonl")
    assert not result.already_imported
    assert result.added == {"problems": 0, "solutions": 0, "labels": 0}
    assert result.duplicates == 10
    after = row_counts(session_factory)
    assert after["import_batches"] == before["import_batches"] + 1
    assert {k: v for k, v in after.items() if k != "import_batches"} == {
        k: v for k, v in before.items() if k != "import_batches"
    }


def test_a_file_into_another_project_is_imported_there(session_factory) -> None:  # type: ignore[no-untyped-def]
    one = make_project(session_factory, "one")
    two = make_project(session_factory, "two")
    import_bytes(session_factory, one, SAMPLE.read_bytes())
    result = import_bytes(session_factory, two, SAMPLE.read_bytes())
    assert not result.already_imported and result.added["labels"] == 9


def test_new_solutions_get_the_slots_their_labels_do_not_fill(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    unlabeled = sample_records()[1]
    del unlabeled["label"]
    unlabeled["question"]["pre_generated_steps"] = ["Only one step.\n\n# Answer\n\n2500"]
    result = import_bytes(session_factory, project, SAMPLE.read_bytes() + jsonl([unlabeled]))
    # 8 labeled solutions: the shared one has 2 labels (no slot), 7 have 1 (one slot each);
    # the unlabeled one gets both.
    assert result.added["solutions"] == 9
    assert result.queued == 7 + 2
    with session_scope(session_factory) as session:
        slots = session.scalars(select(Assignment.solution_id)).all()
        shared = session.scalar(
            select(Solution.id).join(Problem).where(Problem.answer == "40,\\!000")
        )
    assert shared not in slots
    assert len(set(slots)) == 8


def test_every_new_solution_is_graded_against_the_ground_truth(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    base = sample_records()[1]
    records = []
    for i, answer in enumerate(["2500", "2,500", "2500", "2501", "2500"]):
        record = {**base, "labeler": f"labeler-{i}", "label": None}
        record["question"] = {**base["question"], "pre_generated_answer": answer, "pre_generated_verifier_score": i / 10}
        records.append(record)
    result = import_bytes(session_factory, project, jsonl(records))
    assert result.grades == {"right": 4, "wrong": 1}
    with session_scope(session_factory) as session:
        grades = dict(session.execute(select(Solution.final_answer, Solution.answer_grade)).all())
    assert grades == {"2500": AnswerGrade.right, "2,500": AnswerGrade.right, "2501": AnswerGrade.wrong}


def test_a_blank_labeler_is_stored_as_none_and_exported_as_written(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    records = sample_records()[:2]
    records[0]["labeler"], records[1]["labeler"] = "", " "
    first = import_bytes(session_factory, project, jsonl(records), filename="blank.jsonl")
    assert first.added["labels"] == 2
    with session_scope(session_factory) as session:
        assert session.scalars(select(Label.foreign_labeler)).all() == [None, None]
    exported = [orjson.loads(line) for line in export(session_factory, project).splitlines()]
    assert sorted(record["labeler"] for record in exported) == ["", " "]
    # The export is the file again: nothing new comes of it.
    again = import_bytes(session_factory, project, export(session_factory, project), filename="exported.jsonl")
    assert again.added == {"problems": 0, "solutions": 0, "labels": 0}
