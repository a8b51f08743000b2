"""Errors services raise; app.main turns them into clear 4xx answers (JSON or page)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field


class ServiceError(Exception):
    status_code = 400
    # Extra response headers (Retry-After, say).
    headers: dict[str, str] | None = None

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadInput(ServiceError):
    status_code = 422

    def __init__(self, message: str, details: Any = None, *, field: str | None = None) -> None:
        # `field`: the body field to fix, named in `errors` as a schema error names it.
        super().__init__(message, [{"field": field, "message": message}] if field else details)


class BadLines(BadInput):
    """An import file with bad lines: `details` gives each one's file, line, field and message."""


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    status_code = 409


class Stale(ServiceError):
    """A write made against a version the caller read, which has changed since (If-Match)."""

    status_code = 412


class Forbidden(ServiceError):
    status_code = 403


class Busy(ServiceError):
    """Work the server has no room for now, which a retry in a few seconds may find."""

    status_code = 503

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after_s)}


# Pydantic's wording for the commonest slips, said plainly and the same way in a form, an API
# answer and the CLI: "must be at least 1", not "Input should be greater than or equal to 1".
PLAIN_MESSAGES = {
    "missing": "this field is required",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "date_parsing": "must be a date (YYYY-MM-DD)",
    "date_from_datetime_parsing": "must be a date (YYYY-MM-DD)",
    "datetime_parsing": "must be a date and time in ISO 8601 (2026-11-28T09:30:00Z)",
    "datetime_from_date_parsing": "must be a date and time in ISO 8601 (2026-11-28T09:30:00Z)",
    "datetime_type": "must be a date and time in ISO 8601 (2026-11-28T09:30:00Z)",
    # A number of thousands of digits: no field here takes one.
    "int_parsing_size": "is too long a number",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "greater_than": "must be more than {gt}",
    "less_than": "must be less than {lt}",
    "string_too_short": "must be at least {min_length} characters long",
    "string_too_long": "must be at most {max_length} characters long",
    "too_short": "needs at least {min_length} items",
    "too_long": "takes at most {max_length} items",
    "enum": "must be one of {expected}",
    "literal_error": "must be one of {expected}",
    # A JSON body's wrong types, in the words the forms and the CLI use.
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_unicode": "must be text (UTF-8)",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "extra_forbidden": "is not a field here",
}


def plain_message(error: Mapping[str, Any], schema: type[BaseModel] | None = None) -> str:
    """What a pydantic error says, in the words of PLAIN_MESSAGES; a validator's own sentence
    without pydantic's "Value error, " in front; a pattern by the rule the schema's field
    describes in words, where it does."""
    kind, ctx = error.get("type"), error.get("ctx") or {}
    if kind == "value_error" and "error" in ctx:
        message = str(ctx["error"])
        # FastAPI's words for a multipart part sent without a file name where a file is due.
        if message.startswith("Expected UploadFile"):
            return "must be a file: a part with a file name"
        return message
    if kind == "string_pattern_mismatch":
        if error.get("input") == "":
            return "needs a value"
        loc = error.get("loc") or ("",)
        info = schema.model_fields.get(str(loc[0])) if schema is not None else None
        if info is not None and info.description:
            return f"use only {info.description}"
        return f"contains characters that are not allowed: it must match {ctx.get('pattern', 'the field pattern')}"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in PLAIN_MESSAGES:
        # A bound of 1 is "1", not "1.0" (a float field's bounds are floats).
        shown = {key: f"{value:g}" if isinstance(value, float) else value for key, value in ctx.items()}
        try:
            return PLAIN_MESSAGES[kind].format(**shown)
        except (KeyError, IndexError):
            pass
    return str(error.get("msg", "invalid"))


def field_error(error: Mapping[str, Any], *, whole: str, name: Callable[[str], str] = str,
                schema: type[BaseModel] | None = None) -> dict[str, str]:
    """A pydantic error as an item of `errors`: its location joined with dots (FastAPI's "body"
    left out), or `whole` when the error is about the input as a whole."""
    field = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    return {"field": name(field) if field else whole, "message": plain_message(error, schema)}


class ErrorItem(BaseModel):
    """One thing wrong: a field of the request, or a line of an uploaded file."""

    field: str | None = None
    message: str
    file: str | None = None
    line: int | None = None


class ErrorBody(BaseModel):
    """The body of every JSON error answer."""

    detail: str = Field(description="what went wrong, in one sentence")
    errors: list[ErrorItem] | None = Field(
        default=None, description="each bad field or file line, when there are any"
    )


ERROR_MEANINGS = {
    400: "the body is not valid JSON or form data",
    401: "not logged in, or an unknown or revoked bearer token",
    403: "the caller's role may not do this, or a browser call came without its CSRF token",
    404: "no such object, or none the caller may see",
    409: "conflicts with what is stored, or with a write made at the same moment",
    412: "If-Match names a version that has changed since: read the object again",
    413: "the upload is larger than STEPWISE_MAX_UPLOAD_MB",
    422: "invalid request: `errors` names each bad field",
    429: "too many failed logins for this username or from this address: retry after "
    "`Retry-After` seconds",
    503: "the server has no room for this now: retry after `Retry-After` seconds",
}
RESPONSE_HEADERS = {
    429: {"Retry-After": {"description": "seconds until the lockout ends", "schema": {"type": "integer"}}},
    503: {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}},
}


def error_responses(*codes: int, described: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for error answers, so that the schema shows the body they really have:
    FastAPI's own 422 entry describes its validation error, which app.main answers as ErrorBody."""
    described = described or {}
    return {
        code: {
            "model": ErrorBody,
            "description": described.get(code, ERROR_MEANINGS[code]),
            **({"headers": RESPONSE_HEADERS[code]} if code in RESPONSE_HEADERS else {}),
        }
        for code in codes
    }
