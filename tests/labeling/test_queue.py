"""The queue through the JSON API: leasing, overlap, expiry, idempotent submits."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import func, select, update

from app.db import session_scope
from app.labeling import queue
from app.labeling.queue import add_slots
from app.models import Assignment, Label, Problem, Solution, utcnow
from tests.conftest import api_headers, make_project, make_user


def _add_solutions(factory, project, n: int, steps: int = 3) -> list[int]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        problem = Problem(project_id=project.id, statement="What is 1+1?", answer="2", content_hash="p1")
        session.add(problem)
        session.flush()
        ids = []
        for i in range(n):
            solution = Solution(
                project_id=project.id,
                problem_id=problem.id,
                steps=[f"step {j} of {i}" for j in range(steps)],
                priority=float(i),
                content_hash=f"s{i}",
            )
            session.add(solution)
            session.flush()
            ids.append(solution.id)
        add_slots(session, project, [(i, float(k), None) for k, i in enumerate(ids)])
    return ids


def _submit(client, headers, assignment_id, key, ratings=(1, 1, -1), reason="found_error"):  # type: ignore[no-untyped-def]
    return client.post(
        f"/api/v1/assignments/{assignment_id}/submit",
        headers=headers,
        json={
            "idempotency_key": key,
            "ratings": [{"rating": r} for r in ratings],
            "finish_reason": reason,
            "total_time_ms": 1234,
        },
    )


def test_highest_priority_first_and_never_twice_for_one_labeler(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    ids = _add_solutions(session_factory, project, 3)
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    seen = []
    for n in range(3):
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        seen.append(task["solution"]["id"])
        again = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        assert again["assignment_id"] == task["assignment_id"], "a held lease is handed back"
        assert _submit(client, headers, task["assignment_id"], f"key-{n}-abcdef").status_code == 200
    assert seen == list(reversed(ids))
    body = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()
    assert body["task"] is None
    assert body["waiting"] == 3, "the second slot of each solution waits for another labeler"


def test_overlap_caps_concurrent_holders(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _add_solutions(session_factory, project, 1)
    headers = []
    for name in ("a1", "a2", "a3"):
        make_user(session_factory, name, "labeler")
        headers.append(api_headers(client, name))
    tasks = [client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=h).json()["task"] for h in headers]
    assert tasks[0] and tasks[1] and tasks[2] is None
    assert tasks[0]["assignment_id"] != tasks[1]["assignment_id"]


def test_expired_lease_returns_to_queue_and_late_submit_is_refused_once_retaken(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _add_solutions(session_factory, project, 1)
    make_user(session_factory, "slow", "labeler")
    make_user(session_factory, "fast", "labeler")
    slow, fast = api_headers(client, "slow"), api_headers(client, "fast")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=slow).json()["task"]
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=fast).json()["task"] is None
    with session_scope(session_factory) as session:
        session.execute(
            update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1))
        )
    retaken = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=fast).json()["task"]
    assert retaken["assignment_id"] == task["assignment_id"]
    late = _submit(client, slow, task["assignment_id"], "late-key-123")
    assert late.status_code == 404
    assert _submit(client, fast, task["assignment_id"], "fast-key-123").status_code == 200


def test_an_expired_lease_returns_at_its_priority_at_the_next_sweep(client, session_factory, monkeypatch):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    ids = _add_solutions(session_factory, project, 3)
    for name in ("slow", "bob", "cat"):
        make_user(session_factory, name, "labeler")
    slow, b, c = (api_headers(client, name) for name in ("slow", "bob", "cat"))
    # A fresh clock per test: the sweep is due on the first call of each project.
    monkeypatch.setattr(queue, "_next_sweep", {})
    best = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=slow).json()["task"]
    assert best["solution"]["id"] == ids[-1]
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
    # Within the sweep interval, slots that wait go first...
    second = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=b).json()["task"]
    assert second["solution"]["id"] == ids[-2]
    # ...and at the next sweep (the interval over) the expired one is back, ahead of them.
    monkeypatch.setattr(queue, "_next_sweep", {})
    third = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=c).json()["task"]
    assert third["assignment_id"] == best["assignment_id"]


def test_a_late_submit_is_refused_once_the_labeler_took_the_solution_again(client, session_factory, db, monkeypatch):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    bobs = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=bob).json()["task"]
    first = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    # ann's lease runs out and is swept back; bob hands his slot back.
    with session_scope(session_factory) as session:
        session.execute(
            update(Assignment)
            .where(Assignment.id == first["assignment_id"])
            .values(expires_at=utcnow() - timedelta(minutes=1))
        )
    monkeypatch.setattr(queue, "_next_sweep", {})
    assert client.post(f"/api/v1/assignments/{bobs['assignment_id']}/release", headers=bob).status_code == 204
    again = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    assert again["assignment_id"] == bobs["assignment_id"], "the other slot of the same solution"
    late = _submit(client, ann, first["assignment_id"], "late-key-0001")
    assert late.status_code == 409
    assert "taken this solution again" in late.json()["detail"]
    assert _submit(client, ann, again["assignment_id"], "fresh-key-0001").status_code == 200
    assert db.scalar(select(func.count()).select_from(Label)) == 1


def test_doubled_submit_stores_one_label(client, session_factory, db):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _add_solutions(session_factory, project, 1)
    make_user(session_factory, "dup", "labeler")
    headers = api_headers(client, "dup")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    results = []

    def submit() -> None:
        results.append(_submit(client, headers, task["assignment_id"], "same-key-42"))

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in results] == [200] * 4
    assert sorted(r.json()["duplicate"] for r in results) == [False, True, True, True]
    assert len({r.json()["label_id"] for r in results}) == 1
    assert db.scalar(select(func.count()).select_from(Label)) == 1


def test_concurrent_labelers_never_share_a_lease(client, session_factory, db):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _add_solutions(session_factory, project, 30)
    headers = []
    for n in range(12):
        make_user(session_factory, f"c{n}", "labeler")
        headers.append(api_headers(client, f"c{n}"))
    barrier = threading.Barrier(len(headers))
    got: list[int] = []
    lock = threading.Lock()

    def work(h):  # type: ignore[no-untyped-def]
        barrier.wait()
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=h).json()["task"]
        with lock:
            got.append(task["assignment_id"])

    threads = [threading.Thread(target=work, args=(h,)) for h in headers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 12 and len(set(got)) == 12


def test_bad_ratings_are_refused_and_change_nothing(client, session_factory, db):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _add_solutions(session_factory, project, 1)
    make_user(session_factory, "eve", "labeler")
    headers = api_headers(client, "eve")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    aid = task["assignment_id"]
    assert _submit(client, headers, aid, "k-000001", ratings=(1, -1, 1)).status_code == 422
    assert _submit(client, headers, aid, "k-000002", ratings=(1, 1), reason="solution").status_code == 422
    assert _submit(client, headers, aid, "k-000003", ratings=(1,), reason="give_up").status_code == 422
    assert _submit(client, headers, aid, "k-000004", ratings=(1, 1, 7)).status_code == 422
    assert db.scalar(select(func.count()).select_from(Label)) == 0
