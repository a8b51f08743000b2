"""Skipping a task: the solution goes to other labelers and never comes back to the one who
skipped it; a check item goes alike, a screening question cannot be skipped."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select

from app.db import session_scope
from app.labeling.task_handles import assignment_of
from app.models import Assignment, AssignmentStatus, Label, Skip
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.conftest import labeled_record


def _next(client, project, headers) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _skip(client, headers, task):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/assignments/{task['assignment_id']}/skip", headers=headers)


def _submit(client, headers, task):  # type: ignore[no-untyped-def]
    return client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={"idempotency_key": f"key-{task['assignment_id']:06d}",
              "ratings": [{"rating": 1}] * len(task["solution"]["steps"]),
              "finish_reason": "solution", "total_time_ms": 1000},
    )


def test_a_skipped_solution_goes_to_others_and_never_back(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    ids = add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    task = _next(client, project, ann)["task"]
    first = task["solution"]["id"]
    [second] = set(ids) - {first}
    assert _skip(client, ann, task).status_code == 204
    # Released, the slot is first in the queue again; ann is served the other solution.
    after = _next(client, project, ann)
    assert after["task"]["solution"]["id"] == second
    assert _submit(client, ann, after["task"]).status_code == 200
    assert _next(client, project, ann)["task"] is None, "the skipped solution is not served again"
    # The slot itself, under its own id, is bob's to take.
    taken = _next(client, project, bob)["task"]
    assert (taken["solution"]["id"], taken["assignment_id"]) == (first, task["assignment_id"])
    # The skip is no label, and it is gone from ann's hands: submit, renew and skip again refuse.
    for action in ("submit", "renew", "skip"):
        response = client.post(f"/api/v1/assignments/{task['assignment_id']}/{action}", headers=ann,
                               json={"idempotency_key": "late-0001", "ratings": [{"rating": 1}] * 3,
                                     "finish_reason": "solution", "total_time_ms": 1})
        assert response.status_code == 404, (action, response.text)
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label).where(Label.solution_id == first)) == 0
        skips = session.execute(select(Skip.user_id, Skip.solution_id, Skip.project_id)).all()
    assert [(s.solution_id, s.project_id) for s in skips] == [(first, project.id)]
    assert client.get("/api/v1/me/stats", headers=ann).json()["skipped"] == 1


def test_skips_show_in_the_for_you_count_and_the_managers_activity(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann = api_headers(client, "ann")
    assert _skip(client, ann, _next(client, project, ann)["task"]).status_code == 204
    browser_login(client, "ann")
    page = client.get("/label").text
    row = " ".join(next(r for r in re.findall(r"<tr>(.*?)</tr>", page, re.S) if project.name in r).split())
    assert re.search(r'data-label="For you">2<', row), row
    assert re.search(r'<h2>Skipped <span class="muted">· 1</span></h2>', client.get("/label/stats").text)
    # A labeler who skipped and labeled nothing is listed for the manager all the same.
    [activity] = client.get(f"/api/v1/projects/{project.id}/activity",
                            headers=api_headers(client, "boss")).json()["labelers"]
    assert (activity["username"], activity["labels"], activity["skips"]) == ("ann", 0, 1)
    browser_login(client, "boss")
    html = client.get(f"/manage/projects/{project.id}").text
    assert re.search(rf'data-label="Skips"><a href="/manage/projects/{project.id}/skips\?labeler=ann" aria-label="1 skip by ann">1</a><', html)


def test_a_submitted_or_foreign_task_cannot_be_skipped(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    task = _next(client, project, ann)["task"]
    assert _skip(client, bob, task).status_code == 404
    assert _submit(client, ann, task).status_code == 200
    done = _skip(client, ann, task)
    assert done.status_code == 409 and "not leased" in done.json()["detail"]
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Skip)) == 0
        assert session.get(Assignment, assignment_of(session, task["assignment_id"])).status == AssignmentStatus.done


def _served_gold(client, session_factory, *, screening: bool, **settings: Any):  # type: ignore[no-untyped-def]
    """A project of two gold items and an ordinary solution, ann's headers, and the gold item
    served to her first."""
    project = make_project(session_factory, **settings)
    golds = [labeled_record("reference", f"Problem G{i}", [f"G{i} step {j}" for j in range(3)], [1, -1],
                            qc=True, screening=screening) for i in range(2)]
    import_bytes(session_factory, project, jsonl(golds))
    add_solutions(session_factory, project, 1)
    with session_scope(session_factory) as session:
        gold = set(session.scalars(select(Label.solution_id).where(Label.is_quality_control.is_(True))))
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    assert task["solution"]["id"] in gold
    return project, gold, ann, task


def test_a_skipped_check_item_goes_as_an_ordinary_task_does(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, gold, ann, check = _served_gold(client, session_factory, screening=False, qc_rate=1.0)
    assert _skip(client, ann, check).status_code == 204
    served = set()
    while (task := _next(client, project, ann)["task"]) is not None:
        served.add(task["solution"]["id"])
        assert _submit(client, ann, task).status_code == 200
    # Neither as a check item nor through its ordinary slot does the skipped gold come back.
    assert check["solution"]["id"] not in served and gold - {check["solution"]["id"]} <= served
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Assignment).where(Assignment.slot < 0,
                                                                                 Assignment.status != AssignmentStatus.done)) == 0


def test_a_screening_question_cannot_be_skipped(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Skipping every screening question would pass screening unscreened.
    project, _, ann, question = _served_gold(client, session_factory, screening=True, screening_items=2)
    refused = _skip(client, ann, question)
    assert refused.status_code == 409 and "screening questions cannot be skipped" in refused.json()["detail"]
    again = _next(client, project, ann)["task"]
    assert again["assignment_id"] == question["assignment_id"], "still theirs, as it was"
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Skip)) == 0


def test_a_skip_taken_back_serves_the_solution_again(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    [only] = add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    assert _skip(client, ann, _next(client, project, ann)["task"]).status_code == 204
    assert _next(client, project, ann)["task"] is None
    listed = client.get("/api/v1/me/skips", headers=ann).json()
    assert (listed["total"], listed["pages"]) == (1, 1)
    [row] = listed["items"]
    assert (row["solution_id"], row["project_id"], row["project_name"]) == (only, project.id, project.name)
    assert row["problem_snippet"] and row["skipped_at"]
    # Another labeler's skips are not theirs to take back, nor to see.
    assert client.delete(f"/api/v1/me/skips/{only}", headers=bob).status_code == 404
    assert client.get("/api/v1/me/skips", headers=bob).json()["total"] == 0
    assert client.delete(f"/api/v1/me/skips/{only}", headers=ann).status_code == 204
    again = client.delete(f"/api/v1/me/skips/{only}", headers=ann)
    assert again.status_code == 404 and "not skipped" in again.json()["detail"]
    assert _next(client, project, ann)["task"]["solution"]["id"] == only
    assert client.get("/api/v1/me/stats", headers=ann).json()["skipped"] == 0


def test_my_stats_takes_a_skip_back_with_the_pages_token_only(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    [only] = add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    assert _skip(client, ann, _next(client, project, ann)["task"]).status_code == 204
    csrf = browser_login(client, "ann")
    page = client.get("/label/stats").text
    assert f'action="/label/skips/{only}/return"' in page and project.name in page
    forged = client.post(f"/label/skips/{only}/return", data={"csrf_token": "not-it"}, follow_redirects=False)
    assert forged.status_code == 403
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Skip)) == 1, "a refused form changes nothing"
    taken = client.post(f"/label/skips/{only}/return", data={"csrf_token": csrf}, follow_redirects=False)
    assert taken.status_code == 303 and taken.headers["location"] == f"/label/stats?unskipped={only}#skipped"
    shown = client.get(taken.headers["location"]).text
    assert f"Solution {only} is no longer skipped" in shown and "None. A solution you skip" in shown
    # Taken back already (another tab): the page says so again, no error.
    assert client.post(f"/label/skips/{only}/return", data={"csrf_token": csrf},
                       follow_redirects=False).status_code == 303


def test_skips_in_a_project_the_labeler_left_are_neither_listed_nor_counted(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1, open_to_all=False)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    boss = api_headers(client, "boss")
    ann_id = client.get("/api/v1/users/me", headers=api_headers(client, "ann")).json()["id"]
    added = client.post(f"/api/v1/projects/{project.id}/members", headers=boss, json={"username": "ann"})
    assert added.status_code in (200, 201), added.text
    ann = api_headers(client, "ann")
    assert _skip(client, ann, _next(client, project, ann)["task"]).status_code == 204
    assert client.get("/api/v1/me/skips", headers=ann).json()["total"] == 1
    assert client.delete(f"/api/v1/projects/{project.id}/members/{ann_id}", headers=boss).status_code == 204
    assert client.get("/api/v1/me/skips", headers=ann).json() == {"items": [], "page": 1, "pages": 1, "total": 0}
    assert client.get("/api/v1/me/stats", headers=ann).json()["skipped"] == 0
    # Nor can they take it back: the project's skip records are no longer theirs to change.
    [skipped] = client.get(f"/api/v1/projects/{project.id}/skips", headers=boss).json()["skips"]
    assert client.delete(f"/api/v1/me/skips/{skipped['solution_id']}", headers=ann).status_code == 404
    assert client.get(f"/api/v1/projects/{project.id}/skips", headers=boss).json()["total"] == 1
