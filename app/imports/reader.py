"""Reading an uploaded JSONL file: its hash, then one line at a time, in bounded memory.

Lines come out as bytes: each format parses its own (PRM800K straight into typed records, see
app.imports.prm800k; the others through `json_object`).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from app.imports.fields import Invalid, type_name

MAX_LINE_BYTES = 10 * 1024 * 1024
_BLOCK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Line:
    """One non-blank line: its number (from 1) and either its bytes or what is wrong with it."""

    number: int
    raw: bytes = b""
    error: str | None = None


def hashed_and_rewound(stream: BinaryIO) -> tuple[str, BinaryIO]:
    """The file's sha256 and a stream positioned at its start.

    The hash must be known before anything is written (a file imported before adds nothing, not
    even a batch row), so a stream that cannot seek is first spooled to a temporary file.
    """
    digest = hashlib.sha256()
    if stream.seekable():
        start = stream.tell()
        while block := stream.read(_BLOCK):
            digest.update(block)
        stream.seek(start)
        return digest.hexdigest(), stream
    spool = tempfile.SpooledTemporaryFile(max_size=8 * _BLOCK)
    while block := stream.read(_BLOCK):
        digest.update(block)
        spool.write(block)
    spool.seek(0)
    return digest.hexdigest(), spool  # type: ignore[return-value]


def read_lines(stream: BinaryIO) -> Iterator[Line]:
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            _skip_rest_of_line(stream)
            yield Line(number, error=f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MB")
            continue
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        if not raw.strip():
            continue
        yield Line(number, raw)


def _skip_rest_of_line(stream: BinaryIO) -> None:
    while chunk := stream.readline(_BLOCK):
        if chunk.endswith(b"\n"):
            return


def json_object(raw: bytes) -> dict[str, Any]:
    """One line's JSON object; Invalid, naming no field, when the line is not one."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise Invalid(None, f"not valid UTF-8 (byte {bad.start + 1} of the line)") from None
        raise Invalid(None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise Invalid(None, f"expected a JSON object, got {type_name(value)}")
    # PostgreSQL text cannot hold NUL; the escaped form is the only way one gets this far.
    if b"\\u0000" in raw and _has_nul(value):
        raise Invalid(None, "text contains a NUL character (\\u0000)")
    return value


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in k or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False
