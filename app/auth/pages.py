"""Login, logout and the front door."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.auth import service
from app.auth.security import new_token, same_token
from app.auth.throttle import Limits, TooManyFailures
from app.deps import SESSION_COOKIE, PageUser, SessionDep, client_address, session_use
from app.models import Role
from app.templating import render

router = APIRouter(include_in_schema=False)

LOGIN_CSRF_COOKIE = "stepwise_login_csrf"
HOME_BY_ROLE = {
    Role.labeler: "/label",
    Role.manager: "/manage/projects",
    Role.researcher: "/manage/projects",
    Role.admin: "/manage/projects",
}


def safe_next(next_path: str | None) -> str | None:
    # Only same-site paths: "//evil.example" and "https://…" would make the login an open
    # redirect. So would "/\evil.example" and "/<tab>/evil.example", which browsers read as
    # "//evil.example": they are refused here rather than left to the redirect's percent-encoding.
    if (next_path and next_path.startswith("/") and not next_path.startswith("//")
            and not any(char == "\\" or ord(char) < 0x20 or ord(char) == 0x7F for char in next_path)):
        return next_path
    return None


def _login_form(
    request: Request, next_path: str | None, error: str | None, status_code: int, username: str = "",
    *, ended: bool = False,
) -> Response:
    # Before login there is no session to hold a CSRF token: a cookie and a form field that
    # must match (double submit) stop other sites from logging a browser into our site.
    token = new_token()
    next_path = safe_next(next_path) or ""
    response = render(
        request,
        "auth/login.html",
        {"login_csrf": token, "next": next_path, "error": error, "username": username, "ended": ended},
        status_code=status_code,
        address="/login" + (f"?{urlencode({'next': next_path})}" if next_path else ""),
    )
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.app.state.settings.cookie_secure,
        max_age=3600,
    )
    return response


@router.get("/login")
def login_page(request: Request, next: str | None = None, ended: str | None = None) -> Response:
    # `ended`: the labeling page lost its session mid-task, and says so here (any value).
    return _login_form(request, next, None, 200, ended=ended is not None)


@router.post("/login")
def login(
    request: Request,
    session: SessionDep,
    username: Annotated[str, Form(max_length=64)],
    password: Annotated[str, Form(max_length=1024)],
    login_csrf: Annotated[str, Form(max_length=128)],
    next: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not cookie or not same_token(cookie, login_csrf):
        return _login_form(request, next, "The form expired. Please try again.", 403, username)
    settings = request.app.state.settings
    try:
        user = service.log_in(session, username, password, client_address(request), Limits.from_settings(settings),
                              purpose="browser login")
    except TooManyFailures as exc:
        refused = _login_form(request, next, f"{exc.message[:1].upper()}{exc.message[1:]}.", 429, username)
        refused.headers.update(exc.headers)
        return refused
    except service.AccountDeactivated:
        deactivated = "This account is deactivated: ask an administrator to reactivate it."
        return _login_form(request, next, deactivated, 403, username)
    if user is None:
        # The failure just counted is committed with this answer, which is returned, not raised.
        return _login_form(request, next, "Wrong username or password.", 401, username)
    login_ = service.start_browser_session(session, user, settings.session_hours, client_address(request),
                                           session_use(request).idle)
    target = safe_next(next) or HOME_BY_ROLE[user.role]
    if user.must_change_password:
        # Where they were going waits until the password is their own (app.users.account).
        target = f"/account?{urlencode({'next': target})}#password"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        login_.cookie_token,
        httponly=True,
        samesite="lax",
        secure=settings.cookie_secure,
        max_age=settings.session_hours * 3600,
    )
    response.delete_cookie(LOGIN_CSRF_COOKIE)
    return response


@router.post("/logout")
def logout(request: Request, _: PageUser, session: SessionDep) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        service.end_browser_session(session, cookie)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.get("/")
def home(user: PageUser) -> Response:
    return RedirectResponse(HOME_BY_ROLE[user.role], status_code=303)
