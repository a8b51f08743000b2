"""A caller the route turns away hears that first, even when the body was refused before the
route's login and role checks could run (FastAPI parses JSON before any dependency)."""

from __future__ import annotations

from sqlalchemy import select

from app.db import session_scope
from app.models import Project
from tests.conftest import api_headers, browser_login, make_project, make_user

JSON = {"content-type": "application/json"}
BROKEN = '{"description": "never closed'
WITH_NUL = '{"description": "a\\u0000b"}'
# Python refuses to read an integer of over 4,300 digits: FastAPI answers 400 for it.
HUGE_NUMBER = '{"overlap": ' + "9" * 5000 + "}"


def test_an_unreadable_body_is_answered_after_the_login_and_role_checks(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, description="As it was.")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "lena", "labeler")
    url = f"/api/v1/projects/{project.id}"
    for body in (BROKEN, WITH_NUL, HUGE_NUMBER):
        nobody = client.patch(url, content=body, headers=JSON)
        assert nobody.status_code == 401, (body, nobody.text)
        assert nobody.headers["www-authenticate"] == "Bearer"
        unknown = client.patch(url, content=body, headers={**JSON, "authorization": "Bearer nope"})
        assert unknown.status_code == 401 and unknown.json()["detail"] == "unknown, revoked or expired API token"
        labeler = client.patch(url, content=body, headers={**JSON, **api_headers(client, "lena")})
        assert labeler.status_code == 403, (body, labeler.text)
        assert labeler.json()["detail"] == "this needs the role manager or admin; you are labeler"
        manager = client.patch(url, content=body, headers={**JSON, **api_headers(client, "max")})
        assert manager.status_code in (400, 422), (body, manager.text)
    with session_scope(session_factory) as session:
        assert session.scalar(select(Project.description)) == "As it was."


def test_a_labelers_route_checks_the_login_only(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    url = "/api/v1/assignments/1/submit"
    assert client.post(url, content=BROKEN, headers=JSON).status_code == 401
    # Any role may label: the body's own fault is what a logged-in caller hears.
    answer = client.post(url, content=BROKEN, headers={**JSON, **api_headers(client, "lena")})
    assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "body"


def test_a_public_route_judges_the_body_alone(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    answer = client.post("/api/v1/auth/tokens", content=BROKEN, headers=JSON)
    assert answer.status_code == 422 and "not valid JSON" in answer.json()["detail"]


def test_a_page_form_with_a_nul_sends_a_visitor_to_log_in_first(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "max", "manager")
    form = {"description": "a\x00b", "overlap": "1"}
    settings = f"/manage/projects/{project.id}/settings"
    nobody = client.post(settings, data=form, follow_redirects=False)
    assert nobody.status_code == 303
    assert nobody.headers["location"] == f"/login?next=/manage/projects/{project.id}/settings"
    csrf = browser_login(client, "lena")
    labeler = client.post(settings, data={**form, "csrf_token": csrf})
    # The labeler's own menu stays on the refusal page.
    assert labeler.status_code == 403 and "you are labeler" in labeler.text and "Log out" in labeler.text
    csrf = browser_login(client, "max")
    manager = client.post(settings, data={**form, "csrf_token": csrf})
    assert manager.status_code == 422 and "NUL character" in manager.text


def test_a_page_form_whose_body_cannot_be_read_sends_a_visitor_to_log_in_first(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # multipart without its boundary: Starlette cannot read the form, on a route with no form fields.
    unreadable = {"content-type": "multipart/form-data"}
    nobody = client.post("/logout", content=b"x", headers=unreadable, follow_redirects=False)
    assert nobody.status_code == 303 and nobody.headers["location"] == "/login?next=/logout"
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    lena = client.post("/logout", content=b"x", headers=unreadable, follow_redirects=False)
    assert lena.status_code == 400, lena.text
    assert client.get("/label/stats", follow_redirects=False).status_code == 200, "still logged in"
