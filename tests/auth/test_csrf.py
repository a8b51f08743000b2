"""Every state-changing request from a browser session carries the session's CSRF token."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.deps import CSRF_HEADER
from app.models import Project, User
from tests.auth.route_table import UNSAFE, endpoints
from tests.conftest import browser_login, make_project, make_user

# The login form is the one POST made before there is a session (it has its own token).
BEFORE_LOGIN = {"/login"}


def _state(session_factory) -> tuple:  # type: ignore[no-untyped-def]
    with session_factory() as session:
        projects = session.execute(select(Project.name, Project.overlap, Project.description)).all()
        users = session.execute(select(User.username, User.role, User.is_active)).all()
        return sorted(projects), sorted(users)


@pytest.fixture
def admin_page(client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "ann", "labeler")
    make_project(session_factory, "algebra")
    return browser_login(client, "boss")


@pytest.mark.parametrize("sent", [None, "", "wrong-token"])
def test_every_page_post_without_the_right_token_is_refused_and_changes_nothing(
    client, app, session_factory, admin_page, sent  # type: ignore[no-untyped-def]
) -> None:
    with session_factory() as session:
        project_id = session.scalar(select(Project.id))
        user_id = session.scalar(select(User.id).where(User.username == "ann"))
    ids = {"project_id": project_id, "user_id": user_id}
    before = _state(session_factory)
    posts = [
        e for e in endpoints(app)
        if e.method in UNSAFE and not e.is_api and e.path not in BEFORE_LOGIN
    ]
    assert {"/manage/projects", "/admin/users", "/logout"} <= {e.path for e in posts}
    for endpoint in posts:
        form = {
            "name": "sneaky", "overlap": "5", "description": "changed", "username": "sneaky",
            "role": "admin", "password": "long enough password", "is_active": "false",
        }
        if sent is not None:
            form["csrf_token"] = sent
        response = client.request(
            endpoint.method, endpoint.url(ids), data=form, follow_redirects=False
        )
        assert response.status_code == 403, f"{endpoint} answered {response.status_code}"
        assert "stale or was not sent by this site" in response.text
    assert _state(session_factory) == before
    assert client.get("/manage/projects", follow_redirects=False).status_code == 200, "still logged in"


def test_api_calls_with_a_session_cookie_need_the_csrf_header(client, session_factory, admin_page) -> None:  # type: ignore[no-untyped-def]
    refused = client.post("/api/v1/projects", json={"name": "geometry"})
    assert refused.status_code == 403
    assert CSRF_HEADER in refused.json()["detail"]
    wrong = client.post("/api/v1/projects", json={"name": "geometry"}, headers={CSRF_HEADER: "nope"})
    assert wrong.status_code == 403
    assert [p[0] for p in _state(session_factory)[0]] == ["algebra"]
    ok = client.post("/api/v1/projects", json={"name": "geometry"}, headers={CSRF_HEADER: admin_page})
    assert ok.status_code == 201
