"""The interactive API docs, `/api/v1/docs`: Swagger UI served by the platform itself.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script; the
platform's Content-Security-Policy allows neither. This page loads the copy vendored at set-up
(labeler_ui.vendor_assets) and starts it from a static script, so the CSP stays at 'self'.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse

from app.deps import visitor
from app.templating import render

DOCS_PATH = "/api/v1/docs"
OPENAPI_PATH = "/api/v1/openapi.json"


def install(app: FastAPI) -> None:
    # A plain route, as FastAPI's own docs page is: open to anyone, like the schema it shows,
    # and no operation of the API itself.
    app.add_route(DOCS_PATH, _docs_page, methods=["GET"], include_in_schema=False)


def _docs_page(request: Request) -> HTMLResponse:
    # Logged in, the page carries the session's CSRF token, which "Try it out" sends with writes.
    request.state.principal = visitor(request)
    return render(request, "api_docs.html", {"title": request.app.title, "openapi_url": OPENAPI_PATH})
