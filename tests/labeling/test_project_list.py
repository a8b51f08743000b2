"""The labeler's project list: what waits in each project for them, not for anyone."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from app.db import session_scope
from app.models import Assignment, AssignmentStatus, Role, utcnow
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.quality.conftest import labeled_record
from tests.imports.conftest import import_bytes, jsonl


def _row(client, project) -> str:  # type: ignore[no-untyped-def]
    html = client.get("/label").text
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    [row] = [r for r in rows if f"<strong>{project.name}</strong>" in r]
    return " ".join(row.split())


def _for_you(row: str) -> str:
    return re.search(r'data-label="For you">([^<]*)<', row).group(1)  # type: ignore[union-attr]


def _next(client, project, headers) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _submit(client, headers, task) -> None:  # type: ignore[no-untyped-def]
    steps = task["solution"]["steps"]
    response = client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={"idempotency_key": f"k{task['assignment_id']}", "ratings": [{"rating": 1}] * len(steps),
              "finish_reason": "solution", "total_time_ms": 1000},
    )
    assert response.status_code == 200, response.text


def test_what_waits_for_other_labelers_is_not_offered(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", Role.labeler)
    make_user(session_factory, "omar", Role.labeler)
    lena = api_headers(client, "lena")
    _submit(client, lena, _next(client, project, lena)["task"])

    browser_login(client, "lena")
    row = _row(client, project)
    assert _for_you(row) == "0"
    assert "Start labeling" not in row and f'href="/label/{project.id}"' not in row
    assert "None for you now" in row and "1 label waits for other labelers" in row

    browser_login(client, "omar")
    row = _row(client, project)
    assert _for_you(row) == "1" and "Start labeling" in row


def test_a_task_in_progress_is_continued(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", Role.labeler)
    assert _next(client, project, api_headers(client, "lena"))["task"] is not None
    browser_login(client, "lena")
    row = _row(client, project)
    assert "Continue labeling" in row and "Start labeling" not in row


def test_a_lease_that_ran_out_is_offered_to_others(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # next-task puts it back when asked: the list must not say "none for you" meanwhile.
    project = make_project(session_factory)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", Role.labeler)
    make_user(session_factory, "omar", Role.labeler)
    assert _next(client, project, api_headers(client, "lena"))["task"] is not None
    browser_login(client, "omar")
    assert "Queue empty" in _row(client, project)
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
    row = _row(client, project)
    assert _for_you(row) == "1" and "Start labeling" in row
    assert _next(client, project, api_headers(client, "omar"))["task"] is not None


def test_a_check_item_handed_back_counts_as_an_ordinary_task_does(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Left out, "hand back, look at the list" would tell a check item from an ordinary task.
    counts = {}
    for qc_rate, name in ((1.0, "checked"), (0.0, "plain")):
        project = make_project(session_factory, name=name, qc_rate=qc_rate)
        import_bytes(session_factory, project, jsonl([
            labeled_record("reference", f"Problem {name}", ["a", "b"], [1, 1], qc=True)]))
        if qc_rate == 0:
            add_solutions(session_factory, project, 1)
        labeler = f"l-{name}"
        make_user(session_factory, labeler, Role.labeler)
        headers = api_headers(client, labeler)
        task = _next(client, project, headers)["task"]
        assert client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=headers).status_code == 204
        browser_login(client, labeler)
        row = _row(client, project)
        counts[name] = (_for_you(row), "Start labeling" in row)
    assert counts["checked"] == counts["plain"] == ("1", True)


def test_a_retired_labeler_is_told_so_and_gets_no_task_where_nothing_is_checked(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 2)
    lena = make_user(session_factory, "lena", Role.labeler)
    make_user(session_factory, "boss", Role.manager)
    headers = api_headers(client, "lena")
    held = _next(client, project, headers)["task"]
    retired = client.post(f"/api/v1/projects/{project.id}/screening/{lena.id}",
                          headers=api_headers(client, "boss"), json={"decision": "retire"})
    assert retired.status_code == 200 and retired.json()["status"] == "retired"
    answer = _next(client, project, headers)
    assert answer["task"] is None and "retired" in answer["reason"]
    with session_scope(session_factory) as session:
        assert session.query(Assignment).filter_by(status=AssignmentStatus.waiting).count() == 2
    browser_login(client, "lena")
    row = _row(client, project)
    assert "No tasks for you" in row and "retired you" in row and "Start labeling" not in row
    assert held is not None


def test_a_task_in_hand_in_a_paused_project_says_the_project_is_paused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # "Continue labeling" came first and alone: nothing said that no task follows the one in hand.
    project = make_project(session_factory)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "lena", Role.labeler)
    make_user(session_factory, "boss", Role.manager)
    assert _next(client, project, api_headers(client, "lena"))["task"] is not None
    paused = client.patch(f"/api/v1/projects/{project.id}", headers=api_headers(client, "boss"), json={"paused": True})
    assert paused.status_code == 200
    browser_login(client, "lena")
    row = _row(client, project)
    assert "Continue labeling" in row and '<span class="badge warn">paused</span>' in row
    assert "A manager has paused labeling in this project" in row
    assert "You can still finish the task you hold." in row
