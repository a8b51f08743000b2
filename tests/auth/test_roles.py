"""Roles on every route: enumerated from the app, so a route added without a guard fails here.

A route is open to labelers only if it is listed below; every other page and API route must
answer 403 to a logged-in labeler. Adding a labeler route means adding it here, on purpose.
"""

from __future__ import annotations

import pytest

from app.deps import CSRF_HEADER
from tests.auth.route_table import UNSAFE, Endpoint, endpoints
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl

# Pages any logged-in user (or nobody) may open: the labeler's area (and below) and the door.
LABELER_PAGES = ("/label", "/account")
PUBLIC_PAGES = {"/", "/login", "/logout"}
# For probes and Prometheus, outside the login: /metrics has its own guard (tests/ops).
OPERATIONS = {"/healthz", "/readyz", "/metrics"}
# API routes a labeler needs: their token, their tasks, their own stats and labels, the project
# list, and the figures of the problems they label.
LABELER_API = {
    ("POST", "/api/v1/auth/tokens"),
    ("DELETE", "/api/v1/auth/tokens/current"),
    ("GET", "/api/v1/auth/tokens"),
    ("DELETE", "/api/v1/auth/tokens/{token_id}"),
    ("GET", "/api/v1/users/me"),
    ("POST", "/api/v1/users/me/password"),
    ("GET", "/api/v1/me/stats"),
    ("GET", "/api/v1/me/labels"),
    ("GET", "/api/v1/me/skips"),
    ("DELETE", "/api/v1/me/skips/{solution_id}"),
    ("GET", "/api/v1/me/labels/{label_id}"),
    ("POST", "/api/v1/me/labels/{label_id}/corrections"),
    ("GET", "/api/v1/projects"),
    ("GET", "/api/v1/projects/{project_id}"),
    ("POST", "/api/v1/projects/{project_id}/tasks/next"),
    ("POST", "/api/v1/projects/{project_id}/guidelines/read"),
    ("GET", "/api/v1/problems/{problem_id}/figures/{index}"),
}
LABELER_API_PREFIXES = ("/api/v1/assignments/",)
# Routes that act on what labelers reported: managers (and admins) only, researchers may read.
REPORT_ACTIONS = {
    ("POST", "/api/v1/projects/{project_id}/reports/{report_id}/dismiss"),
    ("POST", "/api/v1/projects/{project_id}/problems/{problem_id}/retire"),
    ("POST", "/api/v1/projects/{project_id}/problems/{problem_id}/restore"),
    ("POST", "/manage/projects/{project_id}/reports/{report_id}/dismiss"),
    ("POST", "/manage/projects/{project_id}/problems/{problem_id}/retire"),
    ("POST", "/manage/projects/{project_id}/problems/{problem_id}/restore"),
    ("PUT", "/api/v1/projects/{project_id}/labels/{label_id}/gold"),
    ("DELETE", "/api/v1/projects/{project_id}/labels/{label_id}/gold"),
    ("POST", "/manage/projects/{project_id}/labels/{label_id}/gold"),
}
REPORT_READS = {
    ("GET", "/api/v1/projects/{project_id}/reports"),
    ("GET", "/api/v1/projects/{project_id}/labels/{label_id}"),
    ("GET", "/manage/projects/{project_id}/reports"),
    ("GET", "/manage/projects/{project_id}/reports/download"),
    ("GET", "/manage/projects/{project_id}/labels/{label_id}"),
    ("GET", "/manage/projects/{project_id}/labels"),
}
ADMIN_PAGE_PREFIXES = ("/admin",)
ADMIN_API_PREFIXES = ("/api/v1/users", "/api/v1/api-tokens")

CSRF_REFUSAL = "stale or was not sent by this site"


def _open_to_labelers(endpoint: Endpoint) -> bool:
    method, path = endpoint.method, endpoint.path
    if endpoint.is_api:
        return (method, path) in LABELER_API or path.startswith(LABELER_API_PREFIXES)
    return path in PUBLIC_PAGES | OPERATIONS or any(path == p or path.startswith(p + "/") for p in LABELER_PAGES)


def _call(client, endpoint: Endpoint, ids: dict[str, int], *, headers=None, csrf=None):  # type: ignore[no-untyped-def]
    """Call as a browser (cookie, with the CSRF token a real form sends) or with a token."""
    url = endpoint.url(ids)
    if endpoint.method not in UNSAFE:
        return client.request(endpoint.method, url, headers=headers, follow_redirects=False)
    if endpoint.is_api:
        if csrf is not None:
            headers = {**(headers or {}), CSRF_HEADER: csrf}
        return client.request(endpoint.method, url, headers=headers, json={})
    return client.request(
        endpoint.method, url, data={"csrf_token": csrf or ""}, follow_redirects=False
    )


@pytest.fixture
def ids(session_factory) -> dict[str, int]:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    other = make_user(session_factory, "max", "manager")
    make_user(session_factory, "boss", "admin")
    return {"project_id": project.id, "user_id": other.id}


def test_the_labeler_lists_name_routes_that_exist(app) -> None:  # type: ignore[no-untyped-def]
    served = {(e.method, e.path) for e in endpoints(app)}
    assert LABELER_API <= served, f"listed but no longer served: {LABELER_API - served}"


def test_every_page_for_other_roles_refuses_a_labeler(client, app, session_factory, ids) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "ann")
    checked = []
    for endpoint in endpoints(app):
        if endpoint.is_api or _open_to_labelers(endpoint):
            continue
        response = _call(client, endpoint, ids, csrf=csrf)
        assert response.status_code == 403, f"{endpoint} gave a labeler {response.status_code}"
        assert CSRF_REFUSAL not in response.text, f"{endpoint}: refused for the form, not the role"
        checked.append(endpoint.path)
    assert {"/manage/projects", "/admin/users"} <= set(checked)
    assert {path for _, path in REPORT_ACTIONS | REPORT_READS if not path.startswith("/api/")} <= set(checked)


def test_every_api_route_for_other_roles_refuses_a_labeler_token(client, app, session_factory, ids) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    checked = []
    for endpoint in endpoints(app):
        if not endpoint.is_api or _open_to_labelers(endpoint):
            continue
        response = _call(client, endpoint, ids, headers=headers)
        assert response.status_code == 403, f"{endpoint} gave a labeler {response.status_code}"
        checked.append((endpoint.method, endpoint.path))
    assert {("POST", "/api/v1/projects"), ("GET", "/api/v1/users")} <= set(checked)
    assert {e for e in REPORT_ACTIONS | REPORT_READS if e[1].startswith("/api/")} <= set(checked)


def test_every_api_route_for_other_roles_refuses_a_labelers_browser_session(client, app, session_factory, ids) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    csrf = browser_login(client, "ann")
    for endpoint in endpoints(app):
        if endpoint.is_api and not _open_to_labelers(endpoint):
            response = _call(client, endpoint, ids, csrf=csrf)
            assert response.status_code == 403, f"{endpoint} gave a labeler {response.status_code}"


def test_a_researcher_reads_reports_but_does_not_act_on_them(client, app, session_factory, ids) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rae", "researcher")
    csrf = browser_login(client, "rae")
    headers = api_headers(client, "rae")
    served = {(e.method, e.path): e for e in endpoints(app)}
    assert REPORT_ACTIONS | REPORT_READS <= set(served)
    for key in REPORT_ACTIONS | REPORT_READS:
        endpoint = served[key]
        if endpoint.is_api:
            response = _call(client, endpoint, ids, headers=headers)
        else:
            response = _call(client, endpoint, ids, csrf=csrf)
        if key in REPORT_ACTIONS:
            assert response.status_code == 403, f"{endpoint} gave a researcher {response.status_code}"
            assert CSRF_REFUSAL not in response.text
        else:
            # No report or label 1 exists: a 404 says the role check let the researcher in.
            assert response.status_code in (200, 404), f"{endpoint} gave a researcher {response.status_code}"


def test_every_admin_route_refuses_a_manager(client, app, session_factory, ids) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    headers = api_headers(client, "max")
    checked = 0
    for endpoint in endpoints(app):
        path = endpoint.path
        if path.startswith(ADMIN_PAGE_PREFIXES):
            response = _call(client, endpoint, ids, csrf=csrf)
        elif path.startswith(ADMIN_API_PREFIXES) and not path.startswith("/api/v1/users/me"):
            response = _call(client, endpoint, ids, headers=headers)
        else:
            continue
        assert response.status_code == 403, f"{endpoint} gave a manager {response.status_code}"
        checked += 1
    assert checked >= 7


def test_a_labeler_reaches_only_their_own_assignments(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", overlap=2)
    problem = {"problem": "What is $1+1$?", "answer": "2"}
    import_bytes(session_factory, project, jsonl([problem]), "math")
    import_bytes(session_factory, project, jsonl([{**problem, "steps": ["1+1=2", "# Answer\n\n2"]}]), "solutions")
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    label = {"idempotency_key": "bob-steals-1", "ratings": [{"rating": 1}, {"rating": 1}],
             "finish_reason": "solution", "total_time_ms": 10}
    stolen = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=bob, json=label)
    assert stolen.status_code == 404
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=bob).status_code == 404
    assert client.get(f"/api/v1/projects/{project.id}/progress", headers=bob).status_code == 403
    own = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=ann, json={**label, "idempotency_key": "ann-own-1"})
    assert own.status_code == 200


def test_ids_past_what_a_column_holds_are_refused_not_crashed(client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "root", "admin")
    headers = api_headers(client, "root")
    huge = 2**64
    for method, path in (
        ("get", f"/api/v1/projects/{huge}"),
        ("patch", f"/api/v1/users/{huge}"),
        ("post", f"/api/v1/assignments/{huge}/submit"),
        ("get", f"/api/v1/projects/{huge}/export?format=trl"),
    ):
        response = client.request(method.upper(), path, headers=headers, json={})
        assert response.status_code == 422, (path, response.status_code, response.text)
