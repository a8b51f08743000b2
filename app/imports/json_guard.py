"""What a JSON line must be before a parser sees it, and where in it something is wrong.

Nesting is limited before parsing: msgspec and orjson recurse on the C stack, msgspec raises
RecursionError near Python's recursion limit (a line nested 1,000 levels deep was a 500), and
orjson encodes nothing deeper than 255 levels, which a stored document must be exported
through. No record Stepwise reads nests deeper than 6 (PRM800K's completions).

`field_at` names the field around a byte of the line (a bad UTF-8 byte, the point a parser
stopped at), in the words of the other checks: label.steps[2].human_completion.
"""

from __future__ import annotations

import re

from app.imports.fields import Invalid, where

MAX_DEPTH = 64
# Past this many tokens a hostile line is not worth walking to name a field: the line is
# still refused, without one.
_MAX_TOKENS_WALKED = 200_000
_SHOWN_PARTS = 8

_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRINGS = re.compile(_STRING, re.DOTALL)
# An unterminated string runs to the end of the line.
_TOKENS = re.compile(_STRING + rb'|"[^"]*$|[\[\]{},:]', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")


def check_depth(raw: bytes) -> None:
    """Invalid if the line's arrays and objects nest more than MAX_DEPTH deep."""
    # A line with few brackets cannot nest deeply, whatever its strings hold.
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    parens = _STRINGS.sub(b"", raw).translate(_AS_PARENS, _NOT_BRACKETS)
    if parens.count(b"(") <= MAX_DEPTH:
        return
    # Each pass takes away the innermost level of every nest: a line still holding a pair
    # after MAX_DEPTH passes nests deeper, and so does one left with more unclosed brackets
    # (each inside the one before). bytes.replace runs in C, unlike a loop over bytes.
    for _ in range(MAX_DEPTH):
        if b"()" not in parens:
            break
        parens = parens.replace(b"()", b"")
    if b"()" in parens or parens.count(b"(") > MAX_DEPTH:
        raise Invalid(field_at(raw, depth=MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep")


def field_at(raw: bytes, offset: int | None = None, *, depth: int | None = None) -> str | None:
    """The field holding byte `offset` of the line, or the one whose value opens nesting level
    `depth`; None for the line as a whole, or a line too long to walk."""
    # Each open container: [is_object, key or index, expecting a key].
    stack: list[list[object]] = []
    for count, token in enumerate(_TOKENS.finditer(raw)):
        if count >= _MAX_TOKENS_WALKED:
            return None
        if offset is not None and token.start() > offset:
            break
        text = token.group()
        top = stack[-1] if stack else None
        if text in (b"{", b"["):
            if depth is not None and len(stack) + 1 >= depth:
                return _path(stack)
            stack.append([True, None, True] if text == b"{" else [False, 0, False])
        elif text in (b"}", b"]"):
            if stack:
                stack.pop()
        elif top is None:
            pass
        elif text == b",":
            if top[0]:
                top[1], top[2] = None, True
            else:
                top[1] += 1  # type: ignore[operator]
        elif text == b":":
            top[2] = False
        elif top[0] and top[2]:
            top[1] = _key(text)
        if offset is not None and token.end() > offset:
            break
    return _path(stack)


def _key(token: bytes) -> str:
    # An unterminated key runs to the end of the line, its line break too, which would break
    # the message in two.
    inner = token[1:-1] if token.endswith(b'"') and len(token) > 1 else token[1:].rstrip(b"\r\n")
    return inner.decode("utf-8", "replace").replace('\\"', '"')[:100]


def _path(stack: list[list[object]]) -> str | None:
    parts = [frame[1] for frame in stack if frame[1] is not None]
    path = ""
    for part in parts[:_SHOWN_PARTS]:
        path = where(path, part)  # type: ignore[arg-type]
    if len(parts) > _SHOWN_PARTS:
        path += "…"
    return path or None
