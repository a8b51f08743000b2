"""Every response, whatever answers it, carries the security headers once."""

from __future__ import annotations

import pytest

from app.main import CONTENT_SECURITY_POLICY


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/login", 200),  # a page
        ("/api/v1/openapi.json", 200),  # JSON
        ("/api/v1/docs", 200),  # the API docs, a plain route
        ("/api/v1/projects", 401),  # an error from a dependency
        ("/no/such/page", 404),  # an error from the router
        ("/static/vendor/katex/katex.min.css", 200),  # a static file
        ("/static/vendor/swagger-ui/swagger-ui-bundle.js", 200),  # vendored at set-up
    ],
)
def test_security_headers_on_every_kind_of_response(client, path: str, status: int) -> None:  # type: ignore[no-untyped-def]
    response = client.get(path)
    assert response.status_code == status
    assert response.headers.get_list("content-security-policy") == [CONTENT_SECURITY_POLICY]
    assert response.headers.get_list("x-content-type-options") == ["nosniff"]
    assert response.headers.get_list("referrer-policy") == ["same-origin"]


@pytest.mark.parametrize(
    ("path", "stored"),
    [("/login", False), ("/no/such/page", False), ("/api/v1/openapi.json", True),
     ("/static/vendor/katex/katex.min.css", True)],
)
def test_pages_are_never_stored_for_back_while_files_are(client, path: str, stored: bool) -> None:  # type: ignore[no-untyped-def]
    # Back to a page that is a copy shows a lease or a label as they were: a form that fails on submit.
    response = client.get(path)
    assert ("no-store" in response.headers.get("cache-control", "")) is not stored
