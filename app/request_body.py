"""What a request's body is said to be, and a JSON body whose objects name a key more than once.

JSON leaves a repeated key to the parser, and Python's keeps the last value: a project's
description sent twice stored the second unsaid, a submit that rated a step twice kept one
rating, where the API refuses anything else it cannot take as sent. FastAPI parses a route's
body itself, with Starlette's `json.loads`, and offers no hook into that parse but a route
class, which each router would have to name. So app.body_guard, which holds every JSON body
whole before the route, parses it once more with the same C parser and a hook that only
compares an object's keys with its pairs: tens of microseconds for a labeler's submit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

REPEATED_KEY = "is given more than once in its object: send each key once (a JSON parser keeps only one value)"


def media_type(headers: Mapping[str, str]) -> str:
    """The first Content-Type's media type, as FastAPI and Starlette read it; "" for none."""
    return headers.get("content-type", "").partition(";")[0].strip().lower()


def invalid_request_message(errors: list[dict[str, str]]) -> str:
    """A 422's sentence, naming the first few of its field errors."""
    return "invalid request: " + "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])


def is_json(kind: str) -> bool:
    """Whether FastAPI parses a body of this media type as JSON."""
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


class _Repeating(dict[str, Any]):
    """An object of the body that names the keys `repeated` more than once."""

    def __init__(self, pairs: list[tuple[str, Any]], repeated: list[str]) -> None:
        super().__init__(pairs)
        self.repeated = repeated


def repeated_keys(body: bytes) -> list[str]:
    """The field path of each key that an object of `body` names more than once, dotted as the
    API's field errors are (ratings.0.rating); none where the body is no JSON, which the
    route's own parse then refuses in its words."""
    made: list[_Repeating] = []

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        built = dict(pairs)
        if len(built) == len(pairs):
            return built
        counts = Counter(key for key, _ in pairs)
        made.append(_Repeating(pairs, [key for key, count in counts.items() if count > 1]))
        return made[-1]

    try:
        document = json.loads(body, object_pairs_hook=build)
    except (ValueError, RecursionError):
        return []
    return _paths(document, len(made)) if made else []


def _paths(document: Any, count: int) -> list[str]:
    """Where the `count` repeating objects are in the document, walked without recursion (it
    may nest as deep as the parser allows). One whose key was itself repeated is not in it:
    the walk then goes to the end."""
    found: list[str] = []
    left = count
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    while stack and left:
        path, node = stack.pop()
        if isinstance(node, _Repeating):
            found.extend(".".join(str(part) for part in (*path, key)) for key in node.repeated)
            left -= 1
        items = node.items() if isinstance(node, dict) else enumerate(node)
        # Reversed, so that the stack hands them back in the order the body has them.
        stack.extend(((*path, key), value) for key, value in reversed(list(items))
                     if isinstance(value, (dict, list)))
    return found
