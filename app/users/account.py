"""Your account: who you are here, your own password, and your API tokens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field

from app.auth.pages import HOME_BY_ROLE, safe_next
from app.auth.schemas import TokenSettings
from app.auth.service import IssuedToken, issue_api_token, list_api_tokens, log_in, revoke_own_token
from app.auth.throttle import Limits, TooManyFailures
from app.deps import PagePrincipal, SessionDep, client_address
from app.errors import BadInput, NotFound
from app.forms import FormInvalid, PageId, row_id, validate_form
from app.templating import render
from app.users import service
from app.users.schemas import PasswordChange

router = APIRouter(prefix="/account", include_in_schema=False)


class PasswordForm(BaseModel):
    current_password: str = Field(default="", max_length=1024)
    new_password: str = Field(default="", max_length=1024)
    repeat_password: str = Field(default="", max_length=1024)
    # Where a user whose password an admin chose was going when the login sent them here.
    next: str = Field(default="", max_length=2000)


class TokenForm(BaseModel):
    name: str = Field(default="", max_length=1024)
    expires_in_days: str = Field(default="", max_length=1024)
    access: str = Field(default="", max_length=1024)
    password: str = Field(default="", max_length=1024)


@router.get("")
def account_page(request: Request, login: PagePrincipal, session: SessionDep) -> Response:
    changed = request.query_params.get("password") == "changed"
    messages = [{"kind": "success", "text": PASSWORD_CHANGED}] if changed else []
    # Said in the tokens card, where the page opens: a banner at the top would be scrolled past.
    return _page(request, session, login, {}, messages, revoked=row_id(request.query_params.get("revoked", "")),
                 next_path=safe_next(request.query_params.get("next")))


PASSWORD_CHANGED = "Password changed. Your other browser sessions and API tokens have ended; this one stays."


@router.post("/password")
def change_password(
    request: Request, login: PagePrincipal, session: SessionDep, form: Annotated[PasswordForm, Form()]
) -> Response:
    next_path = safe_next(form.next)
    try:
        data = validate_form(PasswordChange, form.model_dump(exclude={"repeat_password", "next"}),
                             required=("current_password", "new_password"))
    except FormInvalid as exc:
        return _page(request, session, login, exc.errors, status_code=422, next_path=next_path)
    if form.repeat_password != form.new_password:
        return _page(request, session, login, {"repeat_password": "does not match the new password"}, status_code=422,
                     next_path=next_path)
    limits = Limits.from_settings(request.app.state.settings)
    was_given = login.user.must_change_password
    try:
        changed = service.change_own_password(session, login, data, client_address(request), limits)
    except BadInput as exc:
        return _page(request, session, login, {d["field"]: d["message"] for d in exc.details}, status_code=422,
                     next_path=next_path)
    except TooManyFailures as exc:
        response = _page(request, session, login, {"current_password": exc.message}, status_code=429,
                         next_path=next_path)
        response.headers.update(exc.headers)
        return response
    if not changed:
        # Answered, not raised: raising would roll back the failed attempt just counted.
        return _page(request, session, login, {"current_password": "is not your password"}, status_code=403,
                     next_path=next_path)
    if was_given:
        # On to what the login was for: the page that was closed to them until now.
        return RedirectResponse(next_path or HOME_BY_ROLE[login.user.role], status_code=303)
    return RedirectResponse("/account?password=changed", status_code=303)


@router.post("/tokens")
def create_token(
    request: Request, login: PagePrincipal, session: SessionDep, form: Annotated[TokenForm, Form()]
) -> Response:
    """A new token, shown on the page this once: only its digest is kept. It asks for the
    password, as the API does, checked and throttled as a login is: a session left open, which
    ends in hours, must not make itself access that lasts until revoked."""
    values = form.model_dump(exclude={"password"})
    try:
        if form.access not in ("", "full", "read"):
            # A typo must not quietly make a full token of one meant to read.
            raise FormInvalid({"access": "must be full or read"})
        data = validate_form(TokenSettings, {"name": form.name.strip(), "expires_in_days": form.expires_in_days.strip(),
                                             "read_only": form.access == "read"})
    except FormInvalid as exc:
        errors = {f"token_{field}": message for field, message in exc.errors.items()}
        return _page(request, session, login, errors, status_code=422, token_values=values)
    if not form.password:
        return _page(request, session, login, {"token_password": "needs a value"}, status_code=422, token_values=values)
    limits = Limits.from_settings(request.app.state.settings)
    try:
        confirmed = log_in(session, login.user.username, form.password, client_address(request), limits,
                           purpose="new API token")
    except TooManyFailures as exc:
        response = _page(request, session, login, {"token_password": exc.message}, status_code=429, token_values=values)
        response.headers.update(exc.headers)
        return response
    if confirmed is None:
        # Answered, not raised: raising would roll back the failed attempt just counted.
        return _page(request, session, login, {"token_password": "is not your password"}, status_code=403,
                     token_values=values)
    max_days = request.app.state.settings.token_max_days
    try:
        issued = issue_api_token(session, login.user, data.name, data.expires_in_days, by=login.user, max_days=max_days,
                                 read_only=data.read_only)
    except BadInput as exc:
        return _page(request, session, login, {"token_expires_in_days": exc.message}, status_code=422, token_values=values)
    return _page(request, session, login, {}, issued=issued, status_code=201)


@router.post("/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: PageId, login: PagePrincipal, session: SessionDep) -> Response:
    try:
        revoke_own_token(session, login.user, token_id, by=login.user)
    except NotFound:
        # Revoked already (a second click), or none of yours: said here, not on an error page.
        return _page(request, session, login, {}, [{"kind": "warning", "text": f"No token {token_id} of yours is "
                                                    "left to revoke: the list below is what is."}], status_code=404)
    return RedirectResponse(f"/account?revoked={token_id}#tokens", status_code=303)


def _page(request: Request, session: SessionDep, login: PagePrincipal, errors: dict[str, str],
          messages: list[dict[str, str]] | None = None, status_code: int = 200, *,
          issued: IssuedToken | None = None, token_values: dict[str, str] | None = None,
          revoked: int | None = None, next_path: str | None = None) -> Response:
    max_days = request.app.state.settings.token_max_days
    # One page, two forms: each says only what was wrong with its own.
    password_errors = {key: message for key, message in errors.items() if not key.startswith("token_")}
    return render(request, "auth/account.html", {
        "errors": errors, "password_errors": password_errors,
        "token_failed": len(password_errors) < len(errors), "messages": messages or [],
        "tokens": list_api_tokens(session, login.user),
        "issued": issued,
        "revoked": revoked,
        "token_values": token_values or {},
        "token_days": [(days, words) for days, words in TOKEN_DAYS if max_days is None or days <= max_days],
        "token_max_days": max_days,
        "next_path": next_path or "",
    }, status_code=status_code)


# The expiries the form offers; the API and CLI take any number of days up to ten years.
TOKEN_DAYS = ((30, "30 days"), (90, "90 days"), (365, "a year"))
