"""Task handles: the ids labelers see are a keyed permutation of slot row ids."""

from __future__ import annotations

import random

import pytest
from scipy.stats import spearmanr
from sqlalchemy import select

from app.db import create_db_engine, create_session_factory, session_scope
from app.labeling import task_handles
from app.labeling.task_handles import assignment_of, handle_of, permute, unpermute
from app.models import INT32_MAX, InstanceSecret
from tests.conftest import add_solutions, api_headers, make_project, make_user

KEY = bytes(range(32))


def test_the_permutation_is_a_bijection_of_row_ids_undone_by_its_inverse() -> None:
    rng = random.Random(4)
    ids = [1, 2, 3, INT32_MAX - 1, INT32_MAX] + list(range(100, 5100)) + [rng.randint(1, INT32_MAX) for _ in range(5000)]
    handles = [permute(KEY, i) for i in ids]
    assert all(1 <= h <= INT32_MAX for h in handles)
    assert len(set(handles)) == len(set(ids))
    assert [unpermute(KEY, h) for h in handles] == ids
    # Another key, another permutation.
    assert [permute(bytes(32), i) for i in range(100, 200)] != handles[5:105]


@pytest.mark.parametrize("bad", [0, -1, INT32_MAX + 1])
def test_a_value_outside_row_ids_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="not a row id"):
        permute(KEY, bad)
    with pytest.raises(ValueError, match="not a row id"):
        unpermute(KEY, bad)


def test_handles_of_consecutive_slots_carry_no_order() -> None:
    ids = list(range(1000, 3000))
    handles = [permute(KEY, i) for i in ids]
    # Sequential ids would give 1; a keyed permutation gives about 0 (its spread is 1/sqrt(n)).
    assert abs(spearmanr(ids, handles).statistic) < 0.1
    # Neighbouring ids land far apart: the handle of the next slot cannot be guessed.
    gaps = [abs(b - a) for a, b in zip(handles, handles[1:])]
    assert sorted(gaps)[len(gaps) // 2] > INT32_MAX // 8


def test_every_process_reads_the_key_the_first_one_made(settings, session_factory) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        assert session.scalar(select(InstanceSecret.value)) is None
        handle = handle_of(session, 42)
    other_engine = create_db_engine(settings)  # as another server process would have
    try:
        with session_scope(create_session_factory(other_engine)) as session:
            assert assignment_of(session, handle) == 42
            assert len(session.scalars(select(InstanceSecret)).all()) == 1
    finally:
        other_engine.dispose()


def test_a_key_made_in_a_transaction_that_rolls_back_is_not_kept(session_factory) -> None:  # type: ignore[no-untyped-def]
    with session_factory() as session:
        handle_of(session, 42)
        session.rollback()
    with session_scope(session_factory) as session:
        assert session.scalar(select(InstanceSecret.value)) is None
        handle_of(session, 42)
    with session_scope(session_factory) as session:
        stored = bytes.fromhex(session.get(InstanceSecret, task_handles.SECRET_NAME).value)
        # This process uses the key every other process reads, not the one rolled back.
        assert [handle_of(session, i) for i in range(1, 50)] == [permute(stored, i) for i in range(1, 50)]


def test_submit_and_release_take_the_handle_and_a_row_id_is_not_one(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    with session_scope(session_factory) as session:
        row = assignment_of(session, task["assignment_id"])
    assert row != task["assignment_id"]
    # The row id, sent as if it were the task's id, names no task of ann's.
    refused = client.post(f"/api/v1/assignments/{row}/release", headers=ann)
    assert refused.status_code == 404 and str(row) in refused.json()["detail"]
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=ann).status_code == 204
    again = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    label = {"idempotency_key": "handle-key-01", "ratings": [{"rating": 1}] * len(again["solution"]["steps"]),
             "finish_reason": "solution", "total_time_ms": 900}
    receipt = client.post(f"/api/v1/assignments/{again['assignment_id']}/submit", headers=ann, json=label)
    assert receipt.status_code == 200 and receipt.json()["assignment_id"] == again["assignment_id"]
    retried = client.post(f"/api/v1/assignments/{again['assignment_id']}/submit", headers=ann, json=label)
    assert retried.json() == {**receipt.json(), "duplicate": True}
