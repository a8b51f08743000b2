"""Request dependencies: the database session, who is calling, and what they may do."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, Path, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BeforeValidator
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.auth.security import same_token
from app.auth.service import (
    Caller,
    Principal,
    SessionUse,
    caller_from_bearer,
    caller_from_cookie,
    principal_from_bearer,
    principal_from_cookie,
)
from app.db import get_session, session_scope
from app.errors import Forbidden, ServiceError
from app.models import INT32_MAX, Role, User


def _digits_only(value: object) -> object:
    # pydantic reads " 1", "+1" and "１" as 1: an address with those named row 1 (a DELETE too).
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in the digits 0-9")
    return value


# A row id in a path. The bounds turn a number no id column can hold into a 422, not a 500.
RowId = Annotated[int, Path(ge=1, le=INT32_MAX), BeforeValidator(_digits_only)]

SESSION_COOKIE = "stepwise_session"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
NOT_LOGGED_IN = "log in or send 'Authorization: Bearer <token>'"
UNKNOWN_TOKEN = "unknown, revoked or expired API token"

# scope="function": the session commits when the endpoint returns, before the response is
# sent, so an acknowledged submit is a committed one.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


class NotAuthenticated(ServiceError):
    status_code = 401


class LoginRequired(Exception):
    """Raised for pages; app.main answers with a redirect to `location`, the login page."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path
        self.location = f"/login?next={quote(next_path)}"


class OwnPasswordRequired(LoginRequired):
    """A page asked by a user whose password an admin chose: they are sent to choose their own,
    then on to `next_path`."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.location = f"/account?next={quote(next_path)}#password"


def return_path(request: Request) -> str:
    """Where a login, or a password of one's own, sends the user on to: the page asked for, or for
    a form's post (its address often answers POST alone) the page the form was on, which our
    pages' Referrer-Policy (same-origin) lets the browser say."""
    referer = urlsplit(request.headers.get("referer", ""))
    if request.method in UNSAFE_METHODS and referer.netloc == request.url.netloc and referer.path.startswith("/"):
        return referer.path
    return request.url.path


class PasswordNotChosen(ServiceError):
    status_code = 403


# What a login whose password an admin chose may do (see User.must_change_password): choose
# its own, log out, and look after its tokens. An API-only user trades the given password for a
# token and changes it with that token, which stays.
OPEN_BEFORE_OWN_PASSWORD = frozenset({"/account", "/account/password", "/logout", "/api/v1/users/me",
                                      "/api/v1/users/me/password"})
TOKENS_PATH = "/api/v1/auth/tokens"
PASSWORD_NOT_CHOSEN = ("an administrator chose your password: choose your own before anything else, with POST "
                       "/api/v1/users/me/password (or under Your account, /account, in the browser)")


READ_ONLY_TOKEN = ("this API token is read-only: it makes GET requests and scoring only; make a full one for "
                   "changes")
# The requests other than GET a read-only token may make: ending itself (a script done with it
# should not have to keep it), and scoring, a read that needs a body (a reranking service should
# hold a token that, leaked, changes nothing).
READ_ONLY_ALSO_MAY = re.compile(r"/api/v1/auth/tokens/current|/api/v1/model-versions/\d+/score")


class CsrfFailed(ServiceError):
    status_code = 403


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a request says about its caller, read without the database."""

    bearer: str | None
    cookie: str | None
    csrf_sent: str
    unsafe: bool
    session_use: SessionUse
    path: str


# Sent by a page's requests made on its own, which do not keep an unused session going.
UNATTENDED_HEADER = "X-Stepwise-Unattended"


def session_use(request: Request) -> SessionUse:
    minutes = request.app.state.settings.session_idle_minutes
    return SessionUse(idle=timedelta(minutes=minutes) if minutes else None,
                      attended=request.headers.get(UNATTENDED_HEADER) != "1")


def client_address(request: Request) -> str | None:
    """The caller's address: the proxy's X-Forwarded-For where `stepwise serve` trusts it
    (uvicorn's proxy headers), else the connection's."""
    return request.client.host if request.client else None


def credentials(request: Request) -> Credentials:
    header = request.headers.get("authorization")
    bearer = None
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("Authorization header must be 'Bearer <token>'")
        bearer = token.strip()
    return Credentials(
        bearer=bearer,
        cookie=request.cookies.get(SESSION_COOKIE),
        csrf_sent=request.headers.get(CSRF_HEADER, ""),
        unsafe=request.method in UNSAFE_METHODS,
        session_use=session_use(request),
        # The path routing matched, not one rebuilt with the Host header.
        path=request.scope["path"],
    )


async def api_credentials(request: Request) -> Credentials:
    """The caller's credentials for `api_caller`. async: a plain def would cost a thread hop
    for reading two headers. A request with none is refused here, before its body is judged,
    as ApiUser refuses it."""
    given = credentials(request)
    if given.bearer is None and given.cookie is None:
        raise NotAuthenticated(NOT_LOGGED_IN)
    return given


ApiCredentials = Annotated[Credentials, Depends(api_credentials)]


def _login_refusal(given: Credentials, *, read_only: bool, must_change_password: bool) -> ServiceError | None:
    """What a login that is who it says may still not do here: change anything with a read-only
    token, or anything but choose a password of its own while an admin's stands (see
    User.must_change_password). The one rule for the API, the hot path and the pages."""
    if read_only and given.unsafe and not READ_ONLY_ALSO_MAY.fullmatch(given.path):
        return Forbidden(READ_ONLY_TOKEN)
    open_ = given.path in OPEN_BEFORE_OWN_PASSWORD or given.path == TOKENS_PATH or \
        given.path.startswith(TOKENS_PATH + "/")
    if must_change_password and not open_:
        return PasswordNotChosen(PASSWORD_NOT_CHOSEN)
    return None


def _refusal_of(given: Credentials, principal: Principal) -> ServiceError | None:
    return _login_refusal(given, read_only=principal.read_only,
                         must_change_password=principal.user.must_change_password)


def _principal(session: Session, given: Credentials) -> Principal | None:
    if given.bearer is not None:
        principal = principal_from_bearer(session, given.bearer)
        if principal is None:
            raise NotAuthenticated(UNKNOWN_TOKEN)
        return principal
    if given.cookie:
        return principal_from_cookie(session, given.cookie, given.session_use)
    return None


def _check_csrf(given: Credentials, csrf_token: str | None) -> None:
    """Cookies ride along on cross-site requests; for a cookie login's unsafe request, a header
    a foreign page cannot set is the proof that our own page sent it."""
    if csrf_token is not None and given.unsafe:
        if not given.csrf_sent or not same_token(given.csrf_sent, csrf_token):
            raise CsrfFailed(f"missing or wrong {CSRF_HEADER} header")


def api_principal(request: Request, session: SessionDep) -> Principal:
    given = credentials(request)
    principal = _principal(session, given)
    if principal is None:
        raise NotAuthenticated(NOT_LOGGED_IN)
    _check_csrf(given, principal.session.csrf_token if principal.session else None)
    refusal = _refusal_of(given, principal)
    if refusal is not None:
        raise refusal
    request.state.principal = principal
    return principal


def api_caller(session: Session, given: Credentials, *, lock_user: bool = False) -> Caller:
    """The API caller, checked as ApiUser checks it (any role), for an endpoint that does its
    database work in one call of `in_transaction`. With `lock_user`, the user's row stays
    locked until the transaction ends."""
    if given.bearer is not None:
        caller = caller_from_bearer(session, given.bearer, lock_user=lock_user)
        missing = UNKNOWN_TOKEN
    else:
        caller = caller_from_cookie(session, given.cookie, given.session_use, lock_user=lock_user) if given.cookie else None
        missing = NOT_LOGGED_IN
    if caller is None:
        raise NotAuthenticated(missing)
    _check_csrf(given, caller.csrf_token)
    refusal = _login_refusal(given, read_only=caller.read_only, must_change_password=caller.must_change_password)
    if refusal is not None:
        raise refusal
    return caller


async def _page_csrf_sent(request: Request) -> str | StarletteHTTPException:
    """The CSRF token a page's unsafe request sent, in its form or the header; "" for none. Read
    apart from page_principal because the form is awaited, and page_principal must not be. A
    body that cannot be read is handed on, for page_principal to raise after the login check:
    a visitor who is not logged in is sent to log in first."""
    if request.method not in UNSAFE_METHODS:
        return ""
    try:
        form = await request.form()
    except StarletteHTTPException as unreadable:
        return unreadable
    sent = form.get("csrf_token") or request.headers.get(CSRF_HEADER, "")
    return sent if isinstance(sent, str) else ""


def page_principal(request: Request, session: SessionDep,
                   csrf_sent: Annotated[str | StarletteHTTPException, Depends(_page_csrf_sent)]) -> Principal:
    # A plain def, so that FastAPI runs the login's query in a worker thread. Run on the event
    # loop, a query waiting on SQLite's write lock stopped the whole server, the lock's holder
    # included, whose commit waits for the loop: every request stood still until SQLite's
    # 30-second busy timeout, and two browser tabs and a poll were enough.
    given = credentials(request)
    principal = _principal(session, given)
    if principal is None or principal.session is None:
        raise LoginRequired(return_path(request))
    if isinstance(csrf_sent, StarletteHTTPException):
        raise csrf_sent
    if given.unsafe and (not csrf_sent or not same_token(csrf_sent, principal.session.csrf_token)):
        raise CsrfFailed("the form is stale or was not sent by this site: reload and retry")
    if _refusal_of(given, principal) is not None:
        raise OwnPasswordRequired(return_path(request))
    request.state.principal = principal
    return principal


def has_role(user: User, roles: tuple[Role, ...]) -> bool:
    """Whether the user may act as one of `roles` (no roles: any user). Admins may do all;
    pages ask it to show or hide what a role may change."""
    return not roles or user.role in roles or user.role == Role.admin


def _role_refusal(user: User, roles: tuple[Role, ...]) -> Forbidden | None:
    if has_role(user, roles):
        return None
    # Admins may do all, so they are named too.
    named = ", ".join(r.value for r in roles if r != Role.admin)
    allowed = f"{named} or admin" if named else "admin"
    return Forbidden(f"this needs the role {allowed}; you are {user.role.value}")


def _user_with_role(source: Callable[..., object], roles: tuple[Role, ...]):  # type: ignore[no-untyped-def]
    # A default rather than Annotated: `source` is a closure variable, which postponed
    # annotations could not resolve.
    # async although it awaits nothing: FastAPI runs a plain def in the threadpool, and a thread
    # hop for a comparison of two enums is most of what this check would cost.
    async def dependency(principal: Principal = Depends(source)) -> User:
        refusal = _role_refusal(principal.user, roles)
        if refusal is not None:
            raise refusal
        return principal.user

    # Read by access_refusal, which asks these checks of a request whose body stopped it first.
    dependency.login_source = source  # type: ignore[attr-defined]
    dependency.roles = roles  # type: ignore[attr-defined]
    return dependency


def api_user(*roles: Role):  # type: ignore[no-untyped-def]
    return Depends(_user_with_role(api_principal, roles))


def page_user(*roles: Role):  # type: ignore[no-untyped-def]
    return Depends(_user_with_role(page_principal, roles))


MANAGE = (Role.manager,)
# Starting, cancelling and tuning rounds is the researchers' call (admins may too); managers and
# researchers may both look (READ_DATA).
RESEARCH = (Role.researcher,)
READ_DATA = (Role.manager, Role.researcher)

# The caller's login itself, for a change that must leave it standing (app.users.service).
ApiPrincipal = Annotated[Principal, Depends(api_principal)]
PagePrincipal = Annotated[Principal, Depends(page_principal)]
ApiUser = Annotated[User, api_user()]
ManagerApiUser = Annotated[User, api_user(*MANAGE)]
ResearcherApiUser = Annotated[User, api_user(*RESEARCH)]
DataApiUser = Annotated[User, api_user(*READ_DATA)]
AdminApiUser = Annotated[User, api_user(Role.admin)]
PageUser = Annotated[User, page_user()]
ManagerPageUser = Annotated[User, page_user(*MANAGE)]
ResearcherPageUser = Annotated[User, page_user(*RESEARCH)]
DataPageUser = Annotated[User, page_user(*READ_DATA)]
AdminPageUser = Annotated[User, page_user(Role.admin)]


def _login_needed(dependant: Dependant) -> tuple[Callable[..., object], tuple[Role, ...]] | None:
    """The login check a route's dependencies make (api_credentials, api_principal or
    page_principal) and the roles it then asks; None for a route anyone may use."""
    for dependency in dependant.dependencies:
        call = dependency.call
        if call in (api_credentials, api_principal, page_principal):
            return call, ()
        if hasattr(call, "roles"):
            return call.login_source, call.roles  # type: ignore[union-attr]
        found = _login_needed(dependency)
        if found is not None:
            return found
    return None


def _route(request: Request) -> APIRoute | None:
    route = request.scope.get("route")
    if route is None and "app" in request.scope:
        # Asked from a middleware, before routing. iter_route_contexts: FastAPI keeps included
        # routers nested in app.routes.
        path, method = request.scope["path"], request.scope["method"]
        for context in iter_route_contexts(request.app.routes):
            pattern = getattr(context, "path_regex", None)
            if pattern is not None and method in (context.methods or ()) and pattern.match(path):
                route = context.original_route
                break
    return route if isinstance(route, APIRoute) else None


def access_refusal(request: Request) -> ServiceError | LoginRequired | None:
    """What the route's login and role checks would answer this request, for one refused before
    they ran (a body FastAPI could not parse, or one holding a NUL): a caller the route turns
    away hears that, as for any other body, rather than what is wrong with a body it may not
    send at all. None where they would let it through, or the route asks no login. CSRF is not
    asked: the route does not run, so nothing changes either way."""
    route = _route(request)
    needed = _login_needed(route.dependant) if route is not None else None
    if needed is None:
        return None
    source, roles = needed
    try:
        given = credentials(request)
        with session_scope(request.app.state.session_factory) as session:
            principal = _principal(session, given)
            if source is page_principal and (principal is None or principal.session is None):
                return LoginRequired(return_path(request))
            if principal is None:
                raise NotAuthenticated(NOT_LOGGED_IN)
            refusal = _refusal_of(given, principal)
            if refusal is not None:
                return OwnPasswordRequired(return_path(request)) if source is page_principal else refusal
            request.state.principal = principal
            return _role_refusal(principal.user, roles)
    except ServiceError as refusal:
        return refusal


def visitor(request: Request) -> Principal | None:
    """Who is logged in on a route that asks no login (an error page, the API docs), for the
    menu and the CSRF token their pages carry; None for nobody."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    with session_scope(request.app.state.session_factory) as session:
        return principal_from_cookie(session, cookie, session_use(request))
