"""One PRM800K line into a record, without a database: the typed decode and the slower way
that lines with unknown keys take must agree, and hostile numbers are refused, not crashed on."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.exports.prm800k import COMPLETION_KEYS, LABEL_KEYS, QUESTION_KEYS, RECORD_KEYS, STEP_KEYS
from app.imports.fields import Invalid
from app.imports.prm800k import parse_prm800k
from app.imports.records import PrmRecord, solution_hash
from tests.imports.conftest import sample_records

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = {"file": "t.jsonl", "batch": 1, "line": 1}


def _parse(record: dict[str, Any]) -> PrmRecord:
    return parse_prm800k(orjson.dumps(record), ORIGIN, NOW)


def _error(record: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(Invalid) as caught:
        _parse(record)
    return caught.value.field, caught.value.message


def _plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sample's records without keys PRM800K lacks, so that they take the typed decode."""
    plain = []
    for record in copy.deepcopy(records):
        label = record.get("label") or {}
        if (
            set(record) - RECORD_KEYS
            or set(record["question"]) - QUESTION_KEYS
            or set(label) - LABEL_KEYS
            or any(
                set(step) - STEP_KEYS or any(set(c) - COMPLETION_KEYS for c in step["completions"])
                for step in label.get("steps", [])
            )
        ):
            continue
        plain.append(record)
    return plain


PLAIN = _plain(sample_records())


def test_the_sample_has_records_of_every_kind_for_the_typed_decode() -> None:
    phases = {"pre_generated_steps" in r["question"] for r in PLAIN}
    assert len(PLAIN) >= 5 and phases == {True, False}


@pytest.mark.parametrize(
    ("index", "where"),
    [
        (i, where)
        for i, record in enumerate(PLAIN)
        for where in ("record", "question", "label", "step", "completion")
        if where in ("record", "question") or (record.get("label") or {}).get("steps")
    ],
)
def test_an_unknown_key_changes_nothing_but_extra(index: int, where: str) -> None:
    record = PLAIN[index]
    fast = _parse(record)
    changed = copy.deepcopy(record)
    target, path = {
        "record": (lambda r: r, ("record", "vendor")),
        "question": (lambda r: r["question"], ("question", "vendor")),
        "label": (lambda r: r["label"], ("label", "vendor")),
        "step": (lambda r: r["label"]["steps"][0], ("steps", "0")),
        "completion": (lambda r: r["label"]["steps"][0]["completions"][0], ("completions", "0.0")),
    }[where]
    target(changed)["vendor"] = {"id": 7}
    slow = _parse(changed)
    expected_extra = copy.deepcopy(fast.label.extra) if fast.label else {}
    if where in ("step", "completion"):
        expected_extra[path[0]] = {path[1]: {"vendor": {"id": 7}}}
    else:
        expected_extra.setdefault(path[0], {})["vendor"] = {"id": 7}
    assert slow.problem == fast.problem and slow.solution == fast.solution
    if fast.label is not None:
        assert slow.label is not None and slow.label.extra == expected_extra
        slow.label.extra = fast.label.extra
    assert slow == fast


def _with(path: str, value: object) -> dict[str, Any]:
    record = copy.deepcopy(next(r for r in PLAIN if r.get("label") and "pre_generated_steps" in r["question"]))
    *parents, last = path.split("/")
    target: Any = record
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = value
    return record


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("label/steps/0/completions/0/flagged", "yes", "label.steps[0].completions[0].flagged", "must be true, false or null, not a string"),
        ("label/steps/0/completions/0/rating", 2, "label.steps[0].completions[0].rating", "must be -1, 0, 1 or null, not 2"),
        # A number, only not one that fits: "not a number" said of it read as nonsense.
        ("label/steps/0/completions/0/rating", 0.5, "label.steps[0].completions[0].rating",
         "must be -1, 0, 1 or null, not a number with a fraction"),
        ("label/steps/0/completions", {"text": "a"}, "label.steps[0].completions", "must be an array or null (in an empty step ending the label), not an object"),
        ("label/steps", None, "label.steps", "missing"),
        ("question/problem", None, "question.problem", "missing"),
        ("question/pre_generated_verifier_score", "high", "question.pre_generated_verifier_score", "must be a number or null, not a string"),
        ("label", [], "label", "must be an object or null, not an array"),
    ],
)
def test_bad_values_are_named_in_plain_words(path: str, value: object, field: str, message: str) -> None:
    record = _with(path, value)
    got_field, got_message = _error(record)
    assert got_field == field and message in got_message
    # An unknown key elsewhere sends the line the slower way: the same words come out.
    record["vendor"] = 1
    assert _error(record) == (got_field, got_message)


HUGE_INTEGERS = [
    ("question/pre_generated_verifier_score", "HUGE", "question.pre_generated_verifier_score", "out of range"),
    ("label/steps/0/human_completion", {"text": "mine", "n": "HUGE"}, "label.steps[0].human_completion", "out of range"),
    ("generation", "HUGE", "generation", "must be between"),
    ("label/steps/0/chosen_completion", "HUGE", "label.steps[0].chosen_completion", "index of one of"),
    ("label/steps/0/completions/0/rating", "HUGE", "label.steps[0].completions[0].rating",
     "must be -1, 0, 1 or null, not a number with a fraction or too large for an integer"),
]


# With an unknown key elsewhere, the line goes the slower way, where orjson reads these as
# floats: the same words come out, but for a key PRM800K has not (the human completion's "n"),
# which keeps the float.
@pytest.mark.parametrize(("path", "value", "field", "message", "unknown_key"),
                         [(*row, False) for row in HUGE_INTEGERS]
                         + [(*row, True) for row in HUGE_INTEGERS if row[0] != "label/steps/0/human_completion"])
def test_integers_beyond_64_bits_are_refused(path: str, value: object, field: str, message: str,
                                             unknown_key: bool) -> None:
    record = _with(path, value)
    if unknown_key:
        record["vendor"] = 1
    raw = orjson.dumps(record).replace(b'"HUGE"', b"1" + b"0" * 30)
    with pytest.raises(Invalid) as caught:
        parse_prm800k(raw, ORIGIN, NOW)
    assert caught.value.field == field and message in caught.value.message


def test_a_line_that_is_no_object_or_no_json_is_refused() -> None:
    def error(raw: bytes) -> tuple[str | None, str]:
        with pytest.raises(Invalid) as caught:
            parse_prm800k(raw, ORIGIN, NOW)
        return caught.value.field, caught.value.message

    assert error(b"[1, 2]") == (None, "expected a JSON object, got an array")
    assert error(b'{"question": ')[1].startswith("invalid JSON")
    # A line that ends too soon is said to end where it ends, with or without its line break
    # (orjson put the end after the break: "column 1"); columns count characters.
    for end in (b"", b"\n", b"\r\n"):
        assert error(b'{"labeler": "\xc3\xa9", "generation": 3' + end) == (
            "generation", "invalid JSON: unexpected end of data (column 33)")
    # Where a field holds what is wrong, it is named.
    assert error(b'{"question": {"problem": "a\\u0000b"}}') == ("question.problem", "text contains a NUL character (\\u0000)")
    assert error(b'{"question": {"problem": "caf\xe9"}}') == ("question.problem", "not valid UTF-8 (byte 30 of the line)")


def _steps_as_dicts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A label's stored steps as earlier versions built them, as dicts: a completion's text
    left out where it is the solution's own step, or, without pre-generated steps, where it
    was chosen."""
    given = record["question"].get("pre_generated_steps")
    steps = []
    for i, step in enumerate(record["label"]["steps"]):
        own = given[i] if given is not None and i < len(given) else None
        completions = [
            {"rating": c.get("rating"), "flagged": c.get("flagged")}
            if c["text"] == own
            else {"text": c["text"], "rating": c.get("rating"), "flagged": c.get("flagged")}
            for c in step["completions"]
        ]
        chosen = step.get("chosen_completion")
        if given is None and chosen is not None:
            del completions[chosen]["text"]
        steps.append({"completions": completions, "human_completion": step.get("human_completion"), "chosen_completion": chosen})
    return steps


def _awkward_records() -> list[dict[str, Any]]:
    """Records whose steps hold what two JSON encoders could write differently."""
    phase2 = copy.deepcopy(next(r for r in PLAIN if r.get("label") and "pre_generated_steps" in r["question"]))
    phase1 = copy.deepcopy(next(r for r in PLAIN if r.get("label") and "pre_generated_steps" not in r["question"]))
    text = 'quote " backslash \\ tab \t newline \n bell \x07 del \x7f é 漢 😀 \u2028 </script>'
    phase2["label"]["steps"][0]["completions"].append({"text": text, "rating": None, "flagged": True})
    human = {"text": text, "z": 1e16, "a": [0.1, -0.0, 1e-07, 2**63 - 1], "é": {"b": None, "a": False}}
    phase1["label"]["steps"][-1]["human_completion"] = human
    phase1["label"]["steps"][-1]["chosen_completion"] = None
    return [phase2, phase1]


# Content hashes of the sample's records as 7fd1248 computed them (problem, solution, label;
# the first 16 hex digits), and of the two awkward records: a re-import of a file imported
# then must still add nothing.
EARLIER_HASHES = [
    ("899194c0eb53304c", "6ce8e89f7ba9e470", "4caed19024bf6d4a"),
    ("1658dee58795d01e", "de6a19a85aa6527c", "6a9a084e0a209831"),
    ("ceea41b37d8af539", "4a1bad18a47168c1", "8e7b2bedbf100ac1"),
    ("aeaac16a87a4d2bf", "d1dc877775d10b8a", "68c6ec6ce48421b0"),
    ("db05322954e1244f", "c2fb0c481ae32d56", "d49941205aa40a83"),
    ("31e3c9e7432c6c77", "85fb7a2343c5a2c9", "09bd4396c6c23640"),
    ("23111b31cc1a6878", "bf8f65303694b19a", "76a464cf003ad0c6"),
    ("899194c0eb53304c", "6ce8e89f7ba9e470", "f34fd9e604a769b5"),
    ("f0a8938574f8a11d", "6421ead8351270ac", "29849b373c4cb1b4"),
    ("899194c0eb53304c", "6ce8e89f7ba9e470", "8774cd607d02ae25"),
    ("aeaac16a87a4d2bf", "4ebbc77d52eb9517", "503825590dd63ff2"),
]


@pytest.mark.parametrize(
    ("record", "earlier"), list(zip(sample_records() + _awkward_records(), EARLIER_HASHES, strict=True))
)
def test_stored_steps_and_hashes_are_those_of_earlier_versions(record: dict[str, Any], earlier: tuple[str, ...]) -> None:
    """Content hashes decide what a re-import adds: they must not change with the encoder."""
    parsed = _parse(record)
    assert parsed.label is not None
    problem = parsed.problem.hash
    solution = parsed.solution.hash_for(problem)
    assert (problem[:16], solution[:16], parsed.label.hash_for(solution)[:16]) == earlier
    as_dicts = _steps_as_dicts(record)
    assert parsed.label.steps.hashed == orjson.dumps(as_dicts, option=orjson.OPT_SORT_KEYS).decode()
    stored = orjson.loads(parsed.label.steps.stored)
    assert stored == as_dicts
    # A human completion object keeps its keys' order, for the export.
    for step, given in zip(stored, record["label"]["steps"], strict=True):
        if isinstance(given.get("human_completion"), dict):
            assert list(step["human_completion"]) == list(given["human_completion"])
    assert solution == solution_hash(problem, parsed.solution.steps, parsed.solution.final_answer, parsed.solution.verifier_score)


def _sample(index: int, *changes: object) -> dict[str, Any]:
    """The sample's record `index` with each (path, value) pair of `changes` set."""
    record = copy.deepcopy(sample_records()[index])
    for path, value in zip(changes[::2], changes[1::2], strict=True):
        *parents, last = str(path).split("/")
        target: Any = record
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value
    return record


ALTERNATIVE_BAD = {"text": "Another way: $2^5$.", "rating": -1, "flagged": False}

# Shapes of PRM800K, and of Stepwise's own exports, that the checks against the finish reason
# and the solution's steps must let through. Records by index: 0 phase 2 found_error at step 3
# of 5, 1 phase 2 solution, 2 give_up, 3 phase 1 solution with a written step, 4 phase 1
# found_error on an open step, 5 bad_problem, 8 phase 2 found_error at its one step.
REAL_SHAPES = {
    "found_error whose -1 is an alternative's": _sample(0, "label/steps/2/completions/0/rating", 0),
    "found_error going on with the -1 step": _sample(8, "label/steps/0/chosen_completion", 0),
    "full mode's found_error, rated past the -1": _sample(
        1, "label/steps/1/completions/0/rating", -1, "label/steps/1/chosen_completion", None,
        "label/finish_reason", "found_error",
    ),
    "give_up going on with a -1 step": _sample(2, "label/steps/0/completions/0/rating", -1),
    "solution past a -1 alternative": _sample(
        1, "label/steps/0/completions", [sample_records()[1]["label"]["steps"][0]["completions"][0], ALTERNATIVE_BAD]
    ),
    "phase-1 solution with a written step as a string": _sample(3, "label/steps/1/human_completion", "$g(-2) = 9$."),
}


def test_every_sample_record_passes_the_consistency_checks() -> None:
    for record in sample_records():
        _parse(record)


@pytest.mark.parametrize("name", REAL_SHAPES)
def test_real_shapes_pass_the_consistency_checks(name: str) -> None:
    _parse(REAL_SHAPES[name])


@pytest.mark.parametrize("human", ["My own step.", {"text": "My own step.", "rating": 1}])
def test_a_step_going_on_with_both_a_chosen_and_a_human_completion_is_refused(human: object) -> None:
    # Sample record 3 is phase 1; its step 0 goes on with completion 0.
    record = _sample(3, "label/steps/0/human_completion", human)
    assert record["label"]["steps"][0]["chosen_completion"] is not None
    assert _error(record) == (
        "label.steps[0]",
        "has both a chosen_completion and a human_completion: a step goes on with one, "
        "a completion chosen or the labeler's own step",
    )


@pytest.mark.parametrize("blank", ["", "  ", "\u200b"])
def test_a_blank_labeler_names_nobody_and_is_hashed_as_written(blank: str) -> None:
    named, unnamed = _parse(_sample(0)), _parse(_sample(0, "labeler", blank))
    assert named.label is not None and unnamed.label is not None
    assert unnamed.label.foreign_labeler is None and unnamed.label.labeler == blank
    solution = unnamed.solution.hash_for(unnamed.problem.hash)
    assert unnamed.label.hash_for(solution) != _parse(_sample(0, "labeler", None)).label.hash_for(solution)  # type: ignore[union-attr]
