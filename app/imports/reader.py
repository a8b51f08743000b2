"""Reading an uploaded JSONL file: its hash, then one line at a time, in bounded memory.

Lines come out as bytes: each format parses its own (PRM800K straight into typed records, see
app.imports.prm800k; the others through `json_object`).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from app.imports.fields import Invalid, type_name, where
from app.imports.json_guard import check_depth, field_at
from app.validation import BIDI_CONTROL, BIDI_REFUSED

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


# Files that are no JSONL text at all, known by their first bytes: read line by line they gave a
# "not valid UTF-8" for every line, when one sentence says what the file is.
_NOT_JSONL = (
    (b"PK\x03\x04", "a zip archive: upload the .jsonl file inside it"),
    (b"\x1f\x8b", "gzip-compressed: decompress it (gunzip) and upload the .jsonl file"),
    (b"PAR1", "a Parquet file: imports read JSONL, one JSON object a line"),
    (b"\xff\xfe", "UTF-16 text: save it as UTF-8"),
    (b"\xfe\xff", "UTF-16 text: save it as UTF-8"),
)


def not_jsonl(stream: BinaryIO) -> str | None:
    """What the file is instead of JSONL text, from its first bytes, or None; the stream is left
    where it was."""
    start = stream.tell()
    head = stream.read(4)
    stream.seek(start)
    for magic, what in _NOT_JSONL:
        if head.startswith(magic):
            return what
    # UTF-16 without a byte order mark: every other byte of "{" and the like is a NUL, the
    # second of each pair (little-endian) or the first (big-endian).
    if len(head) == 4 and (bool(head[0]) != bool(head[1])) and (bool(head[2]) != bool(head[3])):
        return "UTF-16 text: save it as UTF-8"
    return None


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
    """One line's JSON object; Invalid, naming the field where it can, when the line is not one."""
    check_depth(raw)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _invalid_json(raw, exc) from None
    if not isinstance(value, dict):
        raise Invalid(None, f"expected a JSON object, got {type_name(value)}")
    # PostgreSQL text cannot hold NUL; the escaped form is the only way one gets this far.
    if b"\\u0000" in raw and (field := _field_holding(value, "", _NUL)) is not None:
        raise Invalid(field or None, "text contains a NUL character (\\u0000)")
    if _BIDI_BYTES.search(raw) and (field := _field_holding(value, "", BIDI_CONTROL)) is not None:
        raise Invalid(field or None, f"{BIDI_REFUSED}: a labeler would grade what is not there. Remove it")
    return value


def _invalid_json(raw: bytes, exc: orjson.JSONDecodeError) -> Invalid:
    """What orjson found wrong with the line, and in which field."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return Invalid(field_at(raw, bad.start), f"not valid UTF-8 (byte {bad.start + 1} of the line)")
    # orjson counts characters; the walk goes by bytes. A line that ends too soon ends at its line
    # break, which orjson counts as the start of a next line ("column 1").
    position = min(exc.pos, len(text.rstrip("\r\n")))
    offset = len(text[:position].encode())
    return Invalid(field_at(raw, offset), f"invalid JSON: {exc.msg} (column {position + 1})")


_NUL = re.compile("\x00")
# BIDI_CONTROL's characters as a line's bytes hold them, raw or escaped: most lines hold none, and
# are not walked field by field.
_BIDI_BYTES = re.compile(rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]|\\u20(?:2[a-eA-E]|6[6-9])")


def _field_holding(value: Any, path: str, characters: re.Pattern[str]) -> str | None:
    """The path of the first string (or key) holding one of `characters`; None if none does."""
    if isinstance(value, str):
        return path if characters.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if characters.search(key):
                return where(path, key.replace("\x00", "\\u0000"))
            if (found := _field_holding(item, where(path, key), characters)) is not None:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            if (found := _field_holding(item, where(path, i), characters)) is not None:
                return found
    return None
