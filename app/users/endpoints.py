from __future__ import annotations

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse

from app.auth.throttle import Limits
from app.deps import AdminApiUser, ApiPrincipal, ApiUser, RowId, SessionDep, client_address
from app.errors import error_responses
from app.users import service
from app.users.schemas import PasswordChange, UserCreate, UserRead, UserUpdate

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


@router.get("", response_model=list[UserRead])
def list_users(_: AdminApiUser, session: SessionDep) -> list[UserRead]:
    return [UserRead.model_validate(u) for u in service.list_users(session)]


@router.post(
    "",
    response_model=UserRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 409),
)
def create_user(body: UserCreate, admin: AdminApiUser, session: SessionDep) -> UserRead:
    return UserRead.model_validate(service.create_user(session, body, by=admin))


@router.get("/{user_id}", response_model=UserRead, responses=error_responses(404))
def get_user(user_id: RowId, _: AdminApiUser, session: SessionDep) -> UserRead:
    return UserRead.model_validate(service.get_user(session, user_id))


@router.patch(
    "/{user_id}",
    response_model=UserRead,
    responses=error_responses(
        400, 404, 409, described={409: "an admin changing their own role, active flag or password (their own "
                                       "password is changed with POST /users/me/password)"}
    ),
)
def update_user(
    user_id: RowId, body: UserUpdate, admin: AdminApiUser, login: ApiPrincipal, session: SessionDep
) -> UserRead:
    """Change a user's role, active flag or password. Deactivation ends all their logins for
    good; a new password ends all but the one making the change."""
    user = service.get_user(session, user_id)
    return UserRead.model_validate(service.update_user(session, user, body, by=admin, keep=login))
