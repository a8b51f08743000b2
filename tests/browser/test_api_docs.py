"""The API docs page in Chromium: Swagger UI from the platform, under the platform's own CSP."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from app.projects.guidelines import guidelines_version
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
# Registered before any page script runs, so that no violation can slip past it.
RECORD_CSP_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def test_api_docs_render_every_operation_without_csp_violations(page: Page) -> None:
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    page.add_init_script(RECORD_CSP_VIOLATIONS)

    schema = page.request.get("/api/v1/openapi.json").json()
    operations = sum(1 for item in schema["paths"].values() for method in item if method in HTTP_METHODS)
    assert operations > 20

    response = page.goto("/api/v1/docs")
    assert response is not None and response.status == 200
    assert "script-src 'self';" in response.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Stepwise")
    expect(page.locator(".opblock")).to_have_count(operations)
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/projects/{project_id}/tasks/next")).to_be_visible()
    screenshot(page, "api_docs.png")

    assert page.evaluate("window.cspViolations") == []
    assert console_errors == []


def test_try_it_out_writes_as_the_logged_in_user(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # A write on the login cookie needs the session's CSRF token: without it every POST was a 403.
    project = make_project(session_factory, "docs", guidelines="Read me.")
    make_user(session_factory, "lena", "labeler")
    login(page, "lena", "/api/v1/docs")
    path = re.compile(r"^/api/v1/projects/\{project_id\}/guidelines/read$")
    operation = page.locator(".opblock-post", has=page.locator(".opblock-summary-path", has_text=path))
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    operation.get_by_placeholder("project_id").fill(str(project.id))
    operation.locator("textarea.body-param__text").fill(json.dumps({"version": guidelines_version("Read me.")}))
    operation.get_by_role("button", name="Execute").click()
    expect(operation.locator(".live-responses-table tbody .response-col_status").first).to_have_text(re.compile(r"^20[01]"))
