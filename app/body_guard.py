"""Refuses a JSON or form body that holds a NUL character, a JSON body in which an object names a
key more than once (app.request_body), and any body but a file upload's that is larger than any
route takes, before any route reads it.

PostgreSQL text cannot hold NUL and refuses it on write; SQLite stores it, and a project's own
export then failed to import back (the importer refuses NUL, as PostgreSQL would). One check at
the door makes both databases answer alike, for every JSON and form field at once, with JSON
columns included (a NUL escaped in a JSON document is text to SQLite, and PostgreSQL's jsonb
refuses it). Multipart bodies carry files, which the importer judges itself (and bounds by
STEPWISE_MAX_UPLOAD_MB); their other fields reach SQLite's own check (app.db).

The size: FastAPI reads and parses a whole body before any field's bound or the caller's role is
checked, so a 256 MB score request, each field within its bound, held the server at gigabytes
before it could be refused. An upload's body, a file spooled to disk as it comes, was read whole
too, from anyone: an anonymous client could fill the server's disk before its 401. So a caller
the upload route would turn away is turned away before a byte of the body is read, and an upload
larger than STEPWISE_MAX_UPLOAD_MB is refused as soon as it says so or grows past it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.request_body import REPEATED_KEY, invalid_request_message, is_json, media_type, repeated_keys

# An escaped NUL, not an escaped backslash followed by "u0000": an even run of backslashes
# before it is backslashes.
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_FORM_NUL = re.compile(rb"%00")
MESSAGE = "the request holds a NUL character (\\u0000), which no field may contain"
NOT_UTF8 = "the body is not UTF-8 (it reads as UTF-16 or UTF-32): send JSON encoded as UTF-8"
# The largest JSON or form body a route takes is a score request's million characters, written
# as \uXXXX escapes (six bytes a character) by a client that escapes all but ASCII.
MAX_BODY_BYTES = 16 * 1024 * 1024
TOO_LARGE = f"the request body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MB, more than any field here takes"
# Room in an upload's body, beyond its file, for the multipart boundaries and the other fields.
UPLOAD_FORM_BYTES = 1024 * 1024


class _UploadTooLarge(Exception):
    """Raised into the upload route's reading of the body, to stop it."""


def _wide(body: bytes) -> bool:
    """Whether a body's NUL bytes are those of UTF-16 or UTF-32 text, as a Windows tool may send:
    its ASCII characters come with zero bytes beside them (RFC 8259 asks for UTF-8)."""
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    head = body[:64]
    return len(head) >= 4 and head.count(0) * 3 >= len(head)


def _pattern(kind: str) -> re.Pattern[bytes] | None:
    if is_json(kind):
        return _JSON_NUL
    if kind == "application/x-www-form-urlencoded":
        return _FORM_NUL
    return None


class BodyGuard:
    def __init__(self, app: ASGIApp,
                 refuse: Callable[[Request, int, str, list[dict[str, str]] | None], Awaitable[Response]],
                 caller_refusal: Callable[[Request], Awaitable[Response | None]],
                 uploads: re.Pattern[str]) -> None:
        self.app = app
        # The paths whose multipart bodies are files, read as they come by their routes.
        self.uploads = uploads
        # The app's error answer (JSON for the API, a page otherwise; the route's login and
        # role refusal first), and that login and role refusal alone (None: the caller may go
        # on), given by app.main so that this module need not import them.
        self.refuse = refuse
        self.caller_refusal = caller_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH", "DELETE"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # The first Content-Type, as the routes read it: a second one must not hide the body.
        kind = media_type(headers)
        if kind == "multipart/form-data" and self.uploads.fullmatch(scope["path"]):
            await self._upload(scope, receive, send, headers)
            return
        # Any other body is read whole by the route, whatever it says it is (FastAPI reads a JSON
        # route's body before looking at its type, and parses one without a type as JSON), so
        # each is bounded; JSON and form bodies are also searched for NUL.
        pattern = _pattern(kind)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            await self._refuse(scope, receive, send, 413, TOO_LARGE)
            return
        chunks = []
        size = 0
        message = await receive()
        while message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_BODY_BYTES:
                await self._refuse(scope, receive, send, 413, TOO_LARGE)
                return
            if not message.get("more_body", False):
                body = b"".join(chunks)
                if pattern is not None and (b"\x00" in body or pattern.search(body)):
                    await self._refuse(scope, receive, send, 422, NOT_UTF8 if _wide(body) else MESSAGE)
                    return
                repeated = repeated_keys(body) if pattern is _JSON_NUL else []
                if repeated:
                    errors = [{"field": path, "message": REPEATED_KEY} for path in repeated]
                    await self._refuse(scope, receive, send, 422, invalid_request_message(errors), errors)
                    return
                message = {"type": "http.request", "body": body, "more_body": False}
                break
            message = await receive()
        # What was read goes to the route as it came; a client that went away, as that.
        pending = [message]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)

    async def _upload(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        refusal = await self.caller_refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        limit_mb = scope["app"].state.settings.max_upload_mb
        limit = limit_mb * 1024 * 1024 + UPLOAD_FORM_BYTES
        too_large = f"the file is larger than the {limit_mb} MB upload limit"
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, 413, too_large)
            return
        size = 0
        stopped = False

        async def bounded() -> Message:
            nonlocal size, stopped
            message = await receive()
            size += len(message.get("body", b""))
            if size > limit:
                stopped = True
                raise _UploadTooLarge
            return message

        async def unless_stopped(message: Message) -> None:
            # The route's own answer to a body cut short (a 400, or a 500) is not the one to give.
            if not stopped:
                await send(message)

        try:
            await self.app(scope, bounded, unless_stopped)
        except _UploadTooLarge:
            pass
        if stopped:
            await self._refuse(scope, receive, send, 413, too_large)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status_code: int, message: str,
                      details: list[dict[str, str]] | None = None) -> None:
        response = await self.refuse(Request(scope), status_code, message, details)
        await response(scope, receive, send)

