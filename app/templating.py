"""Jinja2 set-up shared by every page; autoescaping is on, so text is never run as HTML."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from starlette.routing import Match

from app.figures.service import figures_shown
from labeler_ui import TEMPLATES_DIR

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
# For times a page compares with the present, such as an ETA a slow round has overrun.
templates.env.globals["now"] = partial(datetime.now, UTC)


def percent_down(share: float, digits: int = 0) -> str:
    """A share (0 to 1) as a percentage rounded down: a figure shown is never more than the
    truth, so 100% means all of it (249 of 250 solutions done read "100%" when rounded), and a
    threshold typed as a labeler's accuracy reads keeps that labeler (4 of 6 read 66.7%, and
    66.7 left them out)."""
    scale = 10**digits
    # The nudge keeps a share such as 0.29 (28.999… in floating point) at 29.
    return f"{math.floor(share * 100 * scale + 1e-9) / scale:.{digits}f}"


templates.env.filters["percent_down"] = percent_down


# Query parameters by which a redirect after a form carries its one-time notice ("Round queued.",
# "Settings saved."); the page takes them out of the address so that a reload does not repeat it.
NOTICE_PARAMETERS = frozenset({
    "saved", "member_added", "member_removed", "access", "decided", "created", "role_set", "deactivated",
    "reactivated", "password_set", "password", "started", "compared", "retired", "restored", "gone", "gold",
    "corrected", "deleted", "unskipped", "given_back", "all_given_back",
})


def page_address(request: Request, page: str | None = None) -> str | None:
    """The address the page should show in the browser's bar, where it differs from the one it
    was fetched from: a notice's parameter left out; or, for a page answering a form post (a
    form refused, say), `page`, the address of the page shown, else the nearest one a GET
    reaches, so that a reload fetches that page instead of posting again or meeting a 405."""
    path = request.url.path
    if path.startswith("//"):
        # The browser would read it as another host's address and refuse to show it.
        return None
    if request.method == "GET":
        items = request.query_params.multi_items()
        kept = [(k, v) for k, v in items if k not in NOTICE_PARAMETERS]
        if len(kept) == len(items):
            return None
        return path + ("?" + urlencode(kept) if kept else "")
    if page is not None:
        return page
    parts = path.rstrip("/").split("/")
    while parts:
        candidate = "/".join(parts) or "/"
        scope = {"type": "http", "path": candidate, "method": "GET", "root_path": ""}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            return candidate + (f"?{request.url.query}" if candidate == path and request.url.query else "")
        parts.pop()
    return None


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, status_code: int = 200,
    *, address: str | None = None,
) -> HTMLResponse:
    """The page; `address` is where it lives, for a page that answers a form post elsewhere
    (see page_address)."""
    principal = getattr(request.state, "principal", None)
    base = {
        "user": principal.user if principal else None,
        "csrf_token": principal.session.csrf_token if principal and principal.session else "",
        # Pages then show an [asy] figure's source at once instead of asking for a drawing that
        # cannot come (a 404 in the console for every figure).
        "figures_drawn": figures_shown(request.app.state.settings),
        "page_address": page_address(request, address),
    }
    return templates.TemplateResponse(
        request, name, {**base, **(context or {})}, status_code=status_code
    )
