"""A browser session unused for STEPWISE_SESSION_IDLE_MINUTES ends, though its 12 hours have not."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from app.db import session_scope
from app.models import AuthSession, Project, utcnow
from app.projects.members import add_member
from tests.conftest import browser_login, make_project, make_user

UNATTENDED = {"X-Stepwise-Unattended": "1"}


@pytest.fixture
def idle_30(client):  # type: ignore[no-untyped-def]
    client.app.state.settings = client.app.state.settings.model_copy(update={"session_idle_minutes": 30})
    return client


def _last_seen(session_factory) -> datetime:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalar(select(AuthSession.last_seen_at))


def _unused_for(session_factory, minutes: int) -> datetime:  # type: ignore[no-untyped-def]
    then = utcnow() - timedelta(minutes=minutes)
    with session_scope(session_factory) as session:
        session.execute(update(AuthSession).values(last_seen_at=then))
    return then


def test_a_session_unused_too_long_ends_and_one_in_use_goes_on(idle_30, session_factory) -> None:  # type: ignore[no-untyped-def]
    client = idle_30
    make_user(session_factory, "lena", "labeler")
    project = make_project(session_factory)
    csrf = browser_login(client, "lena")
    then = _unused_for(session_factory, 29)
    assert client.get("/label/stats").status_code == 200
    assert _last_seen(session_factory) > then + timedelta(minutes=28), "used: the clock starts again"

    _unused_for(session_factory, 31)
    page = client.get("/label/stats", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/label/stats"
    assert client.get("/api/v1/me/stats").status_code == 401
    hot = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers={"X-CSRF-Token": csrf})
    assert hot.status_code == 401, "the labeling hot path reads the session past the ORM: the same rule"

    # The next login anywhere sweeps it away.
    browser_login(client, "lena")
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(AuthSession)) == 1


def test_a_pages_own_polls_do_not_keep_an_unused_session_going(idle_30, session_factory) -> None:  # type: ignore[no-untyped-def]
    client = idle_30
    make_user(session_factory, "lena", "labeler")
    project = make_project(session_factory)
    csrf = browser_login(client, "lena")
    then = _unused_for(session_factory, 20)
    with session_scope(session_factory) as session:
        add_member(session, session.get(Project, project.id), "lena")
    polled = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers={"X-CSRF-Token": csrf, **UNATTENDED})
    assert polled.status_code == 200 and polled.json()["task"] is None, polled.text
    assert client.get("/api/v1/me/stats", headers=UNATTENDED).status_code == 200
    assert _last_seen(session_factory) == then
    _unused_for(session_factory, 31)
    assert client.get("/api/v1/me/stats", headers=UNATTENDED).status_code == 401


def test_zero_minutes_keeps_a_session_until_it_expires(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    client.app.state.settings = client.app.state.settings.model_copy(update={"session_idle_minutes": 0})
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    _unused_for(session_factory, 11 * 60)
    assert client.get("/label/stats").status_code == 200


def test_the_default_is_two_hours(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    assert client.app.state.settings.session_idle_minutes == 120
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    _unused_for(session_factory, 119)
    assert client.get("/label/stats").status_code == 200
    _unused_for(session_factory, 121)
    assert client.get("/label/stats", follow_redirects=False).status_code == 303


def test_a_form_sent_after_the_session_ended_returns_to_its_page_after_the_login(idle_30, session_factory) -> None:  # type: ignore[no-untyped-def]
    client = idle_30
    make_user(session_factory, "boss", "admin")
    csrf = browser_login(client, "boss")
    _unused_for(session_factory, 31)
    # The form's own address answers POST only: the login goes back to the page it was on.
    sent = client.post("/admin/users", data={"csrf_token": csrf, "username": "x"}, follow_redirects=False,
                       headers={"Referer": "http://testserver/admin/users?created=3"})
    assert sent.status_code == 303 and sent.headers["location"] == "/login?next=/admin/users"
    elsewhere = client.post("/admin/users", data={"csrf_token": csrf}, follow_redirects=False,
                            headers={"Referer": "https://elsewhere.example/label/stats"})
    assert elsewhere.status_code == 303 and elsewhere.headers["location"] == "/login?next=/admin/users", \
        "another site's page is not where the login goes"


def test_an_idle_limit_under_five_minutes_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pydantic import ValidationError

    from app.config import Settings

    for minutes in (0, 5, 600):
        assert Settings(database_url=f"sqlite:///{tmp_path}/s.db", STEPWISE_SESSION_IDLE_MINUTES=minutes).session_idle_minutes == minutes
    for minutes in (1, 4, -1):
        with pytest.raises(ValidationError):
            Settings(database_url=f"sqlite:///{tmp_path}/s.db", STEPWISE_SESSION_IDLE_MINUTES=minutes)
