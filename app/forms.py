"""Validating browser forms into the same schemas the JSON API takes.

A page shows a bad field next to the form the person just filled in, with what they typed kept,
instead of the bare error page a JSON client gets; the schema's rules stay the one source.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel, ValidationError

from app.deps import RowId
from app.errors import plain_message
from app.models import INT32_MAX
from app.validation import AS_TEXT

Schema = TypeVar("Schema", bound=BaseModel)

PageId = RowId


def row_id(value: str) -> int | None:
    """A row id typed in an address or a form, or None for anything else: superscript and
    Arabic-Indic digits are digits to str.isdigit, and int() refuses them."""
    return int(value) if value.isascii() and value.isdigit() and 0 < int(value) <= INT32_MAX else None


async def _sent_fields(request: Request) -> frozenset[str]:
    # FastAPI hands a form model a field sent empty as one not sent at all (its default
    # applies), so only the raw form tells "emptied: clear it" from "left out: keep it".
    return frozenset((await request.form()).keys())


# The names of the fields the posted form carried, empty ones included.
SentFields = Annotated[frozenset[str], Depends(_sent_fields)]


def sent_values(form: BaseModel, sent: frozenset[str]) -> dict[str, Any]:
    """The form's fields that the post carried: a settings form that updates only these
    leaves a setting the post left out as stored, and clears one sent empty."""
    return {name: value for name, value in form.model_dump().items() if name in sent}


class FormInvalid(Exception):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def validate_form(
    schema: type[Schema],
    values: dict[str, Any],
    *,
    keep_blank: tuple[str, ...] = (),
    required: Iterable[str] = (),
) -> Schema:
    """Blank fields count as not given (so a default or None applies), except `keep_blank`
    ones, where blank is a value: an emptied description. A `required` field sent blank is
    refused: a setting that cannot be empty would otherwise stay as stored under a page that
    says it saved."""
    given = {k: v for k, v in values.items() if k in keep_blank or v not in ("", None)}
    errors = {k: "needs a value" for k in required if k in values and values[k] in ("", None)}
    try:
        validated = schema.model_validate(given, context=AS_TEXT)
    except ValidationError as exc:
        raise FormInvalid({**_messages(schema, exc), **errors}) from None
    if errors:
        raise FormInvalid(errors)
    return validated


def _messages(schema: type[BaseModel], exc: ValidationError) -> dict[str, str]:
    """One message per form field; an error in a list item or in the whole form says so."""
    errors: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        field = str(loc[0]) if loc else "form"
        message = plain_message(error, schema)
        if len(loc) > 1 and isinstance(loc[1], int):
            given = error.get("input")
            # The value itself, so that a long list's bad item is found without counting.
            named = f" ({given!r})" if isinstance(given, str) and 0 < len(given) <= 40 else ""
            message = f"item {loc[1] + 1}{named}: {message}"
        errors.setdefault(field, message)
    return errors
