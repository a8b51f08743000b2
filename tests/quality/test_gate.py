"""Screening and QC items in the labeling queue: the gate, the rate, feedback, pausing, and a
manager's admit and retire decisions."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.db import session_scope
from app.labeling.task_handles import assignment_of
from app.models import Assignment, Label, User
from app.projects.activity import project_activity
from app.quality.service import accurate_labelers, labeler_accuracy
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.conftest import labeled_record
from tests.reports.builders import add_problem

CANARY = "GOLD-CANARY-5b1e"


def _gold(name: str, ratings: list[int], *, screening: bool = False) -> dict[str, Any]:
    steps = [f"{name} step {i}" for i in range(3)]
    return labeled_record("reference", f"Problem {name}", steps, ratings, qc=True, screening=screening)


def _project(session_factory, golds: list[dict[str, Any]], regular: int = 3, **settings: Any):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, **settings)
    import_bytes(session_factory, project, jsonl(golds))
    with session_scope(session_factory) as session:
        # A canary in the gold: it must never reach a labeler before they submit.
        session.execute(
            update(Label).where(Label.is_quality_control.is_(True)).values(finish_note=CANARY, extra={"note": CANARY})
        )
    regular_ids = add_solutions(session_factory, project, regular)
    return project, regular_ids


def _gold_ids(session_factory, *, screening: bool | None = None) -> set[int]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        statement = select(Label.solution_id).where(Label.is_quality_control.is_(True))
        if screening is not None:
            statement = statement.where(Label.is_initial_screening.is_(screening))
        return set(session.scalars(statement))


def _next(client, project, headers) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _submit(client, headers, task, ratings: list[int]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    ratings = ratings + [1] * (len(task["solution"]["steps"]) - len(ratings)) if -1 not in ratings else ratings
    response = client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={
            "idempotency_key": f"key-{task['assignment_id']:06d}",
            "ratings": [{"rating": r} for r in ratings],
            "finish_reason": "found_error" if -1 in ratings else "solution",
            "total_time_ms": 1000,
        },
    )
    assert response.status_code == 200, response.text
    return response.json()


def _keys(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {f"{prefix}.{k}" for k in value} | {x for k, v in value.items() for x in _keys(v, f"{prefix}.{k}")}
    return set()


SCREENING = [
    _gold("S1", [1, -1], screening=True),
    _gold("S2", [1, 1, 1], screening=True),
    _gold("Q1", [-1]),
]


def test_screening_first_then_held_back_until_admitted(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, regular = _project(session_factory, SCREENING, screening_items=2, screening_pass_mark=1.0)
    screening = _gold_ids(session_factory, screening=True)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann = api_headers(client, "ann")
    first = _next(client, project, ann)["task"]
    assert first["solution"]["id"] in screening
    _submit(client, ann, first, [-1])  # the gold finds the error at step 2: a miss
    second = _next(client, project, ann)["task"]
    assert second["solution"]["id"] in screening - {first["solution"]["id"]}
    _submit(client, ann, second, [1, 1, 1])
    held = _next(client, project, ann)
    assert held["task"] is None and "screening" in held["reason"]
    with session_scope(session_factory) as session:
        assert session.scalars(
            select(Label.is_initial_screening).where(Label.user_id.is_not(None))
        ).all() == [True, True]

    boss = api_headers(client, "boss")
    standings = client.get(f"/api/v1/projects/{project.id}/screening", headers=boss).json()
    assert [(s["username"], s["screening_done"], s["screening_agreed"], s["status"]) for s in standings] == [
        ("ann", 2, 1, "failed screening")
    ]
    ann_id = standings[0]["user_id"]
    admitted = client.post(f"/api/v1/projects/{project.id}/screening/{ann_id}", headers=boss, json={"decision": "admit"})
    assert admitted.status_code == 200 and admitted.json()["status"] == "admitted"
    task = _next(client, project, ann)["task"]
    assert task["solution"]["id"] in regular

    retired = client.post(f"/api/v1/projects/{project.id}/screening/{ann_id}", headers=boss, json={"decision": "retire"})
    assert retired.json()["status"] == "retired"
    held = _next(client, project, ann)
    assert held["task"] is None and "retired" in held["reason"]
    with session_scope(session_factory) as session:
        # The retired labeler's lease went back to the queue.
        assert session.scalar(select(Assignment.status).where(Assignment.id == assignment_of(session, task["assignment_id"]))) == "waiting"


def test_decisions_refuse_bad_input(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, SCREENING, screening_items=2)
    make_user(session_factory, "ann", "labeler")
    boss_user = make_user(session_factory, "boss", "manager")
    boss = api_headers(client, "boss")
    ann = api_headers(client, "ann")
    url = f"/api/v1/projects/{project.id}/screening"
    assert client.post(f"{url}/{boss_user.id}", headers=boss, json={"decision": "admit"}).status_code == 404
    assert client.post(f"{url}/999999", headers=boss, json={"decision": "admit"}).status_code == 404
    assert client.post(f"{url}/{boss_user.id}", headers=boss, json={"decision": "promote"}).status_code == 422
    assert client.post(f"{url}/{boss_user.id}", headers=ann, json={"decision": "admit"}).status_code == 403
    for bad in ({"qc_rate": 1.5}, {"screening_items": -1}, {"qc_pause_below": -0.1}, {"screening_pass_mark": 2}):
        assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json=bad).status_code == 422


def test_passing_screening_opens_the_queue(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, regular = _project(session_factory, SCREENING, screening_items=2, screening_pass_mark=0.9)
    make_user(session_factory, "bob", "labeler")
    bob = api_headers(client, "bob")
    answers = {"Problem S1": [1, -1], "Problem S2": [1, 1, 1]}
    for _ in range(2):
        task = _next(client, project, bob)["task"]
        _submit(client, bob, task, answers[task["problem"]["statement"]])
    after = [_next(client, project, bob)["task"]]
    _submit(client, bob, after[0], [1, 1, 1])
    assert after[0]["solution"]["id"] in regular


def test_qc_items_at_rate_look_like_any_task_and_hide_the_gold(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    golds = [_gold("Q1", [1, -1]), _gold("Q2", [1, 1, 1])]
    project, regular = _project(session_factory, golds, qc_rate=1.0)
    qc = _gold_ids(session_factory)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    csrf = browser_login(client, "ann")
    seen: list[int] = []
    tasks = []
    while True:
        body = _next(client, project, ann)
        task = body["task"]
        if task is None:
            break
        tasks.append(body)
        if task["solution"]["id"] in qc:
            # Everything a labeler can reach while holding the QC task.
            responses = [
                client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann),
                client.get(f"/label/{project.id}"),
                client.get("/label"),
                client.get("/label/stats"),
                client.get("/api/v1/me/stats", headers=ann),
                client.get("/api/v1/me/labels", headers=ann),
                client.get("/api/v1/projects", headers=ann),
                client.get(f"/api/v1/projects/{project.id}", headers=ann),
            ]
            for response in responses:
                assert response.status_code == 200, response.url
                assert CANARY not in response.text and "quality_control" not in response.text, response.url
        receipt = _submit(client, ann, task, [1, 1, 1])
        assert receipt["gold"] is None
        seen.append(task["solution"]["id"])
    assert csrf
    # Both gold items first (rate 1), each once, then the regular queue.
    assert set(seen[:2]) == qc and set(seen[2:]) == set(regular) and len(seen) == 5
    qc_body, regular_body = tasks[0], tasks[-1]
    assert _keys(qc_body) == _keys(regular_body)
    assert type(qc_body["task"]["assignment_id"]) is int and qc_body["task"]["expires_at"]
    # A check slot is made when it is leased, so its row id is the newest; the ids the labeler
    # saw are not row ids (app.labeling.task_handles), and each names its own slot.
    with session_scope(session_factory) as session:
        handles = [body["task"]["assignment_id"] for body in tasks]
        rows = [assignment_of(session, handle) for handle in handles]
        check_rows = {row for row, body in zip(rows, tasks) if body["task"]["solution"]["id"] in qc}
        assert check_rows == set(sorted(rows)[-2:]) and not set(handles) & set(rows)
        assert [session.get(Assignment, row).solution_id for row in rows] == seen


def test_feedback_shows_the_gold_after_submitting(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], qc_rate=1.0, qc_feedback=True)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    assert task["problem"]["statement"] == "Problem Q1"
    receipt = _submit(client, ann, task, [1, 1, 1])
    assert receipt["gold"] == [1, -1]
    # Sent again (its answer lost on the way): the same receipt, the gold with it.
    again = _submit(client, ann, task, [1, 1, 1])
    assert (again["duplicate"], again["gold"]) == (True, [1, -1])
    regular = _next(client, project, ann)["task"]
    assert _submit(client, ann, regular, [1, 1, 1])["gold"] is None


@pytest.mark.parametrize("reason", ["give_up", "bad_problem"])
def test_a_give_up_or_bad_problem_on_a_check_item_shows_no_gold(client, session_factory, reason) -> None:  # type: ignore[no-untyped-def]
    # Neither is graded: shown the gold, a labeler could give up on each check item to read it.
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], qc_rate=1.0, qc_feedback=True)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    assert task["problem"]["statement"] == "Problem Q1"
    body = {"idempotency_key": "ann-check-0001", "ratings": [{"rating": 1}], "finish_reason": reason,
            "finish_note": "cannot tell", "total_time_ms": 1000}
    receipt = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=ann, json=body)
    assert receipt.status_code == 200, receipt.text
    assert receipt.json()["gold"] is None
    again = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=ann, json=body).json()
    assert (again["duplicate"], again["gold"]) == (True, None)


def test_a_gold_solution_served_as_an_ordinary_task_shows_its_gold_too(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Overlap 2: the imported gold label fills one slot, the other is an ordinary task.
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=0, overlap=2, qc_feedback=True)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    assert task["problem"]["statement"] == "Problem Q1"
    assert _submit(client, ann, task, [1, 1, 1])["gold"] == [1, -1]


def test_a_screening_items_answers_are_never_shown(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Screening items come in a fixed order to every newcomer: shown, their answers would be
    # passed on to the next one. Met later as an ordinary task, the same.
    project, regular = _project(session_factory, SCREENING, regular=1, screening_items=2, screening_pass_mark=0.0,
                                qc_feedback=True, overlap=2)
    screening = _gold_ids(session_factory, screening=True)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    receipts = []
    for _ in range(4):
        task = _next(client, project, ann)["task"]
        if task is None:
            break
        receipts.append((task["solution"]["id"] in screening, _submit(client, ann, task, [1, 1, 1])["gold"]))
    assert (True, None) in receipts and all(gold is None for is_screening, gold in receipts if is_screening)


def test_low_qc_accuracy_pauses_until_admitted(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    golds = [_gold(f"Q{i}", [1, -1]) for i in range(6)]
    project, regular = _project(session_factory, golds, qc_rate=1.0, qc_pause_below=0.5)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann = api_headers(client, "ann")
    served = set()
    for _ in range(5):
        task = _next(client, project, ann)["task"]
        served.add(task["problem"]["statement"])
        _submit(client, ann, task, [1, 1, 1])  # never agrees
    paused = _next(client, project, ann)
    assert paused["task"] is None and "paused" in paused["reason"]
    boss = api_headers(client, "boss")
    standing = client.get(f"/api/v1/projects/{project.id}/screening", headers=boss).json()[0]
    assert (standing["qc_compared"], standing["qc_agreed"], standing["status"]) == (5, 0, "paused")
    client.post(f"/api/v1/projects/{project.id}/screening/{standing['user_id']}", headers=boss, json={"decision": "admit"})
    task = _next(client, project, ann)["task"]
    # Unpaused, with the gold item not served yet still to come at rate 1.
    assert task["problem"]["statement"] in {f"Problem Q{i}" for i in range(6)} - served


def test_a_released_check_item_comes_back_as_an_ordinary_task_does(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Handing a task back and asking again must not tell a check item from the rest: a check
    # slot deleted on release came back under a new id, where an ordinary slot keeps its own.
    project, (regular,) = _project(session_factory, [_gold("Q1", [1, -1])], regular=1, qc_rate=1.0)
    (gold,) = _gold_ids(session_factory)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    ann = api_headers(client, "ann")
    seen = []
    for solution in (gold, regular):
        task = _next(client, project, ann)["task"]
        assert task["solution"]["id"] == solution
        handle = task["assignment_id"]
        assert client.post(f"/api/v1/assignments/{handle}/release", headers=ann).status_code == 204
        # Handed back, it is no longer the labeler's to submit or renew, whichever kind it is.
        late = client.post(f"/api/v1/assignments/{handle}/submit", headers=ann,
                           json={"idempotency_key": f"late-{solution:04d}", "ratings": [{"rating": 1}] * 3,
                                 "finish_reason": "solution", "total_time_ms": 1000})
        renewed = client.post(f"/api/v1/assignments/{handle}/renew", headers=ann)
        again = _next(client, project, ann)
        seen.append((late.status_code, renewed.status_code, again["task"]["assignment_id"] == handle, again["waiting"]))
        assert again["task"]["solution"]["id"] == solution
        _submit(client, ann, again["task"], [1, 1, 1])
    assert seen[0] == seen[1] == (404, 404, True, 0)
    # Nobody else was served ann's check slot: bob gets a check slot of his own on the gold.
    bob_task = _next(client, project, api_headers(client, "bob"))["task"]
    with session_scope(session_factory) as session:
        assert session.get(Assignment, assignment_of(session, bob_task["assignment_id"])).slot < 0


def test_a_handed_back_check_item_whose_solution_the_labeler_labeled_since_is_not_served_again(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Handed back, a check slot names no holder, so the queue may serve its labeler an ordinary
    # slot of the same solution; served the check item after that, they would label it twice.
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=0, overlap=3, qc_rate=1.0)
    (gold,) = _gold_ids(session_factory)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann, boss = api_headers(client, "ann"), api_headers(client, "boss")
    check = _next(client, project, ann)["task"]
    assert client.post(f"/api/v1/assignments/{check['assignment_id']}/release", headers=ann).status_code == 204
    client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"qc_rate": 0}).raise_for_status()
    ordinary = _next(client, project, ann)["task"]
    assert ordinary["solution"]["id"] == gold and ordinary["assignment_id"] != check["assignment_id"]
    _submit(client, ann, ordinary, [1, 1, 1])
    client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"qc_rate": 1.0}).raise_for_status()
    assert _next(client, project, ann)["task"] is None
    with session_scope(session_factory) as session:
        assert session.scalars(select(Label.solution_id).where(Label.user_id.is_not(None))).all() == [gold]
        assert session.scalar(select(func.count()).select_from(Assignment).where(Assignment.slot < 0)) == 0


def test_the_qc_draw_comes_before_a_handed_back_check_item_as_before_an_ordinary_slot(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Served again at once and always, a handed-back check item told itself from an ordinary
    # slot, which the QC draw may pass over for a check item.
    project, _ = _project(session_factory, [_gold("Q1", [1, -1]), _gold("Q2", [1, 1, 1])], regular=0,
                          qc_rate=1.0)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    first = _next(client, project, ann)["task"]
    assert client.post(f"/api/v1/assignments/{first['assignment_id']}/release", headers=ann).status_code == 204
    second = _next(client, project, ann)["task"]
    assert second["solution"]["id"] != first["solution"]["id"]
    _submit(client, ann, second, [1, 1, 1])
    # No other gold left to draw: the one handed back, under its own id.
    assert _next(client, project, ann)["task"]["assignment_id"] == first["assignment_id"]


@pytest.mark.parametrize("way", ["retire", "restrict"])
def test_a_handed_back_check_slot_goes_with_its_labeler(client, session_factory, way) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=1, qc_rate=1.0)
    ann_id = make_user(session_factory, "ann", "labeler").id
    make_user(session_factory, "boss", "manager")
    ann, boss = api_headers(client, "ann"), api_headers(client, "boss")
    task = _next(client, project, ann)["task"]
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=ann).status_code == 204
    if way == "retire":
        response = client.post(f"/api/v1/projects/{project.id}/screening/{ann_id}", headers=boss,
                               json={"decision": "retire"})
    else:
        response = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"open_to_all": False})
    assert response.status_code == 200, response.text
    with session_scope(session_factory) as session:
        assert session.scalars(select(Assignment.slot).where(Assignment.slot < 0)).all() == []


def test_settings_and_decisions_on_the_project_page(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, SCREENING, screening_items=2, screening_pass_mark=1.0)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann = api_headers(client, "ann")
    for _ in range(2):
        _submit(client, ann, _next(client, project, ann)["task"], [-1])
    csrf = browser_login(client, "boss")
    page = client.get(f"/manage/projects/{project.id}")
    assert "failed screening" in page.text and 'name="qc_rate"' in page.text
    ann_id = client.get(f"/api/v1/projects/{project.id}/screening", headers=api_headers(client, "boss")).json()[0]["user_id"]
    url = f"/manage/projects/{project.id}/screening/{ann_id}"
    assert client.post(url, data={"decision": "admit"}, follow_redirects=False).status_code == 403
    done = client.post(url, data={"decision": "admit", "csrf_token": csrf}, follow_redirects=False)
    assert done.status_code == 303
    assert ">admitted<" in client.get(f"/manage/projects/{project.id}").text
    assert "ann is admitted: screening is behind them" in client.get(done.headers["location"]).text
    retired = client.post(url, data={"decision": "retire", "csrf_token": csrf}, follow_redirects=False)
    shown = client.get(retired.headers["location"]).text
    assert "ann is retired from this project: it serves them no more tasks." in shown and "is admitted" not in shown
    client.post(url, data={"decision": "admit", "csrf_token": csrf})
    saved = client.post(
        f"/manage/projects/{project.id}/settings",
        data={"csrf_token": csrf, "qc_rate": "0.25", "qc_feedback": "true", "qc_pause_below": "0.6",
              "screening_items": "3", "screening_pass_mark": "0.8", "overlap": "1", "lease_minutes": "30",
              "correction_window_hours": "24", "labeling_mode": "first_error", "description": ""},
        follow_redirects=False,
    )
    assert saved.status_code == 303
    read = client.get(f"/api/v1/projects/{project.id}", headers=api_headers(client, "boss")).json()
    assert (read["qc_rate"], read["qc_feedback"], read["qc_pause_below"], read["screening_items"]) == (0.25, True, 0.6, 3)


def test_a_project_without_checks_serves_gold_only_through_its_slots(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, regular = _project(session_factory, [_gold("Q1", [1, -1])])
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    seen = set()
    while (task := _next(client, project, ann)["task"]) is not None:
        seen.add(task["solution"]["id"])
        _submit(client, ann, task, [1, 1, 1])
    assert seen == set(regular)


@pytest.mark.parametrize(
    ("project_settings", "shown"),
    [
        ({"qc_rate": 1.0, "qc_feedback": True}, True),
        # Graded as first sent without the gold shown too: the rule does not hang on a setting
        # that may change after the label, or on the slot that served it (here an ordinary one).
        ({"qc_rate": 1.0, "qc_feedback": False}, False),
        ({"qc_feedback": True, "overlap": 2}, True),
        ({"qc_feedback": False, "overlap": 2}, False),
    ],
)
def test_every_qc_measure_grades_a_gold_item_as_first_sent(client, session_factory, project_settings, shown) -> None:  # type: ignore[no-untyped-def]
    graded = (1, 0)
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=0, **project_settings)
    ann_id = make_user(session_factory, "ann", "labeler").id
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    receipt = _submit(client, ann, task, [1, 1, 1])
    assert (receipt["gold"] is not None) == shown
    corrected = client.post(
        f"/api/v1/me/labels/{receipt['label_id']}/corrections",
        headers=ann,
        json={"idempotency_key": "fix-it-02", "ratings": [{"rating": 1}, {"rating": -1}],
              "finish_reason": "found_error", "total_time_ms": 10},
    )
    assert corrected.status_code == 200, corrected.text

    make_user(session_factory, "boss", "manager")
    standing = client.get(f"/api/v1/projects/{project.id}/screening", headers=api_headers(client, "boss")).json()
    assert [(s["qc_compared"], s["qc_agreed"]) for s in standing] == [graded]
    with session_scope(session_factory) as session:
        assert [(a.compared, a.agreed) for a in labeler_accuracy(session, project.id) if a.user_id] == [graded]
        assert ann_id not in accurate_labelers(session, project.id, 1.0).user_ids
        (activity,) = project_activity(session, project.id).labelers
        assert (activity.qc_compared, activity.qc_accuracy) == (1, graded[1])


def test_screening_turned_on_later_holds_back_no_one_who_labeled_before(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """old labeled here before screening was asked for, meeting screening items among ordinary
    tasks and missing them: screening is for newcomers, so old goes on labeling; new is screened."""
    project, regular = _project(session_factory, SCREENING, overlap=2)
    screening = _gold_ids(session_factory, screening=True)
    make_user(session_factory, "old", "labeler")
    make_user(session_factory, "new", "labeler")
    make_user(session_factory, "boss", "manager")
    old, boss = api_headers(client, "old"), api_headers(client, "boss")
    met = set()
    while (task := _next(client, project, old)["task"]) is not None:
        met.add(task["solution"]["id"])
        _submit(client, old, task, [1, 1, -1])
    assert screening <= met
    add_problem(session_factory, project, "What is 2+2?", n_solutions=2)
    client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"screening_items": 2, "screening_pass_mark": 1.0})
    assert _next(client, project, old)["task"] is not None
    assert _next(client, project, api_headers(client, "new"))["task"]["solution"]["id"] in screening
    standings = client.get(f"/api/v1/projects/{project.id}/screening", headers=boss).json()
    # Met as ordinary tasks, the screening items were no screening answers: checks like any gold.
    assert [(s["username"], s["screening_done"], s["qc_compared"], s["status"]) for s in standings] == [
        ("old", 0, 3, "labeling")
    ]


def test_a_labeler_whose_earlier_label_was_made_screening_gold_is_not_screened(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """lee and mia labeled a solution before screening; mia's label became its screening gold,
    which lee's disagrees with. lee's label was no screening answer: he labeled before."""
    project = make_project(session_factory, overlap=2)
    add_problem(session_factory, project, "What is 3+3?", n_solutions=1)
    for name in ("lee", "mia", "boss"):
        make_user(session_factory, name, "manager" if name == "boss" else "labeler")
    lee, mia, boss = api_headers(client, "lee"), api_headers(client, "mia"), api_headers(client, "boss")
    _submit(client, lee, _next(client, project, lee)["task"], [-1])
    _submit(client, mia, _next(client, project, mia)["task"], [1, 1, 1])
    with session_scope(session_factory) as session:
        mias = session.scalar(select(Label.id).join(User, User.id == Label.user_id).where(User.username == "mia"))
    assert client.put(f"/api/v1/projects/{project.id}/labels/{mias}/gold", headers=boss,
                      json={"screening": True}).status_code == 200
    add_problem(session_factory, project, "What is 4+4?", n_solutions=2)
    client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"screening_items": 1, "screening_pass_mark": 1.0})
    assert _next(client, project, lee)["task"] is not None


def test_a_screening_item_taken_off_gold_does_not_let_a_failed_newcomer_through(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, SCREENING, screening_items=2, screening_pass_mark=1.0)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann, boss = api_headers(client, "ann"), api_headers(client, "boss")
    for _ in range(2):
        _submit(client, ann, _next(client, project, ann)["task"], [-1])  # a miss on S2
    assert _next(client, project, ann)["task"] is None
    with session_scope(session_factory) as session:
        first = session.scalar(select(Label.id).where(Label.is_quality_control.is_(True),
                                                      Label.is_initial_screening.is_(True)).order_by(Label.id))
    assert client.delete(f"/api/v1/projects/{project.id}/labels/{first}/gold", headers=boss).status_code == 200
    held = _next(client, project, ann)
    assert held["task"] is None and "screening" in held["reason"]
    standing = client.get(f"/api/v1/projects/{project.id}/screening", headers=boss).json()[0]
    assert (standing["screening_done"], standing["status"]) == (1, "failed screening")


def test_a_newcomer_holding_their_last_screening_item_is_still_screening(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, SCREENING, screening_items=2, screening_pass_mark=1.0)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann, boss = api_headers(client, "ann"), api_headers(client, "boss")
    _submit(client, ann, _next(client, project, ann)["task"], [-1])
    assert _next(client, project, ann)["task"] is not None
    standing = client.get(f"/api/v1/projects/{project.id}/screening", headers=boss).json()[0]
    assert (standing["screening_done"], standing["status"]) == (1, "screening")


@pytest.mark.parametrize(("answers", "status"), [({"Problem S1": [1, -1], "Problem S2": [1, 1, 1]}, "passed screening"),
                                                  ({"Problem S1": [1, 1, 1], "Problem S2": [-1]}, "failed screening")])
def test_a_labeler_who_answered_every_screening_item_there_is_stands_as_the_queue_treats_them(client, session_factory, answers, status) -> None:  # type: ignore[no-untyped-def]
    """Three screening answers asked for and two items to answer: the queue decides on those
    two, and the manager's card says what it decided."""
    project, regular = _project(session_factory, SCREENING, screening_items=3, screening_pass_mark=1.0)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann = api_headers(client, "ann")
    for _ in range(2):
        task = _next(client, project, ann)["task"]
        _submit(client, ann, task, answers[task["problem"]["statement"]])
    after = _next(client, project, ann)
    assert (after["task"] is not None) == (status == "passed screening")
    standings = client.get(f"/api/v1/projects/{project.id}/screening", headers=api_headers(client, "boss")).json()
    assert [(s["username"], s["screening_done"], s["status"]) for s in standings] == [("ann", 2, status)]


def test_a_check_item_whose_lease_ran_out_is_served_again_and_its_late_submit_kept(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], qc_rate=1.0)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = _next(client, project, ann)["task"]
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=Assignment.leased_at))
    # The page reloaded: the same item, for a whole lease again.
    again = _next(client, project, ann)["task"]
    assert again["assignment_id"] == task["assignment_id"] and again["expires_at"] > task["expires_at"]
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=Assignment.leased_at))
    # Sent late, without another next-task between: kept.
    _submit(client, ann, task, [1, -1])
    with session_scope(session_factory) as session:
        assert session.scalar(select(Label.solution_id).where(Label.user_id.is_not(None))) == task["solution"]["id"]


def test_a_check_item_of_a_problem_retired_while_its_lease_ran_out_still_takes_its_late_submit(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=1, qc_rate=1.0)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "boss", "manager")
    ann, boss = api_headers(client, "ann"), api_headers(client, "boss")
    task = _next(client, project, ann)["task"]
    retired = client.post(f"/api/v1/projects/{project.id}/problems/{task['problem']['id']}/retire", headers=boss)
    assert retired.status_code == 200
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(expires_at=Assignment.leased_at))
    # The other tab asks for work: not that item, which nobody is served any more.
    assert _next(client, project, ann)["task"]["problem"]["id"] != task["problem"]["id"]
    _submit(client, ann, task, [1, -1])


def test_a_check_item_says_as_many_tasks_waiting_as_an_ordinary_task_would(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """Leasing an ordinary task takes a waiting slot, and a check item's takes none: told the
    count as it is, a labeler working alone would tell them apart."""
    project, regular = _project(session_factory, [_gold("Q1", [1, -1])], regular=3, qc_rate=1.0)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    check = _next(client, project, ann)
    assert check["task"]["solution"]["id"] not in regular
    assert _next(client, project, ann)["waiting"] == check["waiting"] == 2, "the same, asked again"
    _submit(client, ann, check["task"], [1, -1])
    ordinary = _next(client, project, ann)
    assert ordinary["task"]["solution"]["id"] in regular and ordinary["waiting"] == 2


def test_check_answers_fill_the_overlap_as_labels_do(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Overlap 3: the imported gold and two check answers are three labels. Ordinary slots left
    # beside them waited for a labeler who had not labeled the solution, and with every labeler
    # checked on it none ever came: the solution stayed in progress.
    project, _ = _project(session_factory, [_gold("Q1", [1, -1])], regular=0, overlap=3, qc_rate=1.0)
    (gold,) = _gold_ids(session_factory)

    def ordinary_slots() -> list[str]:
        with session_scope(session_factory) as session:
            return list(session.scalars(select(Assignment.status).where(Assignment.solution_id == gold,
                                                                        Assignment.slot >= 0)))

    assert ordinary_slots() == ["waiting", "waiting"]
    for name in ("ann", "bob"):
        make_user(session_factory, name, "labeler")
        headers = api_headers(client, name)
        task = _next(client, project, headers)["task"]
        assert task["solution"]["id"] == gold
        _submit(client, headers, task, [1, 1, 1])
    assert ordinary_slots() == []
    make_user(session_factory, "boss", "manager")
    manager = api_headers(client, "boss")
    progress = client.get(f"/api/v1/projects/{project.id}/progress", headers=manager).json()
    assert (progress["solutions_done"], progress["solutions_in_progress"], progress["labels_to_go"]) == (1, 0, 0)
    # Raising and lowering the overlap count them too.
    for overlap, slots in ((4, ["waiting"]), (3, [])):
        response = client.patch(f"/api/v1/projects/{project.id}", headers=manager, json={"overlap": overlap})
        assert response.status_code == 200, response.text
        assert ordinary_slots() == slots


def test_standings_sort_names_in_any_case(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # As the users list does: "Zoe" sorted before "ann" by code point.
    project, _ = _project(session_factory, SCREENING, screening_items=2)
    ids = {name: make_user(session_factory, name, "labeler").id for name in ("bob", "Zoe", "ann", "Carl")}
    make_user(session_factory, "boss", "manager")
    boss = api_headers(client, "boss")
    url = f"/api/v1/projects/{project.id}/screening"
    for user_id in ids.values():
        assert client.post(f"{url}/{user_id}", headers=boss, json={"decision": "admit"}).status_code == 200
    assert [s["username"] for s in client.get(url, headers=boss).json()] == ["ann", "bob", "Carl", "Zoe"]
