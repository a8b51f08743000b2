"""Admin pages: user accounts and their roles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Annotated

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from app.auth.security import new_password
from app.auth.service import Principal, list_all_api_tokens, revoke_any_token
from app.auth.throttle import Limits, TooManyFailures
from app.deps import AdminPageUser, PagePrincipal, SessionDep, client_address
from app.errors import BadInput, Conflict, NotFound, plain_message
from app.forms import FormInvalid, PageId, row_id, validate_form
from app.models import Role, User
from app.validation import AS_TEXT
from app.templating import render
from app.users import service
from app.users.schemas import MAX_NEW_USERS, UserCreate, UsersCreate, UserUpdate

router = APIRouter(prefix="/admin/users", include_in_schema=False)

ShortText = Annotated[str, Form(max_length=1024)]


def _checked(box: str) -> str:
    """A checkbox's value as the schemas read it: a browser sends an unticked box not at all, and
    the confirmation card sends back what this made of it."""
    return "true" if box in ("on", "true") else "false"


# What the page says after each change, by the query parameter the change redirects with (its
# value the user's id). Said only while it is still true: an address typed by hand, or kept
# after a later change, shows no banner.
USER_NOTICES: dict[str, tuple[Callable[[User], bool], str]] = {
    "created": (lambda u: True, "Created {username} ({role}): give them their password privately.{then}"),
    "role_set": (lambda u: True, "{username}'s role is now {role}."),
    "deactivated": (lambda u: not u.is_active, "{username} is deactivated: their logins and API tokens have ended."),
    "reactivated": (lambda u: u.is_active, "{username} can log in again."),
    "password_set": (lambda u: True, "New password set for {username}: hand it to them; their other logins have "
                                     "ended.{then}"),
    "unlocked": (lambda u: True, "{username} may log in again at once: the failed logins against their name are forgotten."),
}


@router.get("")
def users_page(request: Request, admin: AdminPageUser, session: SessionDep) -> Response:
    users = {str(u.id): u for u in service.list_users(session)}
    messages = [
        {"kind": "success", "text": text.format(username=user.username, role=user.role.value, then=(
            " They choose their own when they next log in." if user.must_change_password else ""))}
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
    must_change_password: ShortText = "",
    your_password: ShortText = "",
) -> Response:
    values = {"username": username.strip(), "role": role, "must_change_password": _checked(must_change_password)}
    # Left empty, the password is generated and shown once, as for several users. A confirmation
    # posts it empty again, so that it is made only once the user is.
    generated = new_password() if not password else None
    try:
        data = validate_form(UserCreate, {**values, "password": generated or password})
    except FormInvalid as exc:
        return _users_list(request, session, values, exc.errors, status_code=422)
    change = service.admin_powers_change(None, data.role, by=admin, new_username=data.username)
    refused = _ask_your_password(request, session, admin, your_password, change, Confirmation(
        change=change or "", action="/admin/users", fields=values,
        retype=None if generated else f"Password for {data.username}"))
    if refused is not None:
        return refused
    try:
        user = service.create_user(session, data, by=admin)
    except Conflict as exc:
        return _users_list(request, session, values, {"username": exc.message}, status_code=409)
    if generated:
        # On the answer alone, as create_users's: a redirect would have to keep it somewhere.
        return _users_list(request, session, created=[service.NewAccount(user, generated)], status_code=201)
    return RedirectResponse(f"/admin/users?created={user.id}", status_code=303)


@router.post("/batch")
def create_users(
    request: Request, admin: AdminPageUser, session: SessionDep,
    usernames: Annotated[str, Form(max_length=MAX_NEW_USERS * 70)] = "", role: ShortText = "",
    must_change_password: ShortText = "",
) -> Response:
    """Several accounts at once; their generated passwords are on the answer alone (a redirect
    would have to keep them somewhere)."""
    names = [line.strip() for line in usernames.splitlines() if line.strip()]
    values = {"usernames": usernames, "role": role, "must_change_password": _checked(must_change_password)}
    try:
        # Not validate_form, which says a list's first bad item: every bad name is said here.
        data = UsersCreate.model_validate({"usernames": names, "role": role,
                                           "must_change_password": values["must_change_password"]}, context=AS_TEXT)
        made = service.create_users(session, data, by=admin, listed_at=lambda index: f"as name {index + 1}")
    except ValidationError as exc:
        problems = {".".join(map(str, e["loc"])): plain_message(e, UsersCreate) for e in exc.errors(include_url=False)}
        return _users_list(request, session, batch_values=values, batch_errors=_by_name(problems, names),
                           status_code=422)
    except BadInput as exc:
        problems = {d["field"]: d["message"] for d in exc.details or []}
        return _users_list(request, session, batch_values=values, batch_errors=_by_name(problems, names),
                           status_code=422)
    return _users_list(request, session, created=made, status_code=201)


def _by_name(errors: dict[str, str], names: list[str]) -> list[str]:
    """The form's errors as sentences, a name's with its place and the name as typed."""
    said = []
    for field, message in errors.items():
        place, _, index = field.partition(".")
        if place == "usernames" and index.isdigit() and int(index) < len(names):
            said.append(f"name {int(index) + 1} ({names[int(index)]}): {message}")
        elif field == "usernames":
            said.append(f"usernames: {message}")
        else:
            said.append(f"{field}: {message}")
    return said


@router.post("/{user_id}/role")
def change_role(
    request: Request, user_id: PageId, admin: AdminPageUser, session: SessionDep, role: ShortText = "",
    your_password: ShortText = "",
) -> Response:
    return _update(request, session, admin, user_id, {"role": role}, your_password)


@router.post("/{user_id}/active")
def change_active(
    request: Request,
    user_id: PageId,
    admin: AdminPageUser,
    session: SessionDep,
    is_active: ShortText = "",
    your_password: ShortText = "",
) -> Response:
    return _update(request, session, admin, user_id, {"is_active": is_active}, your_password)


@router.post("/{user_id}/password")
def set_password(
    request: Request,
    user_id: PageId,
    admin: AdminPageUser,
    login: PagePrincipal,
    session: SessionDep,
    password: ShortText = "",
    must_change_password: ShortText = "",
    your_password: ShortText = "",
) -> Response:
    """A new password an admin hands to a user who lost theirs; it ends every login of theirs
    (the admin's own, when it is their row, stays). Ticked, the user replaces it at their next
    login."""
    return _update(request, session, admin, user_id,
                   {"password": password, "must_change_password": _checked(must_change_password)},
                   your_password, keep=login)



@router.post("/{user_id}/unlock")
def unlock(request: Request, user_id: PageId, admin: AdminPageUser, session: SessionDep,
           your_password: ShortText = "") -> Response:
    """Lift a lock that failed logins put on a user's name (theirs, or a guesser's)."""
    user = service.get_user(session, user_id)
    change = service.admin_powers_change(user, None, by=admin)
    refused = _ask_your_password(request, session, admin, your_password, change, Confirmation(
        change=change or "", action=request.url.path, fields={}))
    if refused is not None:
        return refused
    try:
        service.unlock(session, user, by=admin)
    except Conflict as exc:
        return _users_list(request, session, problem=f"{user.username}: {exc.message}", status_code=409)
    return RedirectResponse(f"/admin/users?unlocked={user.id}", status_code=303)


@router.get("/tokens")
def tokens_page(request: Request, _: AdminPageUser, session: SessionDep) -> Response:
    """Every user's live API tokens: who can reach the API now, and since when they last did."""
    revoked = row_id(request.query_params.get("revoked", ""))
    messages = [{"kind": "success", "text": f"Token {revoked} revoked: it is refused from now on."}] if revoked else []
    return _tokens_list(request, session, messages)


@router.post("/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: PageId, admin: AdminPageUser, session: SessionDep) -> Response:
    try:
        revoke_any_token(session, token_id, by=admin)
    except NotFound:
        # Revoked already (a second click, or its holder meanwhile): said here, not on an error page.
        return _tokens_list(request, session, [{"kind": "warning", "text": f"No token {token_id} is left to revoke: "
                                                "the list below is what is."}], status_code=404)
    return RedirectResponse(f"/admin/users/tokens?revoked={token_id}", status_code=303)


def _tokens_list(request: Request, session: SessionDep, messages: list[dict[str, str]],
                 status_code: int = status.HTTP_200_OK) -> Response:
    return render(request, "admin/tokens.html", {"held": list_all_api_tokens(session), "messages": messages},
                  status_code=status_code)


@dataclass(frozen=True)
class Confirmation:
    """A change that waits for the admin's own password: the form that sends it again with it.
    `fields` go back as they came; a password in the change is typed again (`retype`, its
    field's label), not written into the page."""

    change: str
    action: str
    fields: dict[str, str]
    retype: str | None = None
    error: str | None = None


def _ask_your_password(
    request: Request, session: SessionDep, admin: User, given: str, change: str | None, confirmation: Confirmation
) -> Response | None:
    """The users page asking for the admin's own password, when `change` needs it and `given`
    is not it; None when the change may go ahead. With JavaScript the page's dialog asks for it
    before the form posts; this is the page without it, and the answer to a wrong one."""
    if change is None:
        return None
    if not given:
        return _users_list(request, session, confirmation=confirmation, status_code=403)
    limits = Limits.from_settings(request.app.state.settings)
    try:
        confirmed = service.is_own_password(session, admin, given, client_address(request), limits)
    except TooManyFailures as exc:
        response = _users_list(request, session, confirmation=replace(confirmation, error=exc.message), status_code=429)
        response.headers.update(exc.headers)
        return response
    if not confirmed:
        # Answered, not raised: raising would roll back the failed attempt just counted.
        return _users_list(request, session, confirmation=replace(confirmation, error="is not your password"),
                           status_code=403)
    return None


def _update(
    request: Request, session: SessionDep, admin: User, user_id: int, values: dict[str, str],
    your_password: str, keep: Principal | None = None,
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
    if changes.password is not None:
        # Said before the admin is asked for their own password, as a bad value is.
        try:
            service.refuse_guessable(changes.password, user.username, "password")
        except BadInput as exc:
            return _users_list(request, session, problem=f"{user.username}: password {exc.details[0]['message']}",
                               status_code=422)
    change = service.admin_powers_change(user, changes.role, by=admin)
    action = request.url.path
    secret = "password" in values
    refused = _ask_your_password(request, session, admin, your_password, change, Confirmation(
        change=change or "", action=action,
        fields={key: value for key, value in values.items() if key != "password"},
        retype=f"New password for {user.username}" if secret else None))
    if refused is not None:
        return refused
    try:
        service.update_user(session, user, changes, by=admin, keep=keep, confirmed=change is not None)
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
    confirmation: Confirmation | None = None,
    batch_values: dict[str, str] | None = None,
    batch_errors: list[str] | None = None,
    created: list[service.NewAccount] | None = None,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    """The list and the new-user form; `errors` are that form's, `problem` is a row's,
    `confirmation` a change waiting for the admin's own password."""
    return render(
        request,
        "admin/users.html",
        {
            "users": service.list_users(session),
            "locked_until": service.locked_until(session),
            "roles": list(Role),
            "values": values or {},
            "errors": errors or {},
            "problem": problem,
            "messages": messages or [],
            "confirmation": confirmation,
            "batch_values": batch_values or {},
            "batch_errors": batch_errors or [],
            "created": created or [],
            "max_new_users": MAX_NEW_USERS,
        },
        status_code=status_code,
    )
