"""Hostile and broken files: every bad line is reported with file, line and field; nothing is kept."""

from __future__ import annotations

import copy
import gzip
import io
import zipfile

import orjson
import pytest
from sqlalchemy import select

from app.db import session_scope
from app.errors import BadInput, BadLines
from app.imports.reader import MAX_LINE_BYTES
from app.models import Solution
from tests.conftest import make_project
from tests.imports.conftest import import_bytes, jsonl, row_counts, sample_records

GOOD = sample_records()


def _record(change, index: int = 0) -> bytes:  # type: ignore[no-untyped-def]
    """The sample's record `index` (its first: phase 2, found_error at step 3 of 5) changed."""
    record = copy.deepcopy(GOOD[index])
    change(record)
    return orjson.dumps(record)


def _set(path: str, value: object, *more: object):  # type: ignore[no-untyped-def]
    """Set `path` to `value`, then each further (path, value) pair of `more`."""
    def change(record: dict) -> None:  # type: ignore[type-arg]
        for at, to in [(path, value), *zip(more[::2], more[1::2], strict=True)]:
            *parents, last = str(at).split("/")
            target = record
            for key in parents:
                target = target[int(key)] if key.isdigit() else target[key]
            target[int(last) if last.isdigit() else last] = to

    return change


# The sample's records by what they are (see tests/imports/conftest.py).
PHASE2_SOLUTION = 1
PHASE1_SOLUTION = 3
PHASE2_ONE_STEP_FOUND_ERROR = 8


CASES = [
    ("malformed JSON", "prm800k", b'{"labeler": "x", ', None, "invalid JSON"),
    # Cut inside a key: the key read so far names the field, without the line's end.
    ("a line cut inside a key", "prm800k", b'{"labeler": "x", "que\r', "que", "invalid JSON"),
    ("a JSON array", "prm800k", b"[1, 2]", None, "expected a JSON object"),
    ("non-UTF-8 bytes", "math", b'{"problem": "caf\xe9", "answer": "1"}', "problem", "not valid UTF-8"),
    ("a NUL character", "math", b'{"problem": "a\\u0000b", "answer": "1"}', "problem", "NUL"),
    # Trojan Source: the rest of the line shows reversed on every page, as stored it is not.
    ("a right-to-left override", "math", '{"problem": "2+2=\u202e4 ton si", "answer": "1"}'.encode(), "problem", "bidirectional override"),
    ("an escaped isolate in a step", "solutions", b'{"problem_id": 1, "steps": ["ok", "a\\u2067b"]}', "steps[1]", "bidirectional"),
    ("generation as text", "prm800k", _record(_set("generation", "nine")), "generation", "must be an integer"),
    ("a boolean flag as text", "prm800k", _record(_set("is_quality_control_question", "yes")), "is_quality_control_question", "true, false or null"),
    ("a step that is a number", "prm800k", _record(_set("question/pre_generated_steps/2", 7)), "question.pre_generated_steps[2]", "must be a string"),
    ("empty steps", "prm800k", _record(_set("question/pre_generated_steps", [])), "question.pre_generated_steps", "is empty"),
    ("no problem text", "prm800k", _record(_set("question/problem", "  ")), "question.problem", "is empty"),
    ("rating 2", "prm800k", _record(_set("label/steps/1/completions/0/rating", 2)), "label.steps[1].completions[0].rating", "-1, 0, 1 or null"),
    ("rating true", "prm800k", _record(_set("label/steps/1/completions/0/rating", True)), "label.steps[1].completions[0].rating", "-1, 0, 1 or null"),
    ("rating 1.0", "prm800k", _record(_set("label/steps/0/completions/0/rating", 1.0)), "label.steps[0].completions[0].rating", "-1, 0, 1 or null"),
    ("unknown finish_reason", "prm800k", _record(_set("label/finish_reason", "tired")), "label.finish_reason", "unknown 'tired'"),
    ("finished with no steps", "prm800k", _record(_set("label/steps", [])), "label.steps", "is empty"),
    ("chosen completion out of range", "prm800k", _record(_set("label/steps/0/chosen_completion", 3)), "label.steps[0].chosen_completion", "index of one of the 1"),
    ("a total time in seconds", "prm800k", _record(_set("label/total_time", 278.27)), "label.total_time", "must be an integer"),
    ("a negative total time", "prm800k", _record(_set("label/total_time", -5)), "label.total_time", "between 0"),
    ("a timestamp that is not one", "prm800k", _record(_set("timestamp", "yesterday")), "timestamp", "ISO 8601"),
    ("a labeler id too long", "prm800k", _record(_set("labeler", "x" * 101)), "labeler", "longer than 100"),
    ("a completion without text", "prm800k", _record(_set("label/steps/0/completions/0", {"rating": 1})), "label.steps[0].completions[0].text", "missing"),
    ("a human completion number", "prm800k", _record(_set("label/steps/0/human_completion", 5)), "label.steps[0].human_completion", "string `text`"),
    ("question missing", "prm800k", b'{"labeler": "x"}', "question", "missing"),
    ("math level as a word", "math", b'{"problem": "1+1?", "answer": "2", "level": "hard"}', "level", "Level N"),
    ("math answer as a list", "math", b'{"problem": "1+1?", "answer": [2]}', "answer", "must be a string"),
    # A file of another format chosen as MATH would be problems without answers, their steps lost.
    ("a solution chosen as MATH", "math", b'{"problem": "What is 2+2?", "text": "2+2=4.\\n\\n# Answer\\n\\n4"}', None, "holds a solution's `text` and no `answer`: the file is of candidate solutions"),
    ("a solution by id chosen as MATH", "math", b'{"problem_id": 1, "steps": ["a"]}', None, "holds `steps`, a solution's steps"),
    ("a solution with an answer chosen as MATH", "math", b'{"problem": "What is 2+2?", "steps": ["2+2=5."], "answer": "5"}', None, "holds `steps`"),
    ("a solution by problem id chosen as MATH", "math", b'{"problem_id": 1, "text": "a"}', None, "holds `problem_id`, a solution's problem"),
    ("a PRM800K record chosen as MATH", "math", _record(lambda r: r.update(problem=r["question"]["problem"])), None, "holds `question`, a PRM800K record's question: the file is PRM800K"),
    ("candidate with steps and text", "solutions", b'{"problem_id": 1, "steps": ["a"], "text": "a"}', "steps", "exactly one"),
    ("candidate without a problem", "solutions", b'{"steps": ["a"]}', "problem", "exactly one"),
    ("candidate with empty steps", "solutions", b'{"problem_id": 1, "steps": []}', "steps", "is empty"),
    ("candidate with blank text", "solutions", b'{"problem_id": 1, "text": "\\n\\n  \\n\\n"}', "text", "blank"),
    # Consistency with the solution and the finish reason, as the submit API holds labels to
    # (phase 1's choices are PRM800K's labelers' own, and not judged: prm800k._label_steps).
    ("a label longer than its solution", "prm800k", _record(_set("question/pre_generated_steps", GOOD[0]["question"]["pre_generated_steps"][:2])), "label.steps", "has 3 steps, more than the 2 of question.pre_generated_steps"),
    ("found_error with no -1", "prm800k", _record(_set("label/steps/2/completions/0/rating", 0, "label/steps/2/completions/2/rating", 1)), "label.finish_reason", "is found_error, but no step is rated -1"),
    ("found_error with no rating", "prm800k", _record(_set("label/steps/0/completions/0/rating", None), PHASE2_ONE_STEP_FOUND_ERROR), "label.finish_reason", "no step is rated -1"),
    ("solution with a -1 step", "prm800k", _record(_set("label/steps/1/completions/0/rating", -1), PHASE2_SOLUTION), "label.steps[1].completions[0].rating", "is -1, but finish_reason is solution"),
    ("solution stopping on a -1 step", "prm800k", _record(_set("label/finish_reason", "solution")), "label.steps[2].completions[0].rating", "finish_reason is solution"),
    # Blank steps, which would be queued for labelers.
    ("a blank pre-generated step", "prm800k", _record(_set("question/pre_generated_steps/1", " \n ")), "question.pre_generated_steps[1]", "is blank"),
    ("an empty pre-generated step", "prm800k", _record(_set("question/pre_generated_steps", ["", " "], "label", None)), "question.pre_generated_steps[0]", "is blank"),
    ("a blank chosen phase-1 step", "prm800k", _record(_set("label/steps/2/completions/0/text", "  "), PHASE1_SOLUTION), "label.steps[2].completions[0].text", "is blank"),
    ("a blank written phase-1 step", "prm800k", _record(_set("label/steps/1/human_completion/text", ""), PHASE1_SOLUTION), "label.steps[1].human_completion", "is blank"),
    ("candidate with blank steps", "solutions", b'{"problem_id": 1, "steps": ["", "  "]}', "steps[0]", "is blank"),
    ("candidate with a blank last step", "solutions", b'{"problem_id": 1, "steps": ["ok", "\\t"]}', "steps[1]", "is blank"),
    # An integer past 64 bits (read as a float) is out of range, not "not an integer".
    ("candidate problem id past 64 bits", "solutions", b'{"problem_id": 99999999999999999999, "steps": ["a"]}', "problem_id", "must be between 1 and 2147483647"),
    ("math level past 64 bits", "math", b'{"problem": "1+1?", "answer": "2", "level": -99999999999999999999}', "level", "must be between 0 and 100"),
    ("candidate of an unknown problem", "solutions", b'{"problem": "Never imported.", "steps": ["a"]}', "problem", "import the problems first"),
    ("candidate of a missing problem id", "solutions", b'{"problem_id": 999999, "steps": ["a"]}', "problem_id", "no problem 999999"),
]


@pytest.mark.parametrize(("fmt", "line", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_line_is_reported_and_nothing_changes(session_factory, fmt, line, field, message) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    good = jsonl(GOOD[1:3]) if fmt == "prm800k" else b'{"problem": "What is 2+2?", "answer": "4"}\n'
    if fmt == "solutions":
        import_bytes(session_factory, project, good, "math", filename="problems.jsonl")
        good = b'{"problem": "What is 2+2?", "steps": ["2+2=4.", "# Answer\\n\\n4"]}\n'
    before = row_counts(session_factory)
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, good + b"\n" + line + b"\n" + good, fmt, filename="bad.jsonl")
    assert caught.value.message.startswith("1 bad line in bad.jsonl")
    bad_line = good.count(b"\n") + 2
    assert len(caught.value.details) == 1
    detail = caught.value.details[0]
    assert (detail["file"], detail["line"], detail["field"]) == ("bad.jsonl", bad_line, field)
    assert message in detail["message"]
    assert row_counts(session_factory) == before


def test_a_file_whose_every_line_fails_alike_says_so_once(session_factory) -> None:  # type: ignore[no-untyped-def]
    # A PRM800K file imported as MATH problems: one sentence, not the same row for each line.
    project = make_project(session_factory)
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, jsonl(GOOD[:5]), "math")
    assert caught.value.message.startswith("5 bad lines")
    (detail,) = caught.value.details
    assert detail["line"] is None and detail["message"].startswith("all 5 lines: holds `question`")
    assert "import it in that format" in detail["message"]
    # The same fault on the first lines only keeps each line's number: those are the lines to mend.
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, jsonl(GOOD[:2]) + b'\n{"problem": "ok", "answer": "1"}\n', "math")
    assert [d["line"] for d in caught.value.details] == [1, 2]
    # As on lines apart.
    lines = [b'{"problem": "ok %d", "answer": "1"}' % i for i in range(6)]
    lines[1] = lines[3] = b'{"problem": 5}'
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, b"\n".join(lines), "math")
    assert [(d["line"], d["field"]) for d in caught.value.details] == [(2, "problem"), (4, "problem")]
    assert row_counts(session_factory)["problems"] == 0


def test_every_bad_line_is_listed_up_to_a_limit(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    lines = [b'{"problem": "ok %d", "answer": "1"}' % i if i % 2 else b'{"problem": 5}' for i in range(501)]
    lines[499] = b"not json"
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, b"\n".join(lines), "math")
    details = caught.value.details
    assert caught.value.message.startswith("252 bad lines")
    assert [d["line"] for d in details[:3]] == [1, 3, 5] and details[0]["field"] == "problem"
    # Past the list, every bad line is counted by its field.
    assert len(details) == 201
    assert details[-1]["message"] == "and 52 more bad lines (all 252, the most by field: problem 251, the line as a whole 1)"
    assert row_counts(session_factory)["problems"] == 0


def test_bad_lines_are_listed_in_the_files_order(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    # Line 1 is good JSON naming no problem of the project, found after the chunk's JSON errors.
    lines = [b'{"problem": "Not here.", "steps": ["a"]}', b"{broken", b'{"steps": ["a"]}', b'{"problem": "x"}']
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, b"\n".join(lines), "solutions")
    assert [d["line"] for d in caught.value.details] == [1, 2, 3, 4]


def test_a_bad_line_after_many_chunks_undoes_them_all(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    lines = [b'{"problem": "p %d", "answer": "%d"}' % (i, i) for i in range(2500)] + [b'{"problem": "late", "level": 1.5}']
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, b"\n".join(lines), "math")
    assert caught.value.details[0]["line"] == 2501 and caught.value.details[0]["field"] == "level"
    assert row_counts(session_factory) == {k: 0 for k in row_counts(session_factory)}


def test_huge_line_is_refused_with_its_number(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    huge = b'{"problem": "' + b"x" * (MAX_LINE_BYTES + 10) + b'", "answer": "1"}'
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, b'{"problem": "a", "answer": "1"}\n' + huge + b'\n{"problem": [1]}\n', "math")
    assert [(d["line"], d["field"]) for d in caught.value.details] == [(2, None), (3, "problem")]
    assert "longer than 10 MB" in caught.value.details[0]["message"]
    assert row_counts(session_factory)["problems"] == 0


@pytest.mark.parametrize("data", [b"", b"\n\n  \n"], ids=["empty", "blank lines"])
def test_empty_file_is_refused(session_factory, data) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    # Bad data, as a bad line is: the CLI exits 2.
    with pytest.raises(BadLines) as caught:
        import_bytes(session_factory, project, data, "math", filename="empty.jsonl")
    assert caught.value.message == ("nothing was imported: empty.jsonl holds no records (it is empty or only blank "
                                    "lines; expected one JSON object a line)")
    assert caught.value.details is None
    assert row_counts(session_factory)["import_batches"] == 0


def _zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("problems.jsonl", data)
    return buffer.getvalue()


MATH_LINE = '{"problem": "What is 2+2?", "answer": "4"}\n'


@pytest.mark.parametrize(("data", "what"), [
    (_zipped(MATH_LINE.encode()), "a zip archive: upload the .jsonl file inside it"),
    (gzip.compress(MATH_LINE.encode(), mtime=0), "gzip-compressed: decompress it (gunzip) and upload the .jsonl file"),
    (MATH_LINE.encode("utf-16"), "UTF-16 text: save it as UTF-8"),
    (MATH_LINE.encode("utf-16-le"), "UTF-16 text: save it as UTF-8"),
    (MATH_LINE.encode("utf-16-be"), "UTF-16 text: save it as UTF-8"),
    (b"PAR1\x15\x04", "a Parquet file: imports read JSONL, one JSON object a line"),
], ids=["zip", "gzip", "utf-16 with bom", "utf-16 without bom", "utf-16 big-endian", "parquet"])
def test_a_file_that_is_no_jsonl_text_is_refused_in_one_sentence(session_factory, data, what) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with pytest.raises(BadLines) as caught:
        import_bytes(session_factory, project, data, "math", filename="upload.jsonl")
    assert caught.value.message == f"nothing was imported: upload.jsonl is {what}"
    assert caught.value.details is None
    assert row_counts(session_factory)["import_batches"] == 0


def test_unknown_format_and_empty_separator_are_refused(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with pytest.raises(BadInput, match="unknown import format 'csv'"):
        import_bytes(session_factory, project, b"{}", "csv")
    with pytest.raises(BadInput, match="separator must not be empty"):
        import_bytes(session_factory, project, b"{}", "solutions", separator="")


def test_html_in_text_is_stored_as_text(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, b'{"problem": "<img src=x onerror=alert(1)>", "answer": "1"}', "math")
    steps = ["<script>alert('x')</script> is not a step", "# Answer\n\n1"]
    import_bytes(
        session_factory,
        project,
        orjson.dumps({"problem": "<img src=x onerror=alert(1)>", "steps": steps}),
        "solutions",
    )
    with session_scope(session_factory) as session:
        assert session.scalar(select(Solution.steps)) == steps


def test_byte_order_mark_and_crlf_are_accepted(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    data = b'\xef\xbb\xbf{"problem": "a", "answer": "1"}\r\n{"problem": "b", "answer": "2"}\r\n'
    assert import_bytes(session_factory, project, data, "math").added["problems"] == 2


@pytest.mark.parametrize(("sent", "kept"), [("../../../../etc/passwd", "passwd"), ("..", "upload.jsonl"),
                                            ("C:\\Users\\ann\\..", "upload.jsonl"), (" .", "upload.jsonl")])
def test_an_uploads_name_keeps_no_directory(session_factory, sent: str, kept: str) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    result = import_bytes(session_factory, project, jsonl(sample_records()[:1]), filename=sent)
    assert result.filename == kept
