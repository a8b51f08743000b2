"""Admin pages: user accounts and their roles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import RedirectResponse, Response

from app.auth.service import Principal
from app.deps import AdminPageUser, PagePrincipal, SessionDep
from app.errors import Conflict
from app.forms import FormInvalid, PageId, validate_form
from app.models import Role, User
from app.templating import render
from app.users import service
from app.users.schemas import UserCreate, UserUpdate

router = APIRouter(prefix="/admin/users", include_in_schema=False)

ShortText = Annotated[str, Form(max_length=1024)]


# What the page says after each change, by the query parameter the change redirects with (its
# value the user's id). Said only while it is still true: an address typed by hand, or kept
# after a later change, shows no banner.
USER_NOTICES: dict[str, tuple[Callable[[User], bool], str]] = {
    "created": (lambda u: True, "Created {username} ({role}): give them their password privately."),
    "role_set": (lambda u: True, "{username}'s role is now {role}."),
    "deactivated": (lambda u: not u.is_active, "{username} is deactivated: their logins and API tokens have ended."),
    "reactivated": (lambda u: u.is_active, "{username} can log in again."),
    "password_set": (lambda u: True, "New password set for {username}: hand it to them; their other logins have ended."),
}


@router.get("")
def users_page(request: Request, admin: AdminPageUser, session: SessionDep) -> Response:
    users = {str(u.id): u for u in service.list_users(session)}
    messages = [
        {"kind": "success", "text": text.format(username=user.username, role=user.role.value)}
        for parameter, (holds, text) in USER_NOTICES.items()
        if (user := users.get(request.query_params.get(parameter, ""))) is not None and holds(user)
    ]
    return _users_list(request, session, messages=messages)


@router.post("")
def create_user(
    request: Request,
    admin: AdminPageUser,
    session: SessionDep,
    username: ShortText = "",
    role: ShortText = "",
    password: ShortText = "",
) -> Response:
    values = {"username": username.strip(), "role": role}
    try:
        user = service.create_user(session, validate_form(UserCreate, {**values, "password": password}), by=admin)
    except FormInvalid as exc:
        return _users_list(request, session, values, exc.errors, status_code=422)
    except Conflict as exc:
        return _users_list(request, session, values, {"username": exc.message}, status_code=409)
    return RedirectResponse(f"/admin/users?created={user.id}", status_code=303)


@router.post("/{user_id}/role")
def change_role(
    request: Request, user_id: PageId, admin: AdminPageUser, session: SessionDep, role: ShortText = ""
) -> Response:
    return _update(request, session, admin, user_id, {"role": role})


@router.post("/{user_id}/active")
def change_active(
    request: Request,
    user_id: PageId,
    admin: AdminPageUser,
    session: SessionDep,
    is_active: ShortText = "",
) -> Response:
    return _update(request, session, admin, user_id, {"is_active": is_active})


@router.post("/{user_id}/password")
def set_password(
    request: Request,
    user_id: PageId,
    admin: AdminPageUser,
    login: PagePrincipal,
    session: SessionDep,
    password: ShortText = "",
) -> Response:
    """A new password an admin hands to a user who lost theirs; it ends every login of theirs
    (the admin's own, when it is their row, stays)."""
    return _update(request, session, admin, user_id, {"password": password}, keep=login)


def _update(
    request: Request, session: SessionDep, admin: User, user_id: int, values: dict[str, str],
    keep: Principal | None = None,
) -> Response:
    user = service.get_user(session, user_id)
    try:
        changes = validate_form(UserUpdate, values)
    except FormInvalid as exc:
        # "role must be one of …", but "a password cannot be only spaces" names its field itself.
        # A blank form's "nothing to change" is about the whole form.
        problem = "; ".join(message if field in message or field == "form" else f"{field} {message}"
                            for field, message in exc.errors.items())
        return _users_list(request, session, problem=f"{user.username}: {problem}", status_code=422)
    try:
        service.update_user(session, user, changes, by=admin, keep=keep)
    except Conflict as exc:
        # Refused before anything changed: said on the list, as a bad value is, not on an error page.
        return _users_list(request, session, problem=f"{user.username}: {exc.message}", status_code=409)
    # To the top, where the banner says what changed for whom.
    if changes.password is not None:
        notice = "password_set"
    elif changes.role is not None:
        notice = "role_set"
    else:
        notice = "reactivated" if changes.is_active else "deactivated"
    return RedirectResponse(f"/admin/users?{notice}={user.id}", status_code=303)


def _users_list(
    request: Request,
    session: SessionDep,
    values: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    *,
    problem: str | None = None,
    messages: list[dict[str, str]] | None = None,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    """The list and the new-user form; `errors` are that form's, `problem` is a row's."""
    return render(
        request,
        "admin/users.html",
        {
            "users": service.list_users(session),
            "roles": list(Role),
            "values": values or {},
            "errors": errors or {},
            "problem": problem,
            "messages": messages or [],
        },
        status_code=status_code,
    )
