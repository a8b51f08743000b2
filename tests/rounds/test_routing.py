"""Routing in a whole round: machine labels that disagree with the served PRM go to humans
first, with a reason managers see and labelers do not; agreeing ones train only when allowed;
the round page and JSON compare machine labels with labelers'."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from active_learning.data import load_examples, snapshot_hash, weigh_sources
from app.db import session_scope
from app.models import Label, Round, RoundPick
from app.rounds import pool
from tests.conftest import api_headers, browser_login, make_user
from tests.rounds.conftest import routed_project, run_one_round

pytestmark = pytest.mark.slow


def without_timestamps(body: object) -> str:
    """The response as text with its timestamps left out: a share such as 0.45 may also be a
    timestamp's fraction of a second, which says nothing about what the labeler is told."""
    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("_at")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return json.dumps(strip(body))


def test_disagreeing_solutions_are_served_first_with_a_reason_labelers_never_see(
    client, session_factory, checkpoint, worker_settings, backend  # type: ignore[no-untyped-def]
) -> None:
    project, ids = routed_project(session_factory, checkpoint)
    round_id = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        picks = {p.solution_id: p for p in session.scalars(select(RoundPick).where(RoundPick.round_id == round_id))}
    assert picks[ids[1]].reason.value == "machine_disagreement"
    assert picks[ids[1]].detail == "rollout and PRM disagree on step 1"
    assert picks[ids[0]].detail == "rollout and PRM disagree on step 2"
    assert picks[ids[2]].reason.value == "machine_uncertain"
    assert picks[ids[2]].detail == "rollout uncertain at step 2 (share 0.45)"
    assert all(picks[sid].detail is None for sid in (ids[3], ids[4], ids[5]) if sid in picks)

    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    served = []
    for _ in range(3):
        response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
        assert response.status_code == 200, response.text
        shown_to_labeler = without_timestamps(response.json())
        for hidden in ("disagree", "uncertain", "rollout", "machine", "share", "0.45"):
            assert hidden not in shown_to_labeler
        task = response.json()["task"]
        served.append(task["solution"]["id"])
        submitted = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
            "idempotency_key": f"key-{task['assignment_id']:06d}", "ratings": [{"rating": 1}] * 3,
            "finish_reason": "solution", "total_time_ms": 1000})
        assert submitted.status_code == 200, submitted.text
        assert "rollout" not in submitted.text and "disagree" not in submitted.text
    assert served == [ids[1], ids[0], ids[2]]

    browser_login(client, "lena")
    page = client.get(f"/label/{project.id}")
    assert page.status_code == 200
    assert "disagree" not in page.text and "rollout" not in page.text
    assert client.get(f"/api/v1/rounds/{round_id}/picks", headers=headers).status_code == 403

    make_user(session_factory, "mona", "manager")
    shown = client.get(f"/api/v1/rounds/{round_id}/picks", headers=api_headers(client, "mona")).json()
    assert [p["detail"] for p in shown[:3]] == [
        "rollout and PRM disagree on step 1", "rollout and PRM disagree on step 2",
        "rollout uncertain at step 2 (share 0.45)"]


@pytest.mark.parametrize("accept", [False, True])
def test_agreeing_machine_labels_train_only_when_the_project_accepts_them(
    session_factory, checkpoint, worker_settings, accept: bool  # type: ignore[no-untyped-def]
) -> None:
    project, ids = routed_project(session_factory, checkpoint, accept=accept)
    round_id = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        agreeing = list(session.scalars(select(Label.id).where(Label.solution_id.in_([ids[3], ids[4]]))))
        hashes = {
            taken: snapshot_hash(load_examples(weigh_sources(pool.label_records(
                session, project.id, round_.snapshot_label_id, agreeing if taken else []))))
            for taken in (False, True)
        }
        assert hashes[True] != hashes[False]
        assert round_.snapshot_hash == hashes[accept]
        assert round_.metrics["machine_labels"]["accepted"] == (2 if accept else 0)


def test_round_compares_machine_labels_with_labelers_on_the_same_picks(
    client, session_factory, checkpoint, worker_settings  # type: ignore[no-untyped-def]
) -> None:
    project, ids = routed_project(session_factory, checkpoint)
    round_id = run_one_round(session_factory, project.id, worker_settings)
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    for _ in range(3):
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
            "idempotency_key": f"key-{task['assignment_id']:06d}", "ratings": [{"rating": 1}] * 3,
            "finish_reason": "solution", "total_time_ms": 1000}).status_code == 200

    make_user(session_factory, "rita", "researcher")
    sources = client.get(f"/api/v1/rounds/{round_id}", headers=api_headers(client, "rita")).json()["label_sources"]
    assert sources["pick_labels"]["human"] == 3 and sources["pick_labels"]["rollout"] >= 3
    assert sources["accepted_for_training"] == 0
    [rollout] = sources["comparisons"]
    # The labeler found no error in any of the three; the rollout agreed on the uncertain one
    # only, and both of its -1s were on steps the labeler rated +1.
    assert rollout["source"] == "rollout" and rollout["solutions"] == 3
    assert (rollout["first_error_agreement"]["hits"], rollout["first_error_agreement"]["n"]) == (1, 3)
    assert (rollout["negative_precision"]["hits"], rollout["negative_precision"]["n"]) == (0, 2)
    assert rollout["negative_recall"] == {"hits": 0, "n": 0, "value": None, "ci95": None}
    low, high = rollout["first_error_agreement"]["ci95"]
    assert low < 1 / 3 < high

    browser_login(client, "rita")
    page = client.get(f"/research/rounds/{round_id}")
    assert page.status_code == 200
    assert "Label sources" in page.text and "33%" in page.text
    assert "rollout and PRM disagree on step 1" in page.text
