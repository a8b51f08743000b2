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


class BadLines(BadInput):
    """An import file with bad lines: `details` gives each one's file, line, field and message."""


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    status_code = 409


class Forbidden(ServiceError):
    status_code = 403


def field_error(error: Mapping[str, Any], *, whole: str, name: Callable[[str], str] = str) -> dict[str, str]:
    """A pydantic error as an item of `errors`: its location joined with dots (FastAPI's "body"
    left out), or `whole` when the error is about the input as a whole."""
    field = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    return {"field": name(field) if field else whole, "message": error.get("msg", "invalid")}


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
    413: "the upload is larger than STEPWISE_MAX_UPLOAD_MB",
    422: "invalid request: `errors` names each bad field",
    429: "too many failed logins for this username or from this address: retry after "
    "`Retry-After` seconds",
}
RESPONSE_HEADERS = {
    429: {"Retry-After": {"description": "seconds until the lockout ends", "schema": {"type": "integer"}}},
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
