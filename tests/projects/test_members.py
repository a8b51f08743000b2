"""Project membership: a labeler sees, is served and submits only in the projects open to all
and those they are a member of; managers add and remove members by API, page and CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.deps import CSRF_HEADER
from app.labeling.task_handles import assignment_of
from app.models import Assignment, AssignmentStatus
from tests.auth.route_table import UNSAFE, endpoints
from tests.auth.test_roles import LABELER_API, LABELER_API_PREFIXES, LABELER_PAGES
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user

STEPWISE = str(Path(sys.executable).with_name("stepwise"))
LABEL = {"idempotency_key": "label-key-1", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution", "total_time_ms": 900}
# Every placeholder a labeler's route may take, and the ones it fills from the setup.
ID_PARAMS = ("project_id", "assignment_id", "label_id", "problem_id")


def _labeler_routes_with_ids(app):  # type: ignore[no-untyped-def]
    routes = []
    for endpoint in endpoints(app):
        path = endpoint.path
        for_labelers = (
            (endpoint.method, path) in LABELER_API or path.startswith(LABELER_API_PREFIXES)
            if endpoint.is_api
            else any(path.startswith(p + "/") for p in LABELER_PAGES)
        )
        if for_labelers and any("{" + name in path for name in ID_PARAMS):
            routes.append(endpoint)
    return routes


def _call(client, endpoint, ids, headers, csrf):  # type: ignore[no-untyped-def]
    url = endpoint.url(ids)
    if endpoint.method not in UNSAFE:
        return client.request(endpoint.method, url, headers=headers, follow_redirects=False)
    if not endpoint.is_api:
        return client.request(endpoint.method, url, data={"csrf_token": csrf, "version": "0" * 16},
                              follow_redirects=False)
    if url.endswith(("/submit", "/corrections")):
        body = {**LABEL, "idempotency_key": f"key-{url}"[-64:]}
    elif url.endswith("/guidelines/read"):
        body = {"version": "0" * 16}
    else:
        body = None
    return client.request(endpoint.method, url, headers=headers, json=body)


@pytest.fixture
def closed(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "secret", open_to_all=False, overlap=1)
    add_solutions(session_factory, project, 4)
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "mia", "labeler")
    make_user(session_factory, "otto", "labeler")
    return project


def _add(client, project_id: int, username: str, manager) -> int:  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project_id}/members", headers=manager, json={"username": username})
    assert response.status_code == 201, response.text
    return response.json()["user_id"]


def test_a_removed_member_gets_404_on_every_labeler_route_that_takes_an_id(client, app, closed) -> None:  # type: ignore[no-untyped-def]
    manager = api_headers(client, "max")
    mia_id = _add(client, closed.id, "mia", manager)
    mia = api_headers(client, "mia")
    csrf = browser_login(client, "mia")
    first = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=mia).json()["task"]
    label = client.post(f"/api/v1/assignments/{first['assignment_id']}/submit", headers=mia, json=LABEL).json()
    assert "label_id" in label, label
    held = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=mia).json()["task"]
    ids = {
        "project_id": closed.id,
        "assignment_id": held["assignment_id"],
        "label_id": label["label_id"],
        "problem_id": held["problem"]["id"],
        "index": 0,
    }
    routes = _labeler_routes_with_ids(app)
    paths = {e.path for e in routes}
    assert {
        "/api/v1/projects/{project_id}/tasks/next",
        "/api/v1/assignments/{assignment_id}/submit",
        "/api/v1/me/labels/{label_id}",
        "/label/{project_id}",
        "/label/labels/{label_id}",
    } <= paths, paths

    assert client.delete(f"/api/v1/projects/{closed.id}/members/{mia_id}", headers=manager).status_code == 204
    # Both ways in: the bearer token, and the browser session with its CSRF header.
    for headers in (mia, {CSRF_HEADER: csrf}):
        for endpoint in routes:
            response = _call(client, endpoint, ids, headers if endpoint.is_api else None, csrf)
            assert response.status_code == 404, f"{endpoint} gave a removed member {response.status_code}"
    assert client.get("/api/v1/me/labels", headers=mia).json()["total"] == 0

    # Let back in, the same calls reach the label again: the 404s were the membership's.
    _add(client, closed.id, "mia", manager)
    assert client.get(f"/api/v1/me/labels/{label['label_id']}", headers=mia).status_code == 200
    assert client.get(f"/label/labels/{label['label_id']}").status_code == 200
    assert client.get(f"/api/v1/projects/{closed.id}", headers=mia).status_code == 200
    assert client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=mia).json()["task"] is not None


def test_removing_a_member_puts_their_lease_back_and_refuses_their_submit(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    manager = api_headers(client, "max")
    mia_id = _add(client, closed.id, "mia", manager)
    mia = api_headers(client, "mia")
    task = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=mia).json()["task"]
    assert client.delete(f"/api/v1/projects/{closed.id}/members/{mia_id}", headers=manager).status_code == 204
    with session_scope(session_factory) as session:
        slot = session.get(Assignment, assignment_of(session, task["assignment_id"]))
        assert (slot.status, slot.user_id, slot.expires_at) == (AssignmentStatus.waiting, None, None)
    late = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=mia, json=LABEL)
    assert late.status_code == 404
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=mia).status_code == 404
    assert client.delete(f"/api/v1/projects/{closed.id}/members/{mia_id}", headers=manager).status_code == 404


def test_labelers_see_open_projects_and_their_own(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "public")
    manager = api_headers(client, "max")
    _add(client, closed.id, "mia", manager)
    names = lambda who: sorted(p["name"] for p in client.get("/api/v1/projects", headers=who).json())  # noqa: E731
    assert names(api_headers(client, "mia")) == ["public", "secret"]
    otto = api_headers(client, "otto")
    assert names(otto) == ["public"]
    assert names(manager) == ["public", "secret"]
    assert client.get(f"/api/v1/projects/{closed.id}", headers=otto).status_code == 404
    refused = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=otto)
    assert refused.status_code == 404 and refused.json()["detail"] == f"no project with id {closed.id}"
    browser_login(client, "otto")
    page = client.get("/label").text
    assert "public" in page and "secret" not in page
    assert client.get(f"/label/{closed.id}").status_code == 404


def test_managers_and_researchers_label_anywhere(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rae", "researcher")
    for name in ("max", "rae"):
        response = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=api_headers(client, name))
        assert response.status_code == 200 and response.json()["task"] is not None


def test_researchers_read_members_and_standings_as_the_page_shows_them(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rae", "researcher")
    _add(client, closed.id, "mia", api_headers(client, "max"))
    researcher = api_headers(client, "rae")
    members = client.get(f"/api/v1/projects/{closed.id}/members", headers=researcher)
    assert members.status_code == 200 and [m["username"] for m in members.json()] == ["mia"]
    assert client.get(f"/api/v1/projects/{closed.id}/screening", headers=researcher).status_code == 200
    browser_login(client, "rae")
    assert "mia" in client.get(f"/manage/projects/{closed.id}").text
    refused = client.post(f"/api/v1/projects/{closed.id}/members", headers=researcher, json={"username": "otto"})
    assert refused.status_code == 403
    labeler = api_headers(client, "otto")
    assert client.get(f"/api/v1/projects/{closed.id}/members", headers=labeler).status_code == 403


def test_closing_a_project_puts_back_the_leases_of_labelers_outside_it(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    manager = api_headers(client, "max")
    assert client.patch(f"/api/v1/projects/{closed.id}", headers=manager, json={"open_to_all": True}).json()["open_to_all"]
    _add(client, closed.id, "mia", manager)
    mine = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=api_headers(client, "mia")).json()["task"]
    otto = api_headers(client, "otto")
    ottos = client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=otto).json()["task"]
    closing = client.patch(f"/api/v1/projects/{closed.id}", headers=manager, json={"open_to_all": False})
    assert closing.status_code == 200 and closing.json()["open_to_all"] is False
    with session_scope(session_factory) as session:
        status = dict(session.execute(select(Assignment.id, Assignment.status)).all())
        assert status[assignment_of(session, mine["assignment_id"])] == AssignmentStatus.leased
        assert status[assignment_of(session, ottos["assignment_id"])] == AssignmentStatus.waiting
    assert client.post(f"/api/v1/projects/{closed.id}/tasks/next", headers=otto).status_code == 404


def test_the_members_api_refuses_bad_requests(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    manager = api_headers(client, "max")
    url = f"/api/v1/projects/{closed.id}/members"
    assert client.get(url, headers=manager).json() == []
    _add(client, closed.id, "mia", manager)
    listed = client.get(url, headers=manager).json()
    assert [m["username"] for m in listed] == ["mia"] and listed[0]["added_at"]
    assert client.post(url, headers=manager, json={"username": "mia"}).status_code == 409
    assert client.post(url, headers=manager, json={"username": "nobody"}).status_code == 404
    manager_member = client.post(url, headers=manager, json={"username": "max"})
    assert manager_member.status_code == 422 and "only labelers" in manager_member.json()["detail"]
    assert client.post(url, headers=manager, json={}).status_code == 422
    assert client.post("/api/v1/projects/999/members", headers=manager, json={"username": "mia"}).status_code == 404
    assert client.get(url, headers=api_headers(client, "mia")).status_code == 403
    assert [m["username"] for m in client.get(url, headers=manager).json()] == ["mia"]


def test_a_new_project_is_open_unless_said_otherwise(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    manager = api_headers(client, "max")
    assert client.post("/api/v1/projects", headers=manager, json={"name": "a"}).json()["open_to_all"] is True
    closed = client.post("/api/v1/projects", headers=manager, json={"name": "b", "open_to_all": False})
    assert closed.json()["open_to_all"] is False


def test_the_manager_adds_and_removes_members_on_the_project_page(client, session_factory, closed) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    page = f"/manage/projects/{closed.id}"
    assert "members only" in client.get(page).text

    added = client.post(f"{page}/members", data={"csrf_token": csrf, "username": "mia"}, follow_redirects=False)
    assert added.status_code == 303
    shown = client.get(added.headers["location"]).text
    assert "mia is now a member." in shown and "Remove mia" in shown

    # Names are one name whatever their case; a message keeps the name as it is written.
    again = client.post(f"{page}/members", data={"csrf_token": csrf, "username": "MIA"})
    assert again.status_code == 409 and "User mia is already a member of" in again.text
    make_user(session_factory, "rae", "researcher")
    researcher = client.post(f"{page}/members", data={"csrf_token": csrf, "username": "Rae"})
    assert researcher.status_code == 422 and "User rae is a researcher, who sees every project" in researcher.text

    unknown = client.post(f"{page}/members", data={"csrf_token": csrf, "username": "nobody"})
    assert unknown.status_code == 404 and "No user named &#39;nobody&#39;" in unknown.text
    assert 'value="nobody"' in unknown.text
    forged = client.post(f"{page}/members", data={"csrf_token": "forged", "username": "otto"})
    assert forged.status_code == 403

    with session_scope(session_factory) as session:
        from app.models import User

        mia_id = session.scalar(select(User.id).where(User.username == "mia"))
    removed = client.post(f"{page}/members/{mia_id}/remove", data={"csrf_token": csrf}, follow_redirects=False)
    assert removed.status_code == 303
    shown = client.get(removed.headers["location"]).text
    assert "Remove mia" not in shown
    assert "mia is no longer a member. Their tasks in progress went back to the queue." in shown
    # Kept in the address after mia is added back, the notice is no longer true: not shown.
    client.post(f"{page}/members", data={"csrf_token": csrf, "username": "mia"})
    assert "no longer a member" not in client.get(removed.headers["location"]).text
    client.post(f"{page}/members/{mia_id}/remove", data={"csrf_token": csrf})
    # Removed again from a tab opened before: the page, saying so, not an error page.
    stale = client.post(f"{page}/members/{mia_id}/remove", data={"csrf_token": csrf})
    assert stale.status_code == 404
    assert '<div class="flash error" role="alert">Nothing changed: user mia is not a member of secret.</div>' in stale.text
    assert '<meta name="page-address" content="/manage/projects/' in stale.text

    opened = client.post(f"{page}/access", data={"csrf_token": csrf, "open_to_all": "true"}, follow_redirects=False)
    assert opened.status_code == 303 and "open to every labeler" in client.get(page).text
    assert "Every labeler may label this project now." in client.get(opened.headers["location"]).text
    closed_again = client.post(f"{page}/access", data={"csrf_token": csrf, "open_to_all": "false"}, follow_redirects=False)
    assert "Only members may label this project now" in client.get(closed_again.headers["location"]).text
    assert "Every labeler may label" not in client.get(opened.headers["location"]).text
    bad = client.post(f"{page}/access", data={"csrf_token": csrf, "open_to_all": "maybe"})
    assert bad.status_code == 422


@pytest.mark.parametrize("backend", ["sqlite"])
def test_members_from_the_command_line(closed, database_url, backend) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "DATABASE_URL": database_url}

    def stepwise(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([STEPWISE, "members", *args], env=env, capture_output=True, text=True, timeout=120)

    added = stepwise("add", "--project", "secret", "--username", "mia")
    assert added.returncode == 0 and "added mia to secret" in added.stdout, added.stderr
    assert stepwise("add", "--project", "secret", "--username", "mia").returncode == 1
    listed = stepwise("list", "--project", "secret")
    assert listed.stdout.split("\t")[1].strip() == "mia" and "members only" in listed.stderr
    unknown = stepwise("add", "--project", "secret", "--username", "nobody")
    assert unknown.returncode == 1 and "no user named 'nobody'" in unknown.stderr
    assert stepwise("remove", "--project", "nope", "--username", "mia").returncode == 1
    assert stepwise("remove", "--project", "secret", "--username", "mia").returncode == 0
    assert stepwise("list", "--project", "secret").stdout == ""
    assert stepwise("remove", "--project", "secret", "--username", "mia").returncode == 1
