"""Your account: who you are here, and your own password."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field

from app.auth.throttle import Limits, TooManyFailures
from app.deps import PagePrincipal, SessionDep, client_address
from app.forms import FormInvalid, validate_form
from app.templating import render
from app.users import service
from app.users.schemas import PasswordChange

router = APIRouter(prefix="/account", include_in_schema=False)


class PasswordForm(BaseModel):
    current_password: str = Field(default="", max_length=1024)
    new_password: str = Field(default="", max_length=1024)
    repeat_password: str = Field(default="", max_length=1024)


@router.get("")
def account_page(request: Request, login: PagePrincipal) -> Response:
    changed = request.query_params.get("password") == "changed"
    return _page(request, {}, [{"kind": "success", "text": PASSWORD_CHANGED}] if changed else [])


PASSWORD_CHANGED = "Password changed. Your other browser sessions and API tokens have ended; this one stays."


@router.post("/password")
def change_password(
    request: Request, login: PagePrincipal, session: SessionDep, form: Annotated[PasswordForm, Form()]
) -> Response:
    try:
        data = validate_form(PasswordChange, form.model_dump(exclude={"repeat_password"}),
                             required=("current_password", "new_password"))
    except FormInvalid as exc:
        return _page(request, exc.errors, status_code=422)
    if form.repeat_password != form.new_password:
        return _page(request, {"repeat_password": "does not match the new password"}, status_code=422)
    limits = Limits.from_settings(request.app.state.settings)
    try:
        changed = service.change_own_password(session, login, data, client_address(request), limits)
    except TooManyFailures as exc:
        response = _page(request, {"current_password": exc.message}, status_code=429)
        response.headers.update(exc.headers)
        return response
    if not changed:
        # Answered, not raised: raising would roll back the failed attempt just counted.
        return _page(request, {"current_password": "is not your password"}, status_code=403)
    return RedirectResponse("/account?password=changed", status_code=303)


def _page(request: Request, errors: dict[str, str], messages: list[dict[str, str]] | None = None,
          status_code: int = 200) -> Response:
    return render(request, "auth/account.html", {"errors": errors, "messages": messages or []},
                  status_code=status_code)
