from __future__ import annotations

from fastapi import APIRouter, Request, status

from app.auth import service
from app.auth.schemas import TokenRead, TokenRequest
from app.deps import ApiUser, NotAuthenticated, SessionDep
from app.errors import error_responses

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.post(
    "/tokens",
    response_model=TokenRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(
        400, 401, 403, 422,
        described={401: "wrong username or password", 403: "the right password, but the account is deactivated"},
    ),
)
def create_token(body: TokenRequest, session: SessionDep) -> TokenRead:
    """Trade a username and password for a bearer token (shown once, stored hashed)."""
    user = service.authenticate(session, body.username, body.password)
    if user is None:
        raise NotAuthenticated("wrong username or password")
    return TokenRead(token=service.issue_api_token(session, user, body.name))


@router.delete(
    "/tokens/current",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(401, 403, 422),
)
def revoke_current_token(request: Request, _: ApiUser, session: SessionDep) -> None:
    _, _, token = request.headers.get("authorization", "").partition(" ")
    if not token or not service.revoke_api_token(session, token.strip()):
        raise NotAuthenticated("this request did not use a bearer token")
