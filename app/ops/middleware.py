"""Per request: its id, its metrics, and its access-log event.

Plain ASGI, like app.main.SecurityHeaders: BaseHTTPMiddleware would cost every request an extra
task and stream.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import inspect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.ops import logs
from app.ops.metrics import REQUEST_SECONDS, REQUESTS

access = logging.getLogger(logs.ACCESS_LOGGER)

REQUEST_ID_HEADER = b"x-request-id"


def route_of(scope: Scope) -> str:
    """The route template that matched (`/api/v1/projects/{project_id}`), never the path sent:
    paths hold ids and names, and a label per path would grow without end."""
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    if scope["path"].startswith("/static/"):
        return "/static"
    return "unmatched"


def _user_id(scope: Scope) -> int | None:
    state = scope.get("state") or {}
    principal = state.get("principal")
    if principal is not None:
        # The identity the ORM keeps, not `user.id`: a request whose transaction was rolled back
        # leaves the user expired and detached, and reading `id` would try to reload it.
        identity = inspect(principal.user).identity
        return int(identity[0]) if identity else None
    return state.get("user_id")


class HttpMiddleware:
    """Plain ASGI middleware that handles HTTP requests and passes anything else (lifespan)
    through. Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware
    runs each request through an extra task and stream, a tenth of the server's time on a
    next-task call."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class RequestObserver(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming = dict(scope["headers"]).get(REQUEST_ID_HEADER)
        request_id = logs.request_id(incoming.decode("latin-1") if incoming else None)
        # Not reset afterwards: uvicorn logs an unhandled error after this returns, in the same
        # task, and that record should name the request too. Each request has a task of its own.
        logs.REQUEST_ID.set(request_id)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route, method = route_of(scope), scope["method"]
            logs.ROUTE.set(route)
            logs.USER_ID.set(_user_id(scope))
            REQUESTS.labels(method, route, str(status)).inc()
            REQUEST_SECONDS.labels(method, route).observe(elapsed)
            if access.isEnabledFor(logging.INFO):
                access.info(
                    "%s %s %d",
                    method,
                    route,
                    status,
                    extra={"method": method, "status": status, "duration_ms": round(elapsed * 1000, 1)},
                )
