"""Rules the writable schemas share."""

from __future__ import annotations

import re
from functools import cache
from collections.abc import Mapping
from typing import Annotated, Any, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator


# Bidirectional embeddings, overrides and isolates ("Trojan Source"): the text after one reads
# reversed or reordered on every page, while what is stored, exported and trained on is not.
# Right-to-left text needs none of them; the marks U+200E and U+200F stay allowed.
BIDI_CONTROL = re.compile("[\u202a-\u202e\u2066-\u2069]")
BIDI_REFUSED = ("text contains a bidirectional override, embedding or isolate character (U+202A to U+202E, "
                "U+2066 to U+2069), which shows the text after it in another order than it is stored")


def refuse_bidi_controls(value: object) -> object:
    """A field validator: the imports refuse these characters in what labelers grade, and a
    project's description and guidelines are read by the same labelers."""
    if isinstance(value, str) and BIDI_CONTROL.search(value):
        raise ValueError(f"{BIDI_REFUSED}: a labeler would read what is not there. Remove it")
    return value


# The validation context of a browser form's or the command line's values, which come as text:
# "3" is a number there. A JSON body says what it means, and "3" for a number is a client's bug.
AS_TEXT = {"as_text": True}


class ScalarsAsWritten(BaseModel):
    """Numbers and truth values as they are written. In a JSON body (the API), text is refused
    for them, and numbers for truth values: pydantic's lax mode read `"flagged": "yes"` as true
    and stored every step flagged, `"is_active": "false"` deactivated a user, and `"paused": 0`
    resumed a project. Browser forms and the command line send text,
    validated with the AS_TEXT context, where only "true" and "false" are truth values (not
    "yes", which pydantic takes for true). Everywhere JSON `true` and `false` are refused for
    numbers: pydantic reads them as 1 and 0, so `"selector_version_id": true` pinned version 1
    and `"correction_window_hours": false` closed corrections. "nan" and infinities are refused
    too, which failed a 0-1 range as "must be at most 1.0"."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _scalars_as_written(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = _kinds(cls.model_fields[info.field_name].annotation)
        scalar = kinds & {bool, int, float}
        if not scalar:
            return value
        values = list(value.values()) if isinstance(value, dict) else [value]
        as_text = bool(info.context and info.context.get("as_text"))
        if not as_text and str not in kinds and any(isinstance(item, str) for item in values):
            # The words of pydantic's own type errors (app.errors.plain_message).
            raise ValueError("must be true or false" if bool in scalar
                             else "must be a number" if float in scalar else "must be a whole number")
        if not as_text and scalar == {bool} and any(type(item) in (int, float) for item in values):
            raise ValueError("must be true or false")
        if bool in kinds:
            # pydantic reads "yes", "on", "1" and "t" as true; the forms send "true" or "false".
            if isinstance(value, str) and value not in ("true", "false"):
                raise ValueError("must be true or false")
            return value
        if any(isinstance(item, bool) for item in values):
            raise ValueError("must be a number, not true or false")
        return value


@cache
def _kinds(annotation: Any) -> frozenset[Any]:
    """The types an annotation names, its unions' and containers' included, but a mapping's keys,
    which JSON writes as text whatever they stand for (once per field: every request's every
    field asks)."""
    kinds = {annotation}
    args = get_args(annotation)
    if get_origin(annotation) in (dict, Mapping):
        args = args[1:]
    for arg in args:
        kinds |= _kinds(arg)
    return frozenset(kinds)


def named_by_rule(pattern: str, rule: str, max_length: int) -> Any:
    """A name checked against `pattern` and refused in words: a pattern's own error shows the
    regular expression, and the API, which has no model at hand to find the field's description
    (app.errors.plain_message), answered a blank project name with one. The pattern stays in the
    schema for clients that validate by it."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError("needs a value")
        if len(value) > max_length:
            raise ValueError(f"must be at most {max_length} characters long")
        if not compiled.fullmatch(value):
            raise ValueError(f"use only {rule}")
        return value

    return Annotated[str, AfterValidator(check), Field(description=rule, json_schema_extra={"pattern": pattern})]
