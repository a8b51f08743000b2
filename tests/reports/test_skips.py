"""Skips as a manager sees them: listed with who skipped and how many skipped each solution,
filtered and ordered, given back to the labeler (audited), and counted where the queue can
serve a solution to no one."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.db import session_scope
from app.models import AuditEvent, Skip
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user


def _skip_next(client, project, headers) -> int:  # type: ignore[no-untyped-def]
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/skip", headers=headers).status_code == 204
    return task["solution"]["id"]


def _team(client, session_factory, **settings):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, **settings)
    ids = add_solutions(session_factory, project, 3)
    users = {name: make_user(session_factory, name, role)
             for name, role in (("ann", "labeler"), ("bob", "labeler"), ("max", "manager"), ("rae", "researcher"))}
    return project, ids, users, {name: api_headers(client, name) for name in users}


def test_managers_see_who_skipped_what_and_give_it_back(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _, users, h = _team(client, session_factory, overlap=2)
    shared = _skip_next(client, project, h["ann"])
    assert _skip_next(client, project, h["bob"]) == shared, "the best solution is first for both"
    alone = _skip_next(client, project, h["ann"])
    url = f"/api/v1/projects/{project.id}/skips"

    newest = client.get(url, headers=h["rae"]).json()
    assert (newest["total"], newest["pages"]) == (3, 1)
    assert [(s["solution_id"], s["labeler"], s["skipped_by"]) for s in newest["skips"]] == [
        (alone, "ann", 1), (shared, "bob", 2), (shared, "ann", 2)]
    most = client.get(url, params={"order": "most_skipped"}, headers=h["rae"]).json()["skips"]
    assert [s["skipped_by"] for s in most] == [2, 2, 1]
    only_bob = client.get(url, params={"labeler": "bob"}, headers=h["max"]).json()
    assert [(s["solution_id"], s["user_id"]) for s in only_bob["skips"]] == [(shared, users["bob"].id)]
    assert client.get(url, params={"order": "oldest"}, headers=h["max"]).status_code == 422
    assert client.get(url, headers=h["ann"]).status_code == 403

    give_back = f"{url}/{shared}/{users['bob'].id}"
    assert client.delete(give_back, headers=h["rae"]).status_code == 403, "researchers read, managers act"
    assert client.delete(give_back, headers=h["max"]).status_code == 204
    assert client.delete(give_back, headers=h["max"]).status_code == 404
    assert client.delete(f"/api/v1/projects/999/skips/{shared}/{users['bob'].id}", headers=h["max"]).status_code == 404
    served = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=h["bob"]).json()["task"]
    assert served["solution"]["id"] == shared, "given back, it is bob's to label again"
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Skip)) == 2
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "skip.given_back")).one()
    assert (event.actor, event.target, event.details["labeler"]) == ("max", f"solution {shared}", "bob")


def test_the_skipped_tab_lists_filters_and_gives_back_with_the_pages_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _, users, h = _team(client, session_factory, overlap=2)
    shared = _skip_next(client, project, h["ann"])
    _skip_next(client, project, h["bob"])
    browser_login(client, "rae")
    read_only = client.get(f"/manage/projects/{project.id}/skips").text
    assert "2 skips." in read_only and "Give back to" not in read_only, "a researcher sees, without the button"
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/skips?labeler=ann").text
    assert "1 skip." in page and "2 labelers" in page and 'aria-current="page">Skipped<' in page
    action = f"/manage/projects/{project.id}/skips/{shared}/{users['ann'].id}/give-back"
    assert f'action="{action}"' in page
    forged = client.post(action, data={"csrf_token": "nope", "labeler": "ann"}, follow_redirects=False)
    assert forged.status_code == 403
    done = client.post(action, data={"csrf_token": csrf, "labeler": "ann", "order": "newest", "page": "1"},
                       follow_redirects=False)
    assert done.status_code == 303
    assert done.headers["location"] == f"/manage/projects/{project.id}/skips?labeler=ann&given_back={shared}"
    after = client.get(done.headers["location"]).text
    assert f"Solution {shared} is back in the labeler" in after and "No skips by ann" in after
    # Given back already: said again, no error.
    assert client.post(action, data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert client.get(f"/manage/projects/{project.id}/skips?order=sideways").status_code == 422


def test_a_solution_every_labeler_skipped_or_labeled_is_said_to_wait_for_no_one(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _, _, h = _team(client, session_factory, overlap=2)
    skipped = _skip_next(client, project, h["ann"])
    while (task := client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=h["bob"]).json()["task"]):
        body = {"idempotency_key": f"bob-{task['assignment_id']:06d}", "ratings": [{"rating": 1}] * 3,
                "finish_reason": "solution", "total_time_ms": 1000}
        assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=h["bob"], json=body).status_code == 200
    browser_login(client, "max")
    overview = " ".join(client.get(f"/manage/projects/{project.id}").text.split())
    assert re.search(rf"1 solution \(#{skipped}\) waits for a label that the queue will serve to no one: every "
                     r"labeler who may label here has labeled it, skipped it or reported its problem as bad", overview)


def test_all_of_a_labelers_skips_are_given_back_at_once(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, ids, users, h = _team(client, session_factory, overlap=2)
    for _ in ids:
        _skip_next(client, project, h["ann"])
    _skip_next(client, project, h["bob"])
    url = f"/api/v1/projects/{project.id}/skips"
    assert client.delete(url, params={"labeler": "ann"}, headers=h["rae"]).status_code == 403
    assert client.delete(url, params={"labeler": "ann"}, headers=h["max"]).json() == {"given_back": 3}
    again = client.delete(url, params={"labeler": "ann"}, headers=h["max"])
    assert again.status_code == 404 and "ann has no skips" in again.json()["detail"]
    assert [s["labeler"] for s in client.get(url, headers=h["max"]).json()["skips"]] == ["bob"], "bob's stay"
    _skip_next(client, project, h["ann"])
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/skips?labeler=ann").text
    assert "Give back all 1 to ann" in page
    done = client.post(f"/manage/projects/{project.id}/skips/give-back", data={"csrf_token": csrf, "labeler": "ann"},
                       follow_redirects=False)
    assert done.status_code == 303
    shown = client.get(done.headers["location"]).text
    assert "1 skipped solution given back to ann" in shown and "No skips by ann" in shown
    with session_scope(session_factory) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "skip.given_back")).all()
    assert [(e.target, e.details["count"]) for e in events] == [("user ann", 3), ("user ann", 1)]


def test_the_skipped_tabs_pages_keep_the_filters_and_a_page_past_the_last_leads_back(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    ids = add_solutions(session_factory, project, 52)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    with session_scope(session_factory) as session:
        session.add_all(Skip(user_id=ann.id, solution_id=solution_id, project_id=project.id) for solution_id in ids)
    browser_login(client, "max")
    tab = f"/manage/projects/{project.id}/skips"

    first = client.get(f"{tab}?labeler=ann").text
    assert 'href="?labeler=ann&amp;page=2">Older →' in first and "Page 1 of 2" in first and "← Newer" not in first
    second = client.get(f"{tab}?labeler=ann&page=2").text
    assert 'href="?labeler=ann&amp;page=1">← Newer' in second and "Older →" not in second
    by_count = client.get(f"{tab}?order=most_skipped").text
    assert 'href="?order=most_skipped&amp;page=2">Next →' in by_count
    past = client.get(f"{tab}?labeler=ann&page=3").text
    assert "No skips on page 3" in past and 'href="?labeler=ann">Back to the newest' in past


def test_the_labeler_filter_takes_a_labeler_uuid_and_refuses_a_name_no_user_has(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _, users, h = _team(client, session_factory, overlap=2)
    skipped = _skip_next(client, project, h["ann"])
    url = f"/api/v1/projects/{project.id}/skips"
    for name in (users["ann"].labeler_uuid, users["ann"].labeler_uuid.upper(), "ANN"):
        assert [s["solution_id"] for s in client.get(url, params={"labeler": name}, headers=h["max"]).json()["skips"]] == [skipped]
    refused = client.get(url, params={"labeler": "nobody"}, headers=h["max"])
    assert refused.status_code == 422
    assert refused.json()["detail"] == "no user is named 'nobody': give a username or a labeler UUID"
    assert refused.json()["errors"] == [{"field": "labeler", "message": "no user named 'nobody'"}]
    # bob skipped nothing here: his list is empty, not refused.
    assert client.get(url, params={"labeler": "bob"}, headers=h["max"]).json()["total"] == 0
    assert client.delete(url, params={"labeler": users["ann"].labeler_uuid}, headers=h["max"]).json() == {"given_back": 1}
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/skips?labeler=nobody")
    assert page.status_code == 422 and "no user is named &#39;nobody&#39;" in page.text
