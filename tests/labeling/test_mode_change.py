"""What a submit is judged by: the labeling mode the task was served in, when a manager changes the
project's meanwhile, and what a finish_note may go with."""

from __future__ import annotations

import pytest

from tests.conftest import add_solutions, api_headers, make_project, make_user


@pytest.mark.parametrize("new_mode", ["full", "phase1"])
def test_a_label_under_lease_is_taken_by_the_mode_it_was_served_in(client, session_factory, new_mode) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="first_error")
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "mona", "manager")
    lena = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=lena).json()["task"]
    assert task["labeling_mode"] == "first_error"
    changed = client.patch(f"/api/v1/projects/{project.id}", headers=api_headers(client, "mona"),
                           json={"labeling_mode": new_mode})
    assert changed.status_code == 200, changed.text
    # The page reloaded shows the task as it was served.
    again = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=lena).json()["task"]
    assert (again["assignment_id"], again["labeling_mode"], again["solution"]["alternatives"]) == (
        task["assignment_id"], "first_error", None)
    submitted = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=lena, json={
        "idempotency_key": "mode-change-0001", "ratings": [{"rating": 1}, {"rating": -1}],
        "finish_reason": "found_error", "total_time_ms": 1000})
    assert submitted.status_code == 200, submitted.text
    after = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=lena).json()["task"]
    assert after["labeling_mode"] == new_mode


def test_a_note_is_taken_only_as_a_give_up_or_bad_problem_reason(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # No page or report shows a note on any other label, yet the export carried it.
    project = make_project(session_factory, labeling_mode="full")
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", "labeler")
    lena = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=lena).json()["task"]
    body = {"idempotency_key": "note-0001", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution",
            "total_time_ms": 1000}
    refused = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=lena,
                          json={**body, "finish_note": "step 3 is odd"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == "finish_note is the reason for give_up or bad_problem; a solution label takes none"
    taken = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=lena, json={**body, "finish_note": " "})
    assert taken.status_code == 200, taken.text
