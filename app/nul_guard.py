"""Refuses a request body that holds a NUL character, before any route reads it.

PostgreSQL text cannot hold NUL and refuses it on write; SQLite stores it, and a project's own
export then failed to import back (the importer refuses NUL, as PostgreSQL would). One check at
the door makes both databases answer alike, for every JSON and form field at once, with JSON
columns included (a NUL escaped in a JSON document is text to SQLite, and PostgreSQL's jsonb
refuses it). Multipart bodies carry files, which the importer judges itself; their other fields
reach SQLite's own check (app.db).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# An escaped NUL, not an escaped backslash followed by "u0000": an even run of backslashes
# before it is backslashes.
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_FORM_NUL = re.compile(rb"%00")
MESSAGE = "the request holds a NUL character (\\u0000), which no field may contain"


def _pattern(content_type: bytes) -> re.Pattern[bytes] | None:
    kind = content_type.partition(b";")[0].strip().lower()
    if kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json")):
        return _JSON_NUL
    if kind == b"application/x-www-form-urlencoded":
        return _FORM_NUL
    return None


class NulGuard:
    def __init__(self, app: ASGIApp, refuse: Callable[[Request, int, str], Awaitable[Response]]) -> None:
        self.app = app
        # The app's error answer (JSON for the API, a page otherwise; the route's login and
        # role refusal first), given by app.main so that this module need not import it.
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pattern = None
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            # The first Content-Type, as the routes read it: a second one must not hide the body.
            pattern = _pattern(Headers(scope=scope).get("content-type", "").encode("latin-1"))
        if pattern is None:
            await self.app(scope, receive, send)
            return
        chunks = []
        message = await receive()
        while message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                body = b"".join(chunks)
                if b"\x00" in body or pattern.search(body):
                    response = await self.refuse(Request(scope), 422, MESSAGE)
                    await response(scope, receive, send)
                    return
                message = {"type": "http.request", "body": body, "more_body": False}
                break
            message = await receive()
        # What was read goes to the route as it came; a client that went away, as that.
        pending = [message]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)
