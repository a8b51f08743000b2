"""TRL stepwise supervision and Parquet exports of the PRM800K sample."""

from __future__ import annotations

import io

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import api_headers, make_project, make_user
from tests.exports.conftest import export, label_in_stepwise, labels_in_two_modes
from tests.imports.conftest import SAMPLE, import_bytes, jsonl

GCF_START = "I want to find the largest positive integer"


def _trl(factory, project, **filters):  # type: ignore[no-untyped-def]
    return [orjson.loads(line) for line in export(factory, project, "trl", **filters).splitlines()]


def test_trl_records_are_boolean_and_stop_at_the_first_error(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    records = _trl(session_factory, project)
    # 9 labels less the give_up and the bad_problem.
    assert len(records) == 7
    assert all(set(r) == {"prompt", "completions", "labels", "source", "label_id", "solution_id", "problem_id",
                          "labeler"} for r in records)
    assert all(type(v) is bool for r in records for v in r["labels"])
    assert all(len(r["completions"]) == len(r["labels"]) for r in records)
    gcf = records[0]
    assert gcf["prompt"].startswith("What is the greatest common factor")
    assert gcf["completions"][0].startswith(GCF_START)
    # Rated 0, 0, -1: the alternatives rated at the error step are not the solution's steps.
    assert gcf["labels"] == [True, True, False]
    assert gcf["completions"][2] == "I know that $200,\\!000 = 2^5\\cdot 10^4 = 2^9\\cdot 5^4$."
    human = next(r for r in records if r["prompt"].startswith("If $f(x)"))
    assert human["completions"][1] == "$g(-2) = (-2 - 1)^2 = (-3)^2 = 9$." and human["labels"] == [True, True, True]
    open_end = next(r for r in records if r["prompt"].startswith("How many positive divisors"))
    ids = {key: open_end.pop(key) for key in ("label_id", "solution_id", "problem_id", "labeler")}
    assert open_end == {
        "prompt": "How many positive divisors does $36$ have?",
        "completions": ["$36 = 2^2 \\cdot 3^2$.", "So it has $2 \\cdot 2 = 4$ divisors."],
        "labels": [True, False],
        "source": "human",
    }
    # The ids are Stepwise's, the Parquet export's for the same label.
    parquet = pq.read_table(io.BytesIO(export(session_factory, project, "parquet"))).to_pylist()
    same = next(r for r in parquet if r["label_id"] == ids["label_id"])
    assert (same["solution_id"], same["problem_id"], same["labeler"]) == (ids["solution_id"], ids["problem_id"], ids["labeler"])
    assert ids["labeler"] is not None
    assert same["problem"] == "How many positive divisors does $36$ have?"


def test_trl_neutral_mapping_is_a_parameter(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    negative = _trl(session_factory, project, neutral="negative")
    assert negative[0]["labels"] == [False, False, False]
    unicode = next(r for r in negative if r["prompt"].startswith("Compute $\\cos"))
    assert unicode["labels"] == [True, False, True]
    assert "<script>" in unicode["completions"][1]


def test_trl_drops_what_follows_a_first_error_in_full_mode(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, steps = label_in_stepwise(client, session_factory, [1, -1, 1], "found_error", mode="full")
    [record] = _trl(session_factory, project)
    assert record["completions"] == steps[:2] and record["labels"] == [True, False]


def test_parquet_has_one_row_per_label_with_list_columns(session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("app.exports.parquet.ROWS_PER_GROUP", 4)
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    data = export(session_factory, project, "parquet")
    parquet = pq.ParquetFile(io.BytesIO(data))
    assert parquet.metadata.num_rows == 9
    assert parquet.num_row_groups == 3, "row groups are written as they fill"
    rows = parquet.read().to_pylist()
    first = rows[0]
    assert first["labeler"] == "340d89bc-f5b7-45e9-b272-909ba68ee363"
    assert first["created_at"].isoformat() == "2023-01-22T04:34:27.052924+00:00"
    assert first["generation"] == 9 and first["finish_reason"] == "found_error"
    assert first["ratings"] == [0, 0, -1] and first["flagged"] == [None, None, None]
    assert first["steps"][0].startswith(GCF_START)
    assert first["answer_grade"] == "wrong" and first["final_answer"] == "320,000"
    assert first["verifier_score"] == 0.010779580529581414
    qc = rows[1]
    assert qc["is_quality_control"] and qc["ratings"] == [1, 1, 1] and qc["flagged"] == [False, True, False]
    assert [r["finish_reason"] for r in rows].count("bad_problem") == 1
    bad_problem = next(r for r in rows if r["finish_reason"] == "bad_problem")
    assert bad_problem["steps"] == [] and bad_problem["ratings"] == []
    screening = next(r for r in rows if r["is_initial_screening"])
    assert screening["generation"] == -1 and screening["total_time_ms"] == 900000


def test_empty_exports_are_valid_files(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    assert export(session_factory, project, "prm800k") == b""
    assert export(session_factory, project, "trl") == b""
    table = pq.read_table(io.BytesIO(export(session_factory, project, "parquet")))
    assert table.num_rows == 0 and "ratings" in table.column_names


PHASE_1 = "If $f(x)"
CHOSEN = ["To find $f(g(-2))$, I first need $g(-2)$.", "$g(-2) = (-2 - 1)^2 = (-3)^2 = 9$.",
          "Then $f(9) = 3 \\cdot 9 + 2 = 29$.\n\n# Answer\n\n29"]
WRONG = {0: "I'll plug $-2$ into $f$ first.", 1: "$g(-2) = (-2 - 1)^2 = -9$.", 2: "$g(-2) = (-2-1)^2 = 3^2$."}


def test_trl_with_every_completion_adds_each_rated_alternative_and_marks_human_steps(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    records = [r for r in _trl(session_factory, project, completions="all") if r["prompt"].startswith(PHASE_1)]
    assert [(r["completions"], r["labels"], r["human_written"]) for r in records] == [
        (CHOSEN, [True, True, True], [False, True, False]),
        ([WRONG[0]], [False], [False]),
        ([CHOSEN[0], WRONG[1]], [True, False], [False, False]),
        ([CHOSEN[0], WRONG[2]], [True, False], [False, False]),
    ]
    # Every labeler's path is still there, marked.
    unmarked = [{k: v for k, v in r.items() if k != "human_written"} for r in _trl(session_factory, project, completions="all")]
    assert all(r in unmarked for r in _trl(session_factory, project))


def test_parquet_with_every_completion_has_a_row_per_alternative(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    assert "human_written" not in pq.read_table(io.BytesIO(export(session_factory, project, "parquet"))).column_names
    rows = pq.read_table(io.BytesIO(export(session_factory, project, "parquet", completions="all"))).to_pylist()
    phase_1 = [r for r in rows if r["problem"].startswith(PHASE_1)]
    assert [(r["alternative_at"], r["steps"], r["ratings"], r["human_written"]) for r in phase_1] == [
        (None, CHOSEN, [1, 1, 1], [False, True, False]),
        (0, [WRONG[0]], [-1], [False]),
        (1, [CHOSEN[0], WRONG[1]], [1, -1], [False, False]),
        (1, [CHOSEN[0], WRONG[2]], [1, -1], [False, False]),
    ]
    assert len({r["label_id"] for r in phase_1}) == 1


def test_parquet_names_the_problem_and_solution_as_their_files_did(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # A team labeling several models' candidates must tell, from the export, which model wrote
    # each solution, and join rows back to its own problem file.
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl([
        {"problem": "What is $6 \\times 7$?", "answer": "42", "unique_id": "test/arith/7.json"}]), "math")
    candidates = [{"problem_id": "test/arith/7.json", "steps": ["$6 \\times 7 = 42$."], "model": "gen-a",
                   "temperature": 0.7}]
    import_bytes(session_factory, project, jsonl(candidates), "solutions", filename="gen-a.jsonl")
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
        "idempotency_key": "origin-0001", "ratings": [{"rating": 1}], "finish_reason": "solution",
        "total_time_ms": 1000}).raise_for_status()
    (row,) = pq.read_table(io.BytesIO(export(session_factory, project, "parquet"))).to_pylist()
    assert row["problem_unique_id"] == "test/arith/7.json"
    origin = orjson.loads(row["solution_origin"])
    assert origin["meta"] == {"model": "gen-a", "temperature": 0.7} and origin["line"] == 1


def test_parquet_says_which_mode_each_label_was_made_in(session_factory) -> None:  # type: ignore[no-untyped-def]
    project, first_error, full, unknown = labels_in_two_modes(session_factory)
    table = pq.read_table(io.BytesIO(export(session_factory, project, "parquet")))
    assert table.schema.field("labeling_mode").type == pa.string()
    modes = {row["label_id"]: row["labeling_mode"] for row in table.to_pylist()}
    assert {label_id: modes.pop(label_id) for label_id in (first_error, full, unknown)} == {
        first_error: "first_error", full: "full", unknown: None}
    # Imported labels were made under no mode of this project; the one from before labels kept
    # theirs may have been made in either (the project changed mode).
    assert len(modes) == 9 and set(modes.values()) == {None}
