"""Pausing labeling in a project: no new task is handed out, a task in hand is finished and
submitted, the labeler is told why, and resuming serves again; by page and API, audited."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.db import session_scope
from app.labeling.queue import PAUSED
from app.models import AuditEvent
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user


def _next(client, project, headers):  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _submit(client, headers, task):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers,
                       json={"idempotency_key": f"key-{task['assignment_id']:06d}",
                             "ratings": [{"rating": 1}] * len(task["solution"]["steps"]),
                             "finish_reason": "solution", "total_time_ms": 1000})


def test_a_paused_project_hands_out_nothing_new_and_finishes_what_is_in_hand(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    make_user(session_factory, "max", "manager")
    ann, bob, boss = (api_headers(client, name) for name in ("ann", "bob", "max"))
    in_hand = _next(client, project, ann)["task"]

    paused = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"paused": True})
    assert paused.status_code == 200 and paused.json()["paused"] and paused.json()["paused_at"]
    refused = _next(client, project, bob)
    assert (refused["task"], refused["reason"]) == (None, PAUSED)
    # Ann's lease is hers to finish: served again, and its submit is taken.
    assert _next(client, project, ann)["task"]["assignment_id"] == in_hand["assignment_id"]
    assert _submit(client, ann, in_hand).status_code == 200
    assert _next(client, project, ann)["reason"] == PAUSED
    # Paused again (another tab): since the first time still.
    again = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"paused": True}).json()
    assert again["paused_at"] == paused.json()["paused_at"]

    resumed = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"paused": False}).json()
    assert (resumed["paused"], resumed["paused_at"]) == (False, None)
    assert _next(client, project, bob)["task"] is not None
    with session_scope(session_factory) as session:
        changes = [e.details for e in session.scalars(
            select(AuditEvent).where(AuditEvent.action == "project.settings_changed").order_by(AuditEvent.id))]
    assert changes == [{"paused": [False, True]}, {"paused": [True, False]}]


def test_the_overview_pauses_and_resumes_and_the_labeler_is_told(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    csrf = browser_login(client, "max")
    overview = client.get(f"/manage/projects/{project.id}").text
    assert "Pause labeling" in overview and "Labeling is paused" not in overview
    assert client.post(f"/manage/projects/{project.id}/pause", data={"csrf_token": "forged", "paused": "true"},
                       follow_redirects=False).status_code == 403
    done = client.post(f"/manage/projects/{project.id}/pause", data={"csrf_token": csrf, "paused": "true"},
                       follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/manage/projects/{project.id}#pause"
    shown = client.get(f"/manage/projects/{project.id}").text
    assert re.search(r"<strong>Labeling is paused</strong> since \d{4}-\d\d-\d\d \d\d:\d\d UTC", shown)
    assert "Resume labeling" in shown
    assert re.search(r">paused</span>", client.get("/manage/projects").text)
    browser_login(client, "rae")
    read_only = client.get(f"/manage/projects/{project.id}").text
    assert "Labeling is paused" in read_only and "Resume labeling" not in read_only
    browser_login(client, "ann")
    assert PAUSED in client.get("/label").text
    csrf = browser_login(client, "max")
    client.post(f"/manage/projects/{project.id}/pause", data={"csrf_token": csrf, "paused": "false"})
    browser_login(client, "ann")
    assert PAUSED not in client.get("/label").text


def test_a_lease_that_ran_out_in_a_paused_project_comes_back_to_its_labeler(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # The page that comes back to a tab left open asks next-task: renew and a late submit took
    # the lease, but next-task said "paused" and the started solution was never shown again.
    from datetime import timedelta

    from app.labeling.task_handles import assignment_of
    from app.models import Assignment, utcnow

    project = make_project(session_factory, overlap=1, lease_minutes=1)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    make_user(session_factory, "max", "manager")
    ann, bob, boss = (api_headers(client, name) for name in ("ann", "bob", "max"))
    started = _next(client, project, ann)["task"]
    assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"paused": True}).status_code == 200
    with session_scope(session_factory) as session:
        session.get(Assignment, assignment_of(session, started["assignment_id"])).expires_at = utcnow() - timedelta(minutes=5)
    back = _next(client, project, ann)["task"]
    assert back is not None and back["assignment_id"] == started["assignment_id"]
    assert back["solution"]["id"] == started["solution"]["id"]
    assert _next(client, project, bob)["reason"] == PAUSED, "nothing new for anyone else"
    assert _submit(client, ann, back).status_code == 200
    assert _next(client, project, ann)["reason"] == PAUSED
