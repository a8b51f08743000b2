"""Typed reads of one field of a parsed JSON line (problem and candidate files; PRM800K lines
are typed by msgspec, see app.imports.prm800k); the first wrong one ends the line's check.

Types are strict (`true` is not a rating, `1.0` is not a time in milliseconds) because an import
must be re-exported as it came, and a value that changed type on the way would not be.
"""

from __future__ import annotations

from typing import Any

from app.models import INT32_MAX


class Invalid(Exception):
    """What is wrong with a line: in `field` (a path such as label.steps[2].text), or, with no
    field, in the line as a whole."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def where(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def text(
    obj: dict[str, Any],
    key: str,
    *,
    required: bool = False,
    max_length: int | None = None,
    numbers: bool = False,
) -> str | None:
    """A string field; with `numbers`, an integer is taken as its decimal text (answers)."""
    value = obj.get(key)
    if value is None:
        if required:
            raise Invalid(key, "missing")
        return None
    if numbers and type(value) is int:
        value = str(value)
    if type(value) is not str:
        raise Invalid(key, f"must be a string, not {type_name(value)}")
    if required and not value.strip():
        raise Invalid(key, "is empty")
    if max_length is not None and len(value) > max_length:
        raise Invalid(key, f"longer than {max_length} characters")
    return value


def integer(obj: dict[str, Any], key: str, *, low: int = -INT32_MAX, high: int = INT32_MAX) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not int and not beyond_64_bits(value):
        raise Invalid(key, f"must be an integer, not {type_name(value)}")
    if not low <= value <= high:
        raise Invalid(key, f"must be between {low} and {high}")
    return value


def beyond_64_bits(value: Any) -> bool:
    """Whether `value` may be an integer too large for 64 bits, which orjson reads as a float: its
    field is to be told its range, not that it is no integer. A float this large that was
    written as one (1e20) is out of every range here too."""
    return type(value) is float and not -(2**63) <= value < 2**64


def string_list(obj: dict[str, Any], key: str, *, max_items: int) -> list[str] | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not list:
        raise Invalid(key, f"must be an array of strings, not {type_name(value)}")
    if not value:
        raise Invalid(key, "is empty: a solution needs at least one step")
    if len(value) > max_items:
        raise Invalid(key, f"has {len(value)} steps; at most {max_items} are allowed")
    for i, item in enumerate(value):
        if type(item) is not str:
            raise Invalid(where(key, i), f"must be a string, not {type_name(item)}")
    return value


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
