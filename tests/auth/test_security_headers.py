"""Every response, whatever answers it, carries the security headers once."""

from __future__ import annotations

import pytest

from app.main import CONTENT_SECURITY_POLICY
from tests.conftest import api_headers, make_project, make_user


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


def test_api_answers_are_never_stored_and_an_etag_still_serves_if_match(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # An API answer is one caller's data (their labels, an export): a shared proxy or the browser's
    # disk cache kept it for whoever came next, while pages already said no-store.
    make_user(session_factory, "ada", "admin")
    headers = api_headers(client, "ada")
    project = make_project(session_factory)
    for path in ("/api/v1/users/me", "/api/v1/me/labels", f"/api/v1/projects/{project.id}/export?format=jsonl",
                 "/api/v1/projects/999999"):
        response = client.get(path, headers=headers)
        assert response.headers.get_list("cache-control") == ["no-store"], (path, response.status_code)
    read = client.get(f"/api/v1/projects/{project.id}", headers=headers)
    assert read.headers["cache-control"] == "no-store" and read.headers["etag"]
    # The ETag still makes a PATCH conditional.
    patched = client.patch(f"/api/v1/projects/{project.id}", headers={**headers, "If-Match": read.headers["etag"]},
                           json={"description": "kept in step"})
    assert patched.status_code == 200 and patched.headers["cache-control"] == "no-store"
    # A drawing of a figure says itself how long it may be kept: tests/figures/test_service.py.
