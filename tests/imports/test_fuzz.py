"""The import parsers, fuzzed: any line is either accepted or refused as Invalid, never a crash."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.imports.candidates import parse_candidate
from app.imports.fields import Invalid
from app.imports.prm800k import parse_prm800k
from app.imports.problems import parse_problem
from app.imports.reader import json_object
from tests.imports.conftest import sample_records

NOW = datetime(2024, 1, 1, tzinfo=UTC)
GOOD = sample_records()
# The same examples on every run, as the other fuzz tests: CI's verdict on a change must not
# depend on the draw. To explore further, run with a larger max_examples by hand.
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _parse_all(raw: bytes) -> None:
    for parse in (
        lambda: parse_prm800k(raw, {}, NOW),
        lambda: parse_problem(json_object(raw)),
        lambda: parse_candidate(json_object(raw), "\n\n", {}),
    ):
        try:
            parse()
        except Invalid as exc:
            assert exc.message
            assert exc.field is None or isinstance(exc.field, str)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=30,
)
# Text a JSON encoder would not write: huge numbers, bad escapes, raw bytes, deep brackets.
hostile_tokens = st.sampled_from(
    [b"1e999999", b"9" * 5000, b"-0", b'"\\ud800"', b'"\\u0000"', b'"\xff\xfe"', b"\x00", b"[" * 1100, b"]" * 70, b'{"a":' * 70, b"NaN", b'"\\"', b"\xef\xbb\xbf"]
)
# Paths into a good record where a value may be swapped for another.
PATHS = [
    ("generation",),
    ("labeler",),
    ("timestamp",),
    ("question", "problem"),
    ("question", "pre_generated_steps"),
    ("question", "pre_generated_verifier_score"),
    ("label", "finish_reason"),
    ("label", "total_time"),
    ("label", "steps"),
]


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_a_parser(raw: bytes) -> None:
    _parse_all(raw)


@FUZZ
@given(json_values)
def test_arbitrary_json_never_crashes_a_parser(value: Any) -> None:
    _parse_all(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) if _encodable(value) else b"{}")


@FUZZ
@given(st.sampled_from(range(len(GOOD))), st.sampled_from(PATHS), json_values)
def test_a_good_record_with_any_value_anywhere_never_crashes(index: int, path: tuple[str, ...], value: Any) -> None:
    record = copy.deepcopy(GOOD[index])
    target = record
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[path[-1]] = value
    if _encodable(record):
        _parse_all(orjson.dumps(record))


@FUZZ
@given(st.sampled_from(range(len(GOOD))), st.data())
def test_hostile_text_spliced_into_a_good_line_never_crashes(index: int, data: st.DataObject) -> None:
    raw = orjson.dumps(GOOD[index])
    at = data.draw(st.integers(0, len(raw)))
    cut = data.draw(st.integers(0, 20))
    token = data.draw(hostile_tokens)
    _parse_all(raw[:at] + token + raw[at + cut :])


@FUZZ
@given(st.datetimes() | st.sampled_from([datetime.min, datetime.max]), st.none() | st.integers(-1439, 1439))
def test_any_timestamp_is_taken_or_refused(moment: datetime, offset: int | None) -> None:
    if offset is not None:
        moment = moment.replace(tzinfo=timezone(timedelta(minutes=offset)))
    record = {**GOOD[0], "timestamp": moment.isoformat()}
    _parse_all(orjson.dumps(record))


def _encodable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True
