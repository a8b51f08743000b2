"""Every endpoint the app serves, however its routers are nested, with a way to call it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str

    @property
    def is_api(self) -> bool:
        return self.path.startswith("/api/")

    def url(self, ids: dict[str, int]) -> str:
        """The path with each {param} filled from `ids` (1 where none is given)."""
        return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: str(ids.get(m.group(1), 1)), self.path)


def endpoints(app: FastAPI) -> list[Endpoint]:
    # Since FastAPI 0.137 `app.routes` holds included routers unflattened; iterating it
    # directly would find almost nothing and let every check below pass vacuously.
    found = {
        Endpoint(method, context.path)
        for context in iter_route_contexts(app.routes)
        if isinstance(context.original_route, APIRoute)
        for method in context.methods or ()
        if method != "HEAD"
    }
    assert len(found) > 20, "the route table looks empty: did FastAPI change its routing?"
    return sorted(found, key=lambda e: (e.path, e.method))
