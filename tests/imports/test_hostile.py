"""Hostile lines through every way in (API, upload page, CLI): each is a bad line naming its
file, line and field, answered 422 (exit status 2), and nothing changes. Each of these lines
was a 500 or a traceback once, or could have been."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.imports.json_guard import MAX_DEPTH
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.imports.conftest import row_counts, sample_records
from tests.imports.test_pages import _error_rows

GOOD = sample_records()[0]
DEPTH = f"nested more than {MAX_DEPTH} levels deep"


def _prm(path: str, value: bytes) -> bytes:
    """The first sample record with the JSON text `value` at `path` (keys and indexes by /)."""
    record = copy.deepcopy(GOOD)
    *parents, last = path.split("/")
    target = record
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = "\x1fHERE\x1f"
    return orjson.dumps(record).replace(b'"\\u001fHERE\\u001f"', value)


def _nest(levels: int) -> bytes:
    return b"[" * levels + b'"x"' + b"]" * levels


HUMAN = "label/steps/0/human_completion"
HUMAN_FIELD = "label.steps[0].human_completion"
# (name, line, field the error names, words of its message)
CORPUS = {
    "prm800k": [
        ("human completion nested 1,000 deep", _prm(HUMAN, b'{"text": "a", "x": ' + _nest(1000) + b"}"), f"{HUMAN_FIELD}.x[0][0][0]…", DEPTH),
        ("human completion nested 5,000 deep", _prm(HUMAN, b'{"text": "a", "x": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001), f"{HUMAN_FIELD}.x.a.a.a…", DEPTH),
        ("invalid UTF-8 in a human completion", _prm(HUMAN, b'"caf\xe9"'), HUMAN_FIELD, "not valid UTF-8"),
        ("invalid UTF-8 in the problem", _prm("question/problem", b'"\xff\xfe 1+1?"'), "question.problem", "not valid UTF-8"),
        ("a raw NUL byte", _prm("question/problem", b'"a\x00b"'), "question.problem", "control character"),
        ("an escaped NUL", _prm(HUMAN, b'{"text": "a\\u0000"}'), f"{HUMAN_FIELD}.text", "NUL"),
        ("a lone surrogate", _prm("question/problem", b'"\\ud800"'), "question.problem", "surrogate"),
        ("1e999999", _prm("question/pre_generated_verifier_score", b"1e999999"), "question.pre_generated_verifier_score", "infinity"),
        ("a 5,000-digit integer", _prm("generation", b"9" * 5000), "generation", "infinity"),
        ("a huge integer in a human completion", _prm(HUMAN, b'{"text": "a", "n": ' + b"1" * 5000 + b"}"), f"{HUMAN_FIELD}.n", "infinity"),
        ("an unknown key nested deep", orjson.dumps(GOOD)[:-1] + b', "zz": ' + _nest(70) + b"}", "zz[0][0][0][0][0][0][0]…", DEPTH),
        ("2 MB of open brackets", b"[" * (2 * 1024 * 1024), "[0][0][0][0][0][0][0][0]…", DEPTH),
    ],
    "math": [
        ("a problem nested 1,000 deep", b'{"problem": ' + _nest(1000) + b"}", "problem[0][0][0][0][0][0][0]…", DEPTH),
        ("invalid UTF-8 in a problem", b'{"problem": "caf\xe9", "answer": "1"}', "problem", "not valid UTF-8"),
        ("a raw NUL byte", b'{"problem": "a\x00", "answer": "1"}', "problem", "control character"),
        ("1e999999 as a level", b'{"problem": "a", "level": 1e999999}', "level", "infinity"),
        ("a NUL in a key", b'{"problem": "a", "x\\u0000": 1}', "x\\u0000", "NUL"),
    ],
    "solutions": [
        ("steps nested 5,000 deep", b'{"problem_id": 1, "steps": ' + _nest(5000) + b"}", "steps[0][0][0][0][0][0][0]…", DEPTH),
        ("invalid UTF-8 in a step", b'{"problem_id": 1, "steps": ["ok", "\xc3("]}', "steps[1]", "not valid UTF-8"),
        ("a 5,000-digit problem id", b'{"problem_id": ' + b"7" * 5000 + b', "steps": ["a"]}', "problem_id", "infinity"),
    ],
}


def _file(fmt: str) -> tuple[bytes, list[tuple[int, str, str]]]:
    """The corpus of one format as a file, one bad line after each blank one, and what each
    line's error must say: (line, field, words)."""
    data = b""
    expected = []
    for number, (_, line, field, words) in enumerate(CORPUS[fmt]):
        data += b"\n" + line + b"\n"
        expected.append((2 * number + 2, field, words))
    return data, expected


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    return make_project(session_factory)


@pytest.mark.parametrize("fmt", list(CORPUS))
def test_the_api_answers_422_for_every_hostile_line(client, session_factory, project, fmt: str) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "mia", "manager")
    headers = api_headers(client, "mia")
    data, expected = _file(fmt)
    before = row_counts(session_factory)
    response = client.post(
        f"/api/v1/projects/{project.id}/imports",
        headers=headers,
        data={"format": fmt},
        files={"file": ("hostile.jsonl", data, "application/x-ndjson")},
    )
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [(e["file"], e["line"], e["field"]) for e in errors] == [("hostile.jsonl", n, f) for n, f, _ in expected]
    for error, (_, _, words) in zip(errors, expected, strict=True):
        assert words in error["message"]
    assert row_counts(session_factory) == before


@pytest.mark.parametrize("fmt", list(CORPUS))
def test_the_upload_page_lists_every_hostile_line(client, session_factory, project, fmt: str) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "max")
    data, expected = _file(fmt)
    before = row_counts(session_factory)
    response = client.post(
        f"/manage/projects/{project.id}/import",
        data={"csrf_token": csrf, "format": fmt},
        files={"file": ("hostile.jsonl", data, "application/x-ndjson")},
    )
    assert response.status_code == 422, response.text[-2000:]
    rows = _error_rows(response.text)
    assert [r[:3] for r in rows] == [("hostile.jsonl", str(n), f) for n, f, _ in expected]
    for row, (_, _, words) in zip(rows, expected, strict=True):
        assert words in row[3]
    assert row_counts(session_factory) == before


@pytest.mark.parametrize("fmt", list(CORPUS))
def test_the_cli_exits_2_for_every_hostile_line(session_factory, settings, project, monkeypatch, tmp_path: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("app.cli.get_settings", lambda: settings)
    data, expected = _file(fmt)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(data)
    before = row_counts(session_factory)
    result = CliRunner().invoke(cli, ["import", "--project", project.name, "--format", fmt, str(path)])
    assert result.exit_code == 2, result.output
    assert f"Error: {len(expected)} bad lines in hostile.jsonl: nothing was imported" in result.stderr
    for number, field, words in expected:
        assert f"hostile.jsonl:{number} {field}: " in result.stderr
        assert words in result.stderr.split(f"hostile.jsonl:{number} {field}: ", 1)[1].split("\n", 1)[0]
    assert "Traceback" not in result.output
    assert row_counts(session_factory) == before
