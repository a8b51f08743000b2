from __future__ import annotations

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse

from app.auth import service
from app.auth.schemas import HeldTokenInfo, TokenInfo, TokenRead, TokenRequest
from app.auth.throttle import Limits
from app.deps import AdminApiUser, ApiPrincipal, ApiUser, NotAuthenticated, RowId, SessionDep, client_address
from app.errors import error_responses

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])
# Everyone's tokens, for admins: a router of its own, since /auth/tokens are the caller's.
everyone_router = APIRouter(prefix="/api/v1/api-tokens", tags=["auth"], responses=error_responses(401, 403))


@router.post(
    "/tokens",
    response_model=TokenRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(
        400, 401, 403, 422, 429,
        described={401: "wrong username or password", 403: "the right password, but the account is deactivated",
                   409: "a read-only token for a user who must choose their own password first"},
    ),
    # The username and password are the credentials: no token or session is asked for.
    openapi_extra={"security": []},
)
def create_token(body: TokenRequest, request: Request, session: SessionDep) -> TokenRead | JSONResponse:
    """Trade a username and password for a bearer token (shown once, stored hashed). Repeated
    failures for one username or from one address are refused for a while (429)."""
    limits = Limits.from_settings(request.app.state.settings)
    user = service.log_in(session, body.username, body.password, client_address(request), limits, purpose="API token")
    if user is None:
        # Answered, not raised: raising would roll back the failure just counted.
        return JSONResponse(
            {"detail": "wrong username or password"},
            status_code=status.HTTP_401_UNAUTHORIZED,
            headers={"WWW-Authenticate": "Bearer"},
        )
    issued = service.issue_api_token(session, user, body.name, body.expires_in_days, by=user,
                                     max_days=request.app.state.settings.token_max_days, read_only=body.read_only)
    return TokenRead(token=issued.token, id=issued.record.id, expires_at=issued.record.expires_at,
                     read_only=issued.record.read_only)


@router.get("/tokens", response_model=list[TokenInfo], responses=error_responses(401, 403))
def list_tokens(login: ApiPrincipal, session: SessionDep) -> list[TokenInfo]:
    """Your tokens that are not revoked, newest first, with when each was last used: revoke
    those no script needs any more. The tokens themselves are not kept, only their digests."""
    return [TokenInfo.of(record, login.token_id) for record in service.list_api_tokens(session, login.user)]


@router.delete(
    "/tokens/current",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(401, 403, 422),
)
def revoke_current_token(request: Request, _: ApiUser, session: SessionDep) -> None:
    _, _, token = request.headers.get("authorization", "").partition(" ")
    if not token or not service.revoke_api_token(session, token.strip()):
        raise NotAuthenticated("this request did not use a bearer token")


@router.delete("/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=error_responses(401, 403, 404, 422))
def revoke_token(token_id: RowId, login: ApiPrincipal, session: SessionDep) -> None:
    """Revoke one of your tokens by its id (from `GET /tokens`); it is refused from then on."""
    service.revoke_own_token(session, login.user, token_id, by=login.user)



@everyone_router.get("", response_model=list[HeldTokenInfo])
def list_everyones_tokens(login: ApiPrincipal, _: AdminApiUser, session: SessionDep) -> list[HeldTokenInfo]:
    """Every user's tokens that are not revoked, newest first, with their holder and last use: who
    can reach the API now."""
    return [HeldTokenInfo(**TokenInfo.of(held.record, login.token_id).model_dump(), user_id=held.record.user_id,
                          username=held.username) for held in service.list_all_api_tokens(session)]


@everyone_router.delete("/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 422))
def revoke_anyones_token(token_id: RowId, admin: AdminApiUser, session: SessionDep) -> None:
    """Revoke any user's token by its id: a script that leaked it, a holder who left. Recorded in
    the audit trail."""
    service.revoke_any_token(session, token_id, by=admin)
