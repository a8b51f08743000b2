from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse

from app.auth.throttle import Limits
from app.deps import AdminApiUser, ApiPrincipal, ApiUser, RowId, SessionDep, client_address
from app.errors import error_responses
from app.models import User
from app.users import service
from app.users.schemas import (
    NewUserRead,
    PasswordChange,
    UnlockRead,
    UnlockRequest,
    UserCreate,
    UserRead,
    UsersCreate,
    UserUpdate,
)

router = APIRouter(
    prefix="/api/v1/users", tags=["users"], responses=error_responses(401, 403, 422)
)


@router.get("/me", response_model=UserRead)
def me(user: ApiUser) -> UserRead:
    return UserRead.model_validate(user)


@router.post(
    "/me/password",
    status_code=status.HTTP_204_NO_CONTENT,
    response_model=None,
    responses=error_responses(400, 429, described={403: "the current password is wrong"}),
)
def change_password(
    body: PasswordChange, request: Request, login: ApiPrincipal, session: SessionDep
) -> JSONResponse | None:
    """Change your own password, giving the current one; every other login of yours (browser
    sessions, API tokens) ends. Wrong current passwords count as failed logins (429 after
    several)."""
    limits = Limits.from_settings(request.app.state.settings)
    if not service.change_own_password(session, login, body, client_address(request), limits):
        # Answered, not raised: raising would roll back the failure just counted.
        return JSONResponse({"detail": "the current password is wrong"}, status_code=status.HTTP_403_FORBIDDEN)
    return None


def _read(user: User, locks: dict[str, datetime]) -> UserRead:
    return UserRead.model_validate(user).model_copy(update={"locked_until": locks.get(user.username.lower())})


@router.get("", response_model=list[UserRead])
def list_users(_: AdminApiUser, session: SessionDep) -> list[UserRead]:
    locks = service.locked_until(session)
    return [_read(u, locks) for u in service.list_users(session)]


YOUR_PASSWORD = {403: "`your_password` missing or wrong: creating or making an admin, or changing another admin, "
                      "asks for your own password"}


def _refuse_without_your_password(
    request: Request, session: SessionDep, admin: User, given: str | None, change: str | None
) -> JSONResponse | None:
    """The refusal when `change` (see service.admin_powers_change) needs the admin's own password
    and `given` is not it; None when it may go ahead. Answered, not raised: raising would roll
    back the failed attempt just counted."""
    if change is None:
        return None
    if not given:
        return JSONResponse({"detail": f"{change} asks for your own password: send it as your_password"},
                            status_code=status.HTTP_403_FORBIDDEN)
    limits = Limits.from_settings(request.app.state.settings)
    if not service.is_own_password(session, admin, given, client_address(request), limits):
        return JSONResponse({"detail": "your_password is not your password"}, status_code=status.HTTP_403_FORBIDDEN)
    return None


@router.post(
    "",
    response_model=UserRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 409, 429, described=YOUR_PASSWORD),
)
def create_user(body: UserCreate, request: Request, admin: AdminApiUser, session: SessionDep) -> UserRead | JSONResponse:
    """Create a user. An admin is created only with `your_password`, the caller's own."""
    refused = _refuse_without_your_password(request, session, admin, body.your_password,
                                            service.admin_powers_change(None, body.role, by=admin,
                                                                        new_username=body.username))
    return refused or UserRead.model_validate(service.create_user(session, body, by=admin))


@router.post("/batch", response_model=list[NewUserRead], status_code=status.HTTP_201_CREATED,
             responses=error_responses(400))
def create_users(body: UsersCreate, admin: AdminApiUser, session: SessionDep) -> list[NewUserRead]:
    """Accounts of one role (not admin) for up to 100 names, each with a generated password that
    this answer alone holds; all or none (one 422 naming every name malformed, listed twice or taken)."""
    return [NewUserRead(**UserRead.model_validate(made.user).model_dump(), password=made.password)
            for made in service.create_users(session, body, by=admin)]


@router.get("/{user_id}", response_model=UserRead, responses=error_responses(404))
def get_user(user_id: RowId, _: AdminApiUser, session: SessionDep) -> UserRead:
    return _read(service.get_user(session, user_id), service.locked_until(session))


@router.post("/{user_id}/unlock", response_model=UnlockRead,
             responses=error_responses(400, 404, 409, 429, described=YOUR_PASSWORD))
def unlock(user_id: RowId, request: Request, admin: AdminApiUser, session: SessionDep,
           body: UnlockRequest | None = None) -> UnlockRead | JSONResponse:
    """Forget the failed logins against the user's name, and the lock they made, so that the
    user can log in at once; idempotent. Another admin's name takes `your_password`; your own
    is 409 (another admin unlocks it)."""
    user = service.get_user(session, user_id)
    refused = _refuse_without_your_password(request, session, admin, body.your_password if body else None,
                                            service.admin_powers_change(user, None, by=admin))
    if refused is not None:
        return refused
    return UnlockRead(cleared=service.unlock(session, user, by=admin))


@router.patch(
    "/{user_id}",
    response_model=UserRead,
    responses=error_responses(
        400, 404, 409, 429, described={**YOUR_PASSWORD,
                                       409: "an admin changing their own role, active flag or password (their own "
                                            "password is changed with POST /users/me/password)"}
    ),
)
def update_user(
    user_id: RowId, body: UserUpdate, request: Request, admin: AdminApiUser, login: ApiPrincipal, session: SessionDep
) -> UserRead | JSONResponse:
    """Change a user's role, active flag or password. Deactivation ends all their logins for
    good; a new password ends all but the one making the change. Making an admin, or changing
    another admin, takes `your_password`, the caller's own."""
    user = service.get_user(session, user_id)
    change = service.admin_powers_change(user, body.role, by=admin)
    refused = _refuse_without_your_password(request, session, admin, body.your_password, change)
    if refused is not None:
        return refused
    updated = service.update_user(session, user, body, by=admin, keep=login, confirmed=change is not None)
    return _read(updated, service.locked_until(session))
