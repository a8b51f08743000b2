"""The queue through the JSON API: leasing, overlap, expiry, idempotent submits."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.db import session_scope
from app.deps import CSRF_HEADER
from app.labeling import queue, service
from app.labeling.task_handles import assignment_of
from app.main import create_app
from app.models import Assignment, Label, Project, Solution, utcnow
from tests.conftest import (
    add_solutions,
    api_headers,
    browser_login,
    make_project,
    make_user,
)


def _next_task(client, project, headers):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]


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
    ids = add_solutions(session_factory, project, 3)
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    seen = []
    for n in range(3):
        body = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()
        task = body["task"]
        seen.append(task["solution"]["id"])
        index = ids.index(task["solution"]["id"])
        assert task["solution"]["steps"] == [f"step {j} of {index}" for j in range(3)]
        assert task["problem"]["statement"] == "What is 1+1?" and task["problem"]["answer"] == "2"
        # Six slots; the labeler's own lease and the slots behind it do not count.
        assert body["waiting"] == 5 - n
        again = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()
        assert again["task"] == task, "a held lease is handed back"
        assert again["waiting"] == 5 - n
        assert _submit(client, headers, task["assignment_id"], f"key-{n}-abcdef").status_code == 200
    assert seen == list(reversed(ids))
    body = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()
    assert body["task"] is None
    assert body["waiting"] == 3, "the second slot of each solution waits for another labeler"


def test_a_lease_is_renewed_for_its_holder_and_taken_again_once_run_out_while_nobody_took_it(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)  # leases of 30 minutes
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "slow", "labeler")
    make_user(session_factory, "fast", "labeler")
    slow, fast = api_headers(client, "slow"), api_headers(client, "fast")
    task = _next_task(client, project, slow)
    renew = f"/api/v1/assignments/{task['assignment_id']}/renew"

    def held_until() -> datetime:
        with session_scope(session_factory) as session:
            return session.scalars(select(Assignment.expires_at)).one()

    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() + timedelta(minutes=2)))
    renewed = client.post(renew, headers=slow)
    assert renewed.status_code == 200
    assert timedelta(minutes=29) < held_until() - utcnow() <= timedelta(minutes=30)
    assert abs(datetime.fromisoformat(renewed.json()["expires_at"]) - held_until()) < timedelta(seconds=1)
    # Another labeler, or a task id that is nobody's, renews nothing.
    assert client.post(renew, headers=fast).status_code == 404
    assert client.post("/api/v1/assignments/1000000/renew", headers=slow).status_code == 404

    # Run out and back in the queue, it is the holder's again while nobody took it...
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
        queue.reclaim_expired(session, project.id, utcnow())
    assert client.post(renew, headers=slow).status_code == 200
    assert _next_task(client, project, fast) is None
    # ...and not once someone has, nor after a submit.
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
    assert _next_task(client, project, fast)["assignment_id"] == task["assignment_id"]
    assert client.post(renew, headers=slow).status_code == 404
    assert _submit(client, fast, task["assignment_id"], "fast-key-123").status_code == 200
    done = client.post(renew, headers=fast)
    assert done.status_code == 409 and "already submitted" in done.json()["detail"]


def test_a_run_out_lease_is_not_taken_back_once_its_labeler_holds_another_task(client, session_factory):  # type: ignore[no-untyped-def]
    # Two tabs: the first one's lease ran out, the second asked for a task and got another
    # solution; the first one's renewal must not leave the labeler holding both.
    project = make_project(session_factory)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    first = _next_task(client, project, ann)
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).where(Assignment.id == assignment_of(session, first["assignment_id"]))
                        .values(expires_at=utcnow() - timedelta(minutes=1), priority=-100))
    second = _next_task(client, project, ann)
    assert second["assignment_id"] != first["assignment_id"]
    refused = client.post(f"/api/v1/assignments/{first['assignment_id']}/renew", headers=ann)
    assert refused.status_code == 409 and "taken another task" in refused.json()["detail"]
    assert client.post(f"/api/v1/assignments/{second['assignment_id']}/renew", headers=ann).status_code == 200
    assert _next_task(client, project, ann)["assignment_id"] == second["assignment_id"]


def test_overlap_caps_concurrent_holders(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 1)
    headers = []
    for name in ("a1", "a2", "a3"):
        make_user(session_factory, name, "labeler")
        headers.append(api_headers(client, name))
    tasks = [_next_task(client, project, h) for h in headers]
    assert tasks[0] and tasks[1] and tasks[2] is None
    assert tasks[0]["assignment_id"] != tasks[1]["assignment_id"]


def test_expired_lease_returns_to_queue_and_late_submit_is_refused_once_retaken(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "slow", "labeler")
    make_user(session_factory, "fast", "labeler")
    slow, fast = api_headers(client, "slow"), api_headers(client, "fast")
    task = _next_task(client, project, slow)
    assert _next_task(client, project, fast) is None
    with session_scope(session_factory) as session:
        session.execute(
            update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1))
        )
    retaken = _next_task(client, project, fast)
    assert retaken["assignment_id"] == task["assignment_id"]
    late = _submit(client, slow, task["assignment_id"], "late-key-123")
    assert late.status_code == 404
    assert _submit(client, fast, task["assignment_id"], "fast-key-123").status_code == 200


def test_an_expired_lease_returns_at_its_priority_at_the_next_sweep(client, session_factory, monkeypatch):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    ids = add_solutions(session_factory, project, 3)
    for name in ("slow", "bob", "cat"):
        make_user(session_factory, name, "labeler")
    slow, b, c = (api_headers(client, name) for name in ("slow", "bob", "cat"))
    # A fresh clock per test: the sweep is due on the first call of each project; and an
    # interval no pause of a loaded machine outlasts.
    monkeypatch.setattr(queue, "_next_sweep", {})
    monkeypatch.setattr(queue, "SWEEP_INTERVAL_S", 3600.0)
    best = _next_task(client, project, slow)
    assert best["solution"]["id"] == ids[-1]
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
    # Within the sweep interval, slots that wait go first...
    second = _next_task(client, project, b)
    assert second["solution"]["id"] == ids[-2]
    # ...and at the next sweep (the interval over) the expired one is back, ahead of them.
    monkeypatch.setattr(queue, "_next_sweep", {})
    third = _next_task(client, project, c)
    assert third["assignment_id"] == best["assignment_id"]


def test_a_late_submit_is_refused_once_the_labeler_took_the_solution_again(client, session_factory, db, monkeypatch):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann, bob = api_headers(client, "ann"), api_headers(client, "bob")
    bobs = _next_task(client, project, bob)
    first = _next_task(client, project, ann)
    # ann's lease runs out and is swept back; bob hands his slot back.
    with session_scope(session_factory) as session:
        session.execute(
            update(Assignment)
            .where(Assignment.id == assignment_of(session, first["assignment_id"]))
            .values(expires_at=utcnow() - timedelta(minutes=1))
        )
    monkeypatch.setattr(queue, "_next_sweep", {})
    assert client.post(f"/api/v1/assignments/{bobs['assignment_id']}/release", headers=bob).status_code == 204
    again = _next_task(client, project, ann)
    assert again["assignment_id"] == bobs["assignment_id"], "the other slot of the same solution"
    late = _submit(client, ann, first["assignment_id"], "late-key-0001")
    assert late.status_code == 409
    assert "taken this solution again" in late.json()["detail"]
    assert _submit(client, ann, again["assignment_id"], "fresh-key-0001").status_code == 200
    assert db.scalar(select(func.count()).select_from(Label)) == 1


def test_doubled_submit_stores_one_label(client, session_factory, db, monkeypatch):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "dup", "labeler")
    headers = api_headers(client, "dup")
    task = _next_task(client, project, headers)
    check_ratings = service.check_ratings

    def slow_check(*args):  # type: ignore[no-untyped-def]
        # With the assignment locked: the twins pile up behind the first, and each wakes to
        # find it done, its label newer than what the locking statement read.
        time.sleep(0.2)
        check_ratings(*args)

    monkeypatch.setattr(service, "check_ratings", slow_check)
    barrier = threading.Barrier(4)
    results = []

    def submit() -> None:
        barrier.wait()
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
    add_solutions(session_factory, project, 30)
    headers = []
    for n in range(12):
        make_user(session_factory, f"c{n}", "labeler")
        headers.append(api_headers(client, f"c{n}"))
    barrier = threading.Barrier(len(headers))
    got: list[int] = []
    lock = threading.Lock()

    def work(h):  # type: ignore[no-untyped-def]
        barrier.wait()
        task = _next_task(client, project, h)
        with lock:
            got.append(task["assignment_id"])

    threads = [threading.Thread(target=work, args=(h,)) for h in headers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 12 and len(set(got)) == 12


@pytest.mark.parametrize("login", ["token", "browser"])
def test_one_labelers_simultaneous_requests_share_one_lease(client, session_factory, db, login, monkeypatch):  # type: ignore[no-untyped-def]
    """A double click, or two tabs: the user's row lock, taken with the caller's lookup, makes
    the requests decide one after the other, so all of them get the first one's lease."""

    def slow_sweep_check(project_id: int) -> bool:
        # Between finding no lease and taking one: without the lock, every request would
        # be here at once and each would take a lease of its own.
        time.sleep(0.2)
        return False

    monkeypatch.setattr(queue, "_sweep_due", slow_sweep_check)
    project = make_project(session_factory)
    add_solutions(session_factory, project, 10)
    make_user(session_factory, "twin", "labeler")
    if login == "token":
        headers = api_headers(client, "twin")
    else:
        headers = {CSRF_HEADER: browser_login(client, "twin")}
    barrier = threading.Barrier(6)
    got: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        barrier.wait()
        response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
        assert response.status_code == 200, response.text
        with lock:
            got.append(response.json()["task"]["assignment_id"])

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 6 and len(set(got)) == 1
    leased = select(func.count()).select_from(Assignment).where(Assignment.status == "leased")
    assert db.scalar(leased) == 1


def test_bad_ratings_are_refused_and_change_nothing(client, session_factory, db):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "eve", "labeler")
    headers = api_headers(client, "eve")
    task = _next_task(client, project, headers)
    aid = task["assignment_id"]
    assert _submit(client, headers, aid, "k-000001", ratings=(1, -1, 1)).status_code == 422
    assert _submit(client, headers, aid, "k-000002", ratings=(1, 1), reason="solution").status_code == 422
    assert _submit(client, headers, aid, "k-000003", ratings=(1,), reason="give_up").status_code == 422
    assert _submit(client, headers, aid, "k-000004", ratings=(1, 1, 7)).status_code == 422
    assert db.scalar(select(func.count()).select_from(Label)) == 0


def test_every_submit_outcome_and_the_row_a_label_leaves(client, session_factory, db):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "sam", "labeler")
    make_user(session_factory, "other", "labeler")
    sam, other = api_headers(client, "sam"), api_headers(client, "other")
    first = _next_task(client, project, sam)
    stored = _submit(client, sam, first["assignment_id"], "first-key-01")
    assert stored.status_code == 200 and stored.json()["duplicate"] is False

    retried = _submit(client, sam, first["assignment_id"], "first-key-01")
    assert retried.status_code == 200
    assert retried.json() == {**stored.json(), "duplicate": True}
    # The key sent again with other ratings, or another outcome, is no retry.
    for changed in ({"ratings": (1, -1)}, {"ratings": (1, 1, 1), "reason": "solution"}):
        differs = _submit(client, sam, first["assignment_id"], "first-key-01", **changed)
        assert differs.status_code == 409 and "a different submission" in differs.json()["detail"], changed
    again = _submit(client, sam, first["assignment_id"], "second-key-01")
    assert again.status_code == 409 and "already submitted" in again.json()["detail"]

    second = _next_task(client, project, sam)
    reused = _submit(client, sam, second["assignment_id"], "first-key-01")
    assert reused.status_code == 409 and "another assignment" in reused.json()["detail"]
    missing = _submit(client, sam, 10**6, "first-key-01")
    assert missing.status_code == 409 and "another assignment" in missing.json()["detail"]
    assert _submit(client, sam, 10**6, "unused-key-01").status_code == 404
    theirs = _next_task(client, project, other)
    assert _submit(client, sam, theirs["assignment_id"], "unused-key-02").status_code == 404

    held = {a.id: a for a in db.scalars(select(Assignment))}
    assert held[assignment_of(db, second["assignment_id"])].status == "leased"
    assert held[assignment_of(db, theirs["assignment_id"])].status == "leased"
    done = held[assignment_of(db, first["assignment_id"])]
    assert done.status == "done" and done.done_at is not None and done.expires_at is None
    label = db.scalars(select(Label)).one()
    assert label.id == stored.json()["label_id"] and label.assignment_id == assignment_of(db, first["assignment_id"])
    assert (label.is_quality_control, label.is_initial_screening, label.extra) == (False, False, {})
    assert label.started_at == done.leased_at and label.total_time_ms == 1234
    assert label.finish_reason == "found_error" and label.idempotency_key == "first-key-01"
    assert [step["completions"][0]["rating"] for step in label.steps] == [1, 1, -1]
    assert [step["chosen_completion"] for step in label.steps] == [0, 0, None]


def test_among_equal_priorities_every_first_slot_goes_before_any_second(client, session_factory, db):  # type: ignore[no-untyped-def]
    """So that a labeler working alone never has to be passed the other slot of a solution they
    just labeled: oldest first, first slots first."""
    project = make_project(session_factory, overlap=2)
    ids = add_solutions(session_factory, project, 3, steps=1, priority=0.0)
    make_user(session_factory, "solo", "labeler")
    make_user(session_factory, "late", "labeler")
    solo, late = api_headers(client, "solo"), api_headers(client, "late")
    order = []
    for n in range(3):
        task = _next_task(client, project, solo)
        order.append(task["solution"]["id"])
        assert _submit(client, solo, task["assignment_id"], f"solo-key-{n:04d}", ratings=(1,), reason="solution").status_code == 200
    assert order == ids
    taken = _next_task(client, project, late)
    slots = {a.id: a.slot for a in db.scalars(select(Assignment))}
    assert slots[assignment_of(db, taken["assignment_id"])] == 1 and taken["solution"]["id"] == ids[0]


# On SQLite each transaction begins IMMEDIATE, so labeling requests run one at a time anyway.
@pytest.mark.parametrize("backend", ["postgresql"])
def test_labeling_requests_take_turns_beyond_the_configured_concurrency(settings, session_factory, monkeypatch, backend):  # type: ignore[no-untyped-def]
    limited = settings.model_copy(update={"labeling_concurrency": 2})
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 6)
    running = []
    most = [0]
    lock = threading.Lock()
    real_next_task = service.next_task

    def slow_next_task(*args, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            running.append(1)
            most[0] = max(most[0], len(running))
        time.sleep(0.2)
        with lock:
            running.pop()
        return real_next_task(*args, **kwargs)

    monkeypatch.setattr(service, "next_task", slow_next_task)
    with TestClient(create_app(limited)) as client:
        headers = []
        for n in range(6):
            make_user(session_factory, f"taker{n}", "labeler")
            headers.append(api_headers(client, f"taker{n}"))
        answers = []
        # Started together: threads that begin more than a sleep apart would never overlap.
        barrier = threading.Barrier(len(headers))

        def take(h: dict) -> None:
            barrier.wait()
            answers.append(_next_task(client, project, h))

        threads = [threading.Thread(target=take, args=(h,)) for h in headers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(answers) == 6 and all(answers)
    assert most[0] == 2


def test_a_lowered_overlap_leaves_no_slot_to_a_solution_it_already_has_enough_labels_for(client, session_factory):  # type: ignore[no-untyped-def]
    """a2 labeled the solution at slot 1 while a1 held slot 0 and handed it back: at overlap 1
    the solution is done, and slot 0, though numbered under the new overlap, goes."""
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 1)
    users = []
    for name in ("a1", "a2", "a3", "boss"):
        make_user(session_factory, name, "manager" if name == "boss" else "labeler")
        users.append(api_headers(client, name))
    a1, a2, a3, boss = users
    held = _next_task(client, project, a1)
    labeled = _next_task(client, project, a2)
    assert _submit(client, a2, labeled["assignment_id"], "a2-key-1234").status_code == 200
    assert client.post(f"/api/v1/assignments/{held['assignment_id']}/release", headers=a1).status_code == 204
    assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"overlap": 1}).status_code == 200
    assert _next_task(client, project, a3) is None
    progress = client.get(f"/api/v1/projects/{project.id}/progress", headers=boss).json()
    assert (progress["solutions_done"], progress["solutions_waiting"]) == (1, 0)
    # A lease in hand stays, and a solution short of labels keeps what it lacks.
    assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"overlap": 3}).status_code == 200
    leased = _next_task(client, project, a1)
    assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"overlap": 2}).status_code == 200
    with session_scope(session_factory) as session:
        slots = session.execute(select(Assignment.slot, Assignment.status).order_by(Assignment.slot)).all()
    assert [tuple(s) for s in slots] == [(0, "leased"), (1, "done")]
    assert leased is not None and _next_task(client, project, a3) is None


def test_slots_are_added_in_the_solutions_order_whatever_order_they_come_in(session_factory):  # type: ignore[no-untyped-def]
    # Raising the overlap read the solutions in no order, and equal priorities are served oldest
    # slot first: a file's solutions came backwards.
    project = make_project(session_factory, overlap=1)
    ids = add_solutions(session_factory, project, 4, priority=0.0)
    with session_scope(session_factory) as session:
        raised = session.get(Project, project.id)
        raised.overlap = 2
        queue.add_slots(session, raised, [(i, 0.0, None) for i in reversed(ids)])
    with session_scope(session_factory) as session:
        added = session.scalars(select(Assignment.solution_id).where(Assignment.slot == 1).order_by(Assignment.id)).all()
    assert added == sorted(ids)


def test_a_raised_overlap_queues_nothing_of_a_retired_problem_until_it_returns(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    [solution_id] = add_solutions(session_factory, project, 1)
    make_user(session_factory, "boss", "manager")
    boss = api_headers(client, "boss")
    with session_scope(session_factory) as session:
        problem_id = session.get(Solution, solution_id).problem_id
    url = f"/api/v1/projects/{project.id}"
    assert client.post(f"{url}/problems/{problem_id}/retire", headers=boss).json()["slots_removed"] == 1
    assert client.patch(url, headers=boss, json={"overlap": 3}).status_code == 200
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)) == 0
    assert client.post(f"{url}/problems/{problem_id}/restore", headers=boss).json()["slots_added"] == 3


def test_a_retired_problem_is_counted_apart_and_its_lease_run_out_waits_for_nobody(client, session_factory):  # type: ignore[no-untyped-def]
    """A retired problem's solution is neither done (it lost its slots) nor waiting; a lease on
    it that runs out stays out of the queue, and its labeler's late submit is still taken."""
    from tests.reports.builders import add_problem

    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "First?", n_solutions=1)
    add_problem(session_factory, project, "Second?", n_solutions=1)
    for name in ("slow", "next", "boss"):
        make_user(session_factory, name, "manager" if name == "boss" else "labeler")
    slow, later, boss = (api_headers(client, name) for name in ("slow", "next", "boss"))
    url = f"/api/v1/projects/{project.id}"
    task = _next_task(client, project, slow)
    retired_problem = task["problem"]["id"]
    assert client.post(f"{url}/problems/{retired_problem}/retire", headers=boss).json()["slots_removed"] == 0
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
    other = client.post(f"{url}/tasks/next", headers=later).json()
    assert other["task"]["problem"]["id"] != retired_problem and other["waiting"] == 0
    progress = client.get(f"{url}/progress", headers=boss).json()
    assert (progress["solutions_done"], progress["solutions_in_progress"], progress["solutions_waiting"],
            progress["solutions_retired"]) == (0, 1, 0, 1)
    assert _submit(client, slow, task["assignment_id"], "late-key-1234").status_code == 200
