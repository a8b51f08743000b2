"""The interactive API docs, `/api/v1/docs`: Swagger UI served by the platform itself.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script; the
platform's Content-Security-Policy allows neither. This page loads the copy vendored at set-up
(labeler_ui.vendor_assets) and starts it from a static script, so the CSP stays at 'self'.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse

from app.deps import SESSION_COOKIE, visitor
from app.templating import render

DOCS_PATH = "/api/v1/docs"
OPENAPI_PATH = "/api/v1/openapi.json"


# How a caller says who they are; every operation asks for one unless it says `security: []`.
# Named in the schema, Swagger UI offers Authorize and generated clients send the token.
SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "an API token: POST /api/v1/auth/tokens, Your account → API tokens, or "
                              "`stepwise tokens create`"},
    "session": {"type": "apiKey", "in": "cookie", "name": SESSION_COOKIE,
                "description": "a browser session; its writes need the X-CSRF-Token header too"},
}


def install(app: FastAPI) -> None:
    # A plain route, as FastAPI's own docs page is: open to anyone, like the schema it shows,
    # and no operation of the API itself.
    app.add_route(DOCS_PATH, _docs_page, methods=["GET"], include_in_schema=False)
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generated()
            schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
            schema["security"] = [{"bearer": []}, {"session": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _docs_page(request: Request) -> HTMLResponse:
    # Logged in, the page carries the session's CSRF token, which "Try it out" sends with writes.
    request.state.principal = visitor(request)
    return render(request, "api_docs.html", {"title": request.app.title, "openapi_url": OPENAPI_PATH})
