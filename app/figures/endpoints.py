from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from app.deps import ApiUser, RowId, SessionDep
from app.errors import error_responses
from app.figures import service

router = APIRouter(prefix="/api/v1", tags=["figures"], responses=error_responses(401, 403, 404, 422))

# The image is shown through <img>, where SVG never runs scripts; this policy holds the same
# line when someone opens the file on its own.
SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"


@router.get(
    "/problems/{problem_id}/figures/{index}",
    response_class=Response,
    responses={200: {"content": {"image/svg+xml": {}}, "description": "the figure as SVG"}},
)
def problem_figure(
    problem_id: RowId,
    index: Annotated[int, Path(ge=0, le=999, description="the figure's place in the statement, from 0")],
    request: Request,
    user: ApiUser,
    session: SessionDep,
) -> Response:
    """A figure of the problem's statement ([asy] code), drawn to SVG by Asymptote."""
    svg = service.problem_figure(session, request.app.state.settings, problem_id, index, user.id)
    return Response(
        svg,
        media_type="image/svg+xml",
        headers={"Cache-Control": "private, max-age=86400", "Content-Security-Policy": SVG_POLICY},
    )
