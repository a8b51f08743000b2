"""Jinja2 set-up shared by every page; autoescaping is on, so text is never run as HTML."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.figures.service import figures_shown
from labeler_ui import TEMPLATES_DIR

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, status_code: int = 200
) -> HTMLResponse:
    principal = getattr(request.state, "principal", None)
    base = {
        "user": principal.user if principal else None,
        "csrf_token": principal.session.csrf_token if principal and principal.session else "",
        # Pages then show an [asy] figure's source at once instead of asking for a drawing that
        # cannot come (a 404 in the console for every figure).
        "figures_drawn": figures_shown(request.app.state.settings),
    }
    return templates.TemplateResponse(
        request, name, {**base, **(context or {})}, status_code=status_code
    )
