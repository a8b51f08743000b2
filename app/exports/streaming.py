"""A streamed export whose producer is closed however the response ends.

The export's chunks come from a generator that holds a database session of its own. Starlette
runs such a generator in threads, a chunk at a time, and when the client goes (a download
cancelled, a `curl -I`) it stops asking for chunks but never closes it: the session stayed open,
on SQLite in a transaction that held the write lock, and every write of every user waited on it
and failed until the server restarted.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class ClosingStreamingResponse(StreamingResponse):
    def __init__(self, chunks: Generator[bytes, None, None], **kwargs: Any) -> None:
        self._chunks = chunks
        super().__init__(chunks, **kwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: the request's own cancellation, when the client went, must not cut the
            # close short. In a thread, as the chunks were made: closing ends the session's
            # transaction, a database round trip. A chunk in the making was waited for (a
            # thread is never abandoned), so the generator is not running.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._chunks.close)
