"""The FastAPI application: routers, pages, static files, error handling."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.routing import iter_route_contexts
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import api_docs
from app.audit import endpoints as audit_api
from app.audit import pages as audit_pages
from app.auth import endpoints as auth_api
from app.browse import endpoints as browse_api
from app.auth import pages as auth_pages
from app.body_guard import TOO_LARGE, BodyGuard
from app.config import Settings, get_settings
from app.browse import pages as browse_pages
from app.db import create_db_engine, create_session_factory
from app.deps import LoginRequired, access_refusal, visitor
from app.errors import ServiceError, field_error
from app.exports import endpoints as exports_api
from app.exports import pages as exports_pages
from app.figures import endpoints as figures_api
from app.imports import UPLOAD_PATHS
from app.imports import endpoints as imports_api
from app.imports import pages as imports_pages
from app.labeling import endpoints as labeling_api
from app.labeling import pages as labeling_pages
from app.ops import endpoints as ops_endpoints
from app.ops.logs import REQUEST_ID
from app.ops.middleware import HttpMiddleware, RequestObserver
from app.ops.service import SchemaProblem, schema_reason
from app.projects import endpoints as projects_api
from app.projects import pages as projects_pages
from app.reports import endpoints as reports_api
from app.reports import pages as reports_pages
from app.rounds import endpoints as rounds_api
from app.rounds import pages as rounds_pages
from app.request_body import invalid_request_message, is_json, media_type
from app.rounds.worker import start_local_worker
from app.templating import render
from app.users import account as account_pages
from app.users import endpoints as users_api
from app.users import pages as users_pages
from labeler_ui import STATIC_DIR

# KaTeX sets inline styles on the math it renders; nothing else needs more than 'self'.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
API_PREFIX = "/api/v1"


logger = logging.getLogger(__name__)
# bench/faults.py: PostgreSQL back 0.5-2.5 s after `pg_ctl restart -m fast` began, on a busy 2-core machine.
DATABASE_RETRY_AFTER_S = 2

# Starlette's words for a multipart Content-Type written by hand, without the boundary that
# separates the parts.
NO_BOUNDARY = "Missing boundary in multipart."

# SQLSTATEs of a value the database cannot store or compare: too long, out of range, a
# character the encoding lacks.
INPUT_DATA_ERRORS = frozenset({"22001", "22003", "22021", "22P05"})


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        round_worker = start_local_worker(settings, app.state.session_factory)
        yield
        if round_worker is not None:
            round_worker.stop()
        app.state.engine.dispose()

    app = FastAPI(
        title="Stepwise",
        version="0.1.0",
        description="Step-level human feedback on math solutions, and the PRM trained on it.",
        lifespan=lifespan,
        openapi_url=api_docs.OPENAPI_PATH,
        # Served by app.api_docs instead: FastAPI's page needs a CDN and an inline script.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = create_db_engine(settings)
    app.state.session_factory = create_session_factory(app.state.engine)
    app.state.hot_path_limiter = anyio.CapacityLimiter(settings.labeling_concurrency)
    app.state.scoring_turns = threading.BoundedSemaphore(settings.scoring_queue)

    for router in (
        auth_api.router,
        auth_api.everyone_router,
        users_api.router,
        projects_api.router,
        labeling_api.router,
        imports_api.router,
        exports_api.router,
        rounds_api.router,
        figures_api.router,
        reports_api.router,
        browse_api.router,
        audit_api.router,
        auth_pages.router,
        labeling_pages.router,
        projects_pages.router,
        imports_pages.router,
        exports_pages.router,
        users_pages.router,
        audit_pages.router,
        account_pages.router,
        rounds_pages.router,
        reports_pages.router,
        browse_pages.router,
        browse_pages.problems_router,
        ops_endpoints.router,
    ):
        app.include_router(router)
    api_docs.install(app)
    _document_body_limit(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    _install_error_handlers(app)

    app.add_middleware(NoContentUntyped)
    app.add_middleware(HeadAsGet, routes=app.routes)
    app.add_middleware(UnhandledErrors)
    app.add_middleware(BodyGuard, refuse=_body_refusal, caller_refusal=_caller_refusal, uploads=UPLOAD_PATHS)
    app.add_middleware(SecurityHeaders)
    # Outermost, so that its timing and status include every other layer.
    app.add_middleware(RequestObserver)
    return app


class SecurityHeaders(HttpMiddleware):
    """Adds the security headers to every response that does not set its own."""

    headers = (
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
    )

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The API answers one caller with what their token may read (their labels, an export,
        # their account): a shared proxy or the browser's disk cache must not keep a copy for the
        # next person. Not the schema, which is the same for everyone and holds nobody's data. A
        # route that may be cached says so itself (a figure's drawing); an ETag still serves
        # If-Match.
        path = scope["path"]
        api = (path == API_PREFIX or path.startswith(f"{API_PREFIX}/")) and path != api_docs.OPENAPI_PATH

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = {name.lower(): value for name, value in message.get("headers", ())}
                missing = [(n, v) for n, v in self.headers if n not in given]
                html = given.get(b"content-type", b"").startswith(b"text/html")
                if (html or api) and b"cache-control" not in given:
                    # A page holds one person's state (a task under lease, a label that may have
                    # been corrected since): Back shows it fetched anew, not a copy whose forms
                    # would only fail on submit.
                    missing.append((b"cache-control", b"no-store"))
                if missing:
                    message = {**message, "headers": [*message.get("headers", ()), *missing]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet(HttpMiddleware):
    """HEAD answered as GET without the body, as HTTP has it: FastAPI routes a GET route's GET
    alone, and monitors that check /healthz with HEAD read its 405 as the service down. A route
    that answers HEAD itself (the export, which then builds nothing) is handed it as it came."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        super().__init__(app)
        self.routes = routes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "HEAD" or "HEAD" in _route_methods(self.routes, scope["path"]):
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        as_get = {**scope, "method": "GET"}
        try:
            await self.app(as_get, receive, send_without_body)
        finally:
            # For the metrics and the access log outside, which read the route matched off the
            # scope they were given: without it a HEAD counted as a path nothing matched.
            if "route" in as_get:
                scope["route"] = as_get["route"]


class NoContentUntyped(HttpMiddleware):
    """A 204 without Content-Type: it has no body to be of a type. FastAPI makes a route's 204
    with the route's response class, JSONResponse, which names its type whatever the body."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_untyped(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 204:
                headers = [(n, v) for n, v in message.get("headers", ()) if n.lower() != b"content-type"]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_untyped)


class UnhandledErrors(HttpMiddleware):
    """A request that fails on a bug is answered as every other error is, with the request id
    to quote, after its traceback is logged; inside the other middleware, so that the answer
    carries the request id and security headers too (the server's last-resort answer, plain
    text, carried neither)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_noting_start(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_noting_start)
        except Exception:
            if started:
                raise
            logger.exception("unhandled error")
            request = Request(scope)
            message = (f"the server failed on this request (a bug, logged): quote request id "
                       f"{REQUEST_ID.get()} when you report it")
            try:
                response = _error_response(request, 500, message)
            except Exception:
                # The error page itself could not be made (its menu needs the database, say).
                response = JSONResponse({"detail": message}, status_code=500)
            await response(scope, receive, send)


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _error_response(  # type: ignore[no-untyped-def]
    request: Request, status_code: int, message: str, details=None, headers=None, *, without_query: bool = False
) -> Response:
    """The API's JSON error, or the error page, which may offer the same page `without_query`."""
    if _wants_json(request):
        body = {"detail": message}
        if details is not None:
            body["errors"] = details
        return JSONResponse(body, status_code=status_code, headers=headers)
    response = render(
        request,
        "error.html",
        {"status_code": status_code, "message": message, "details": details,
         "plain_path": request.url.path if without_query else None},
        status_code=status_code,
    )
    if headers:
        response.headers.update(headers)
    return response


def _service_error_response(request: Request, exc: ServiceError) -> Response:
    headers = dict(exc.headers or {})
    if exc.status_code == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return _error_response(request, exc.status_code, exc.message, exc.details, headers or None)


def _login_redirect(exc: LoginRequired) -> Response:
    return RedirectResponse(exc.location, status_code=303)


async def _body_refusal(  # type: ignore[no-untyped-def]
    request: Request, status_code: int, message: str, details=None, headers=None
) -> Response:
    """The answer to a body refused before the route's login and role checks ran: theirs, where
    they would turn the caller away."""
    refusal = await _caller_refusal(request)
    return refusal or _error_response(request, status_code, message, details, headers)


async def _caller_refusal(request: Request) -> Response | None:
    """The answer of the route's login and role checks, asked before they run, where they would
    turn the caller away."""
    try:
        refusal = await anyio.to_thread.run_sync(access_refusal, request)
    except SQLAlchemyError:
        # The database cannot say who is calling (down, say): the route will answer itself.
        refusal = None
    if isinstance(refusal, LoginRequired):
        return _login_redirect(refusal)
    if refusal is not None:
        return _service_error_response(request, refusal)
    return None


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> Response:
        return _service_error_response(request, exc)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        return _login_redirect(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        if not _wants_json(request) and all(err.get("loc", ("",))[0] == "path" for err in exc.errors()):
            # A page's address with no such id in it (/label/abc) names nothing, as any other
            # address that names nothing: the JSON API says which part is wrong.
            return await http_error(request, StarletteHTTPException(404))
        errors = [_field_error(err, media_type(request.headers)) for err in exc.errors()]
        if _wants_json(request) or any(err.get("type") == "json_invalid" for err in exc.errors()):
            # FastAPI parses the body before any dependency runs, and the rest of the request
            # after dependencies that may not have made the route's own checks (the labeling
            # routes read only the credentials there, and ask the rest in their transaction).
            return await _body_refusal(request, 422, invalid_request_message(errors), errors)
        # A page lists each part once, by its name in the address or the form.
        in_query = request.method == "GET" and all(err.get("loc", ("",))[0] in ("query", "path") for err in exc.errors())
        named = [{**e, "field": e["field"].removeprefix("query.").removeprefix("path.").removeprefix("body.")}
                 for e in errors]
        said = ("The address asks for something this page cannot show:" if in_query
                else "The form sent something this page cannot take:")
        return _error_response(request, 422, said, named, without_query=in_query)

    @app.exception_handler(IntegrityError)
    async def conflicting_write(request: Request, exc: IntegrityError) -> Response:
        # Services check for duplicates first; this answers the race where two requests pass
        # that check at once and the database's unique constraint decides.
        return _error_response(
            request, 409, "this conflicts with data written at the same moment: reload and retry"
        )

    @app.exception_handler(DataError)
    async def unstorable_value(request: Request, exc: DataError) -> Response:
        # A value sent that the database cannot hold or compare is bad input like any other,
        # and the transaction has been rolled back. Any other data error is our bug: a 500.
        sqlstate = getattr(exc.orig, "sqlstate", None)
        message = str(exc.orig).strip()
        # psycopg refuses a NUL in text itself, before the server sees it: no SQLSTATE.
        if sqlstate not in INPUT_DATA_ERRORS and not (sqlstate is None and "NUL" in message):
            raise exc
        reason = message.splitlines()[0] if message else "invalid value"
        logger.info("refused a value the database cannot take: %s", reason)
        if not _wants_json(request):
            # The rollback expired the visitor's rows, and their session is closed: the page's
            # menu looks them up afresh.
            request.state.principal = await anyio.to_thread.run_sync(visitor, request)
        return _error_response(request, 422, f"a value the database cannot take: {reason}")

    @app.exception_handler(OperationalError)
    @app.exception_handler(ProgrammingError)
    async def database_unavailable(request: Request, exc: OperationalError | ProgrammingError) -> Response:
        # The database restarting, failing over or out of reach: not the request's fault, and
        # over in seconds. A 503 is what clients retry (the labeler page does, with the same
        # idempotency key); a 500 told the page the label had failed for good. A database
        # without the schema, or behind the code's migrations, fails the same way (SQLite's "no
        # such table" is an OperationalError, PostgreSQL's a ProgrammingError), but retrying
        # cannot help: the answer says what to run, as /readyz does.
        unready = (await anyio.to_thread.run_sync(_schema_reason, request.app.state.engine)
                   if _missing_schema(exc) else None)
        if unready is not None:
            logger.error("database not ready: %s", unready)
            said = str(unready) if ops_endpoints.may_read_ops(request) else unready.public
            return _error_response(request, 503, said)
        if isinstance(exc, ProgrammingError):
            raise exc
        reason = str(exc.orig).strip().splitlines()
        logger.warning("database unavailable: %s", reason[0] if reason else type(exc.orig).__name__)
        return _error_response(
            request,
            503,
            "the database is not available at the moment: retry in a few seconds",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"there is nothing at {request.url.path}"
        if not _wants_json(request) and getattr(request.state, "principal", None) is None:
            # An address no route matched never ran the login dependency: look the visitor up,
            # so that the error page keeps their menu instead of offering a login they have
            # (none while the database cannot say).
            try:
                request.state.principal = await anyio.to_thread.run_sync(visitor, request)
            except SQLAlchemyError:
                request.state.principal = None
        headers = exc.headers
        allowed = _allowed_methods(request) if exc.status_code == 405 else ""
        if allowed:
            headers = {**(headers or {}), "Allow": allowed}
        if exc.status_code == 405:
            message = _not_allowed(request.method, (headers or {}).get("Allow", ""))
        elif exc.status_code == 400 and message == NO_BOUNDARY:
            message = ("the Content-Type multipart/form-data names no boundary between the parts: let the HTTP "
                       "client write that header as it builds the multipart body (curl -F, requests' files=), "
                       "rather than setting it by hand")
            return await _body_refusal(request, exc.status_code, message, headers=headers)
        elif exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError) and \
                is_json(media_type(request.headers)):
            # FastAPI's answer to a JSON body Python could not decode, in the words of the
            # other encodings' refusal (app.body_guard).
            message = f"the body is not valid UTF-8 (byte {exc.__cause__.start}): send JSON encoded as UTF-8"
            return await _body_refusal(request, 422, message, [{"field": "body", "message": message}], headers)
        elif exc.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's answer to a body its parser gave up on for other reasons than a syntax
            # error: Python's limits on integer digits and on nesting.
            message = ("the request body could not be read: it is not valid JSON or form data, or it holds "
                       "a number of over 4,300 digits or nesting over a thousand levels deep")
            return await _body_refusal(request, exc.status_code, message, headers=headers)
        return _error_response(request, exc.status_code, message, headers=headers)


def _document_body_limit(app: FastAPI) -> None:
    """Lists app.body_guard's 413 in the schema of each operation that takes a body: the guard
    answers it for all of them, before any route runs. An upload's own, larger limit is named
    by its route and kept."""
    documented = app.openapi

    def openapi() -> dict[str, Any]:
        first = app.openapi_schema is None
        schema = documented()
        if first:
            too_large = {"description": TOO_LARGE,
                         "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
            for operations in schema["paths"].values():
                for operation in operations.values():
                    if "requestBody" in operation:
                        operation["responses"].setdefault("413", too_large)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# PostgreSQL's undefined_table and undefined_column.
MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703"})


def _missing_schema(exc: OperationalError | ProgrammingError) -> bool:
    """Whether the error is a table or column the database lacks: only then is the schema asked
    about (a lock timeout or an outage would make the question wait as long again)."""
    if getattr(exc.orig, "sqlstate", None) in MISSING_SCHEMA_SQLSTATES:
        return True
    return str(exc.orig).startswith(("no such table", "no such column"))


def _schema_reason(engine: Engine) -> SchemaProblem | None:
    """What to run before the database can serve this code; None where the schema is not the
    problem, the database being out of reach included."""
    try:
        return schema_reason(engine)
    except SQLAlchemyError:
        return None


def _field_error(error: dict[str, Any], content_type: str) -> dict[str, str]:
    location = error.get("loc", ())
    if error.get("type") == "json_invalid":
        # Its location is ("body", offset): the offset is no field.
        offset = location[-1] if location else 0
        reason = error.get("ctx", {}).get("error", "invalid")
        return {"field": "body", "message": f"not valid JSON at character {offset}: {reason}"}
    # A body sent without a type is there all the same: only one left out is missing.
    sent = content_type or error.get("type") != "missing"
    if tuple(location) == ("body",) and sent and not is_json(content_type):
        # FastAPI reads a body JSON only under these types, and another, or one without a type,
        # as one string or a form it then calls no object, though the text may be one: the
        # header is what is wrong.
        said = f", not {content_type}" if content_type else " (the request had no Content-Type)"
        return {"field": "body", "message": f"send the body as JSON, with Content-Type: application/json{said}"}
    return field_error(error, whole="body")


def _not_allowed(method: str, allow: str) -> str:
    """A 405's sentence, naming the methods of its Allow header."""
    methods = [name.strip() for name in allow.split(",") if name.strip()]
    if not methods:
        return f"{method} is not allowed here"
    listed = f"{', '.join(methods[:-1])} or {methods[-1]}" if len(methods) > 1 else methods[0]
    return f"{method} is not allowed here: use {listed}"


def _allowed_methods(request: Request) -> str:
    """What a 405's Allow header must list: every method of every route at the address.
    Starlette's names only the first route that matched the path, and here one address is
    often served by several routes (GET and POST of /api/v1/projects, say)."""
    return ", ".join(sorted(_route_methods(request.app.routes, request.scope["path"])))


def _route_methods(routes: list[BaseRoute], path: str) -> set[str]:
    """The methods that the routes at `path` declare."""
    methods: set[str] = set()
    # iter_route_contexts: FastAPI keeps included routers nested in app.routes.
    for route in iter_route_contexts(routes):
        pattern = getattr(route, "path_regex", None)
        if pattern is not None and route.methods and pattern.match(path):
            methods |= route.methods
    return methods
