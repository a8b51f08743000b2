"""Phase-1 mode: a task's alternatives come from an imported phase-1 record; a label rates every
one, chooses one or writes a step, and is stored and exported in PRM800K's phase-1 shape."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import func, select

from app.db import session_scope
from app.labeling.task_handles import assignment_of
from app.models import Assignment, AssignmentStatus, Label, Project
from app.projects.schemas import ProjectUpdate
from app.projects.service import update_project
from tests.conftest import api_headers, make_project, make_user
from tests.exports.conftest import export
from tests.imports.conftest import import_bytes, jsonl, sample_records

# The sample's phase-1 record with a human completion: f(g(-2)).
RECORD = next(r for r in sample_records() if r["question"]["problem"].startswith("If $f(x)"))
ALTERNATIVES = [[c["text"] for c in step["completions"]] for step in RECORD["label"]["steps"]]
HUMAN = "$g(-2) = (-2 - 1)^2 = (-3)^2 = 9$, the square of $-3$."


def _setup(client, session_factory, mode: str = "phase1"):  # type: ignore[no-untyped-def]
    # Overlap 2: the imported label fills one slot, the other waits for a labeler.
    project = make_project(session_factory, "phase one", labeling_mode=mode, overlap=2)
    import_bytes(session_factory, project, jsonl([RECORD]), filename="phase1.jsonl")
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    return project, headers, task


def _label(**changes: Any) -> dict[str, Any]:
    body = {
        "idempotency_key": "phase-one-0001",
        "alternatives": [
            {"ratings": [{"rating": 1}, {"rating": -1}], "chosen": 0},
            {"ratings": [{"rating": -1}, {"rating": 0, "flagged": True}], "human": {"text": HUMAN, "rating": 1}},
            {"ratings": [{"rating": 1}], "chosen": 0},
        ],
        "finish_reason": "solution",
        "total_time_ms": 4321,
    }
    return {**body, **changes}


def _submit(client, headers, task, body):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=body)


def test_the_task_carries_the_imported_records_alternatives(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    _, _, task = _setup(client, session_factory)
    assert task["labeling_mode"] == "phase1"
    assert task["solution"]["alternatives"] == ALTERNATIVES


def test_other_modes_have_no_alternatives_and_refuse_them(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    _, headers, task = _setup(client, session_factory, mode="first_error")
    assert task["solution"]["alternatives"] is None
    response = _submit(client, headers, task, _label())
    assert response.status_code == 422 and "phase-1 projects" in response.json()["detail"]


def test_a_label_is_stored_and_exported_in_phase_1_shape_and_comes_back(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _setup(client, session_factory)
    response = _submit(client, headers, task, _label())
    assert response.status_code == 200, response.text
    own = client.get(f"/api/v1/me/labels/{response.json()['label_id']}", headers=headers).json()
    assert [(s["text"], s["rating"], s["flagged"]) for s in own["steps"]] == [
        (ALTERNATIVES[0][0], 1, False), (HUMAN, 1, False), (ALTERNATIVES[2][0], 1, False)
    ]
    # Every rating given counts, and each step carries the alternatives rated and left there.
    assert own["ratings"] == {"positive": 3, "neutral": 1, "negative": 2}
    assert [s["written"] for s in own["steps"]] == [False, True, False]
    assert [[(o["text"], o["rating"], o["flagged"]) for o in s["others"]] for s in own["steps"]] == [
        [(ALTERNATIVES[0][1], -1, False)],
        [(ALTERNATIVES[1][0], -1, False), (ALTERNATIVES[1][1], 0, True)],
        [],
    ]
    assert own["correction"]["open"] is False
    [line] = export(session_factory, project, labelers=["lena"]).splitlines()
    record = orjson.loads(line)
    assert record["question"] == RECORD["question"]
    assert record["label"] == {
        "steps": [
            {
                "completions": [
                    {"text": ALTERNATIVES[0][0], "rating": 1, "flagged": False},
                    {"text": ALTERNATIVES[0][1], "rating": -1, "flagged": False},
                ],
                "human_completion": None,
                "chosen_completion": 0,
            },
            {
                "completions": [
                    {"text": ALTERNATIVES[1][0], "rating": -1, "flagged": False},
                    {"text": ALTERNATIVES[1][1], "rating": 0, "flagged": True},
                ],
                "human_completion": {
                    "text": HUMAN,
                    "rating": 1,
                    "source": "human",
                    "flagged": False,
                    "corrected_rating": None,
                },
                "chosen_completion": None,
            },
            {
                "completions": [{"text": ALTERNATIVES[2][0], "rating": 1, "flagged": False}],
                "human_completion": None,
                "chosen_completion": 0,
            },
        ],
        "total_time": 4321,
        "finish_reason": "solution",
    }
    # Imported elsewhere, the record is a phase-1 record like any other: its solution is the
    # path the labeler took, and it exports as it came.
    other = make_project(session_factory, "elsewhere")
    result = import_bytes(session_factory, other, line + b"\n", filename="export.jsonl")
    assert result.added == {"problems": 1, "solutions": 1, "labels": 1}
    assert orjson.loads(export(session_factory, other)) == record
    trl = [orjson.loads(x) for x in export(session_factory, other, "trl").splitlines()]
    assert trl[0]["completions"] == [ALTERNATIVES[0][0], HUMAN, ALTERNATIVES[2][0]]


def test_found_error_ends_on_a_step_with_nothing_to_continue_with(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _setup(client, session_factory)
    body = _label(
        alternatives=[
            {"ratings": [{"rating": 1}, {"rating": -1}], "chosen": 0},
            {"ratings": [{"rating": -1}, {"rating": -1}]},
        ],
        finish_reason="found_error",
    )
    assert _submit(client, headers, task, body).status_code == 200
    [line] = export(session_factory, project, labelers=["lena"]).splitlines()
    steps = orjson.loads(line)["label"]["steps"]
    assert [s["chosen_completion"] for s in steps] == [0, None]
    assert [s["human_completion"] for s in steps] == [None, None]


def test_a_give_up_keeps_the_steps_rated_so_far(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _setup(client, session_factory)
    body = _label(alternatives=[_step([1, -1], chosen=0)], finish_reason="give_up", finish_note="unsure about $g$")
    assert _submit(client, headers, task, body).status_code == 200
    [line] = export(session_factory, project, labelers=["lena"]).splitlines()
    label = orjson.loads(line)["label"]
    assert label["finish_reason"] == "give_up" and label["finish_note"] == "unsure about $g$"
    assert [s["chosen_completion"] for s in label["steps"]] == [0]


def _step(ratings: list[int], **more: Any) -> dict[str, Any]:
    return {"ratings": [{"rating": r} for r in ratings], **more}


GOOD = [_step([1, -1], chosen=0), _step([-1, -1], human={"text": HUMAN, "rating": 1}), _step([1], chosen=0)]


@pytest.mark.parametrize(
    ("changes", "status", "words"),
    [
        ({"alternatives": [_step([1], chosen=0), *GOOD[1:]]}, 422, "1 rating for 2 alternatives"),
        ({"alternatives": [_step([1, -1], chosen=2), *GOOD[1:]]}, 422, "numbered 0 to 1"),
        ({"alternatives": [_step([-1, 1], chosen=0), *GOOD[1:]]}, 422, "chosen alternative is rated -1"),
        ({"alternatives": [_step([1, -1]), *GOOD[1:]]}, 422, "continues with nothing"),
        ({"alternatives": GOOD[:2]}, 422, "solution needs every step"),
        ({"alternatives": GOOD, "finish_reason": "found_error"}, 422, "found_error needs"),
        ({"alternatives": [*GOOD, _step([1], chosen=0)]}, 422, "4 steps sent for a task of 3"),
        ({"alternatives": None, "ratings": [{"rating": 1}] * 3}, 422, "not `ratings`"),
        ({"alternatives": GOOD[:1], "finish_reason": "give_up"}, 422, "needs a reason"),
        # Zero-width and ideographic spaces show nothing: no reason either.
        ({"alternatives": GOOD[:1], "finish_reason": "give_up", "finish_note": "\u200b \u3000"}, 422, "needs a reason"),
        (
            {"alternatives": [_step([1, -1], chosen=0, human={"text": HUMAN, "rating": 1}), *GOOD[1:]]},
            422,
            "not both",
        ),
        ({"alternatives": [GOOD[0], _step([-1, -1], human={"text": "  ", "rating": 1}), GOOD[2]]}, 422, "blank"),
        ({"alternatives": [GOOD[0], _step([-1, -1], human={"text": HUMAN, "rating": -1}), GOOD[2]]}, 422, "rating"),
    ],
)
def test_bad_labels_are_refused_and_change_nothing(client, session_factory, changes, status, words) -> None:  # type: ignore[no-untyped-def]
    _, headers, task = _setup(client, session_factory)
    response = _submit(client, headers, task, _label(**changes))
    assert response.status_code == status, response.text
    assert words in response.text
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label).where(Label.user_id.is_not(None))) == 0
        assert session.get(Assignment, assignment_of(session, task["assignment_id"])).status == AssignmentStatus.leased
    assert _submit(client, headers, task, _label()).status_code == 200


def test_a_phase_1_label_stays_uncorrectable_after_the_project_leaves_phase_1(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers, task = _setup(client, session_factory)
    label_id = _submit(client, headers, task, _label()).json()["label_id"]
    with session_scope(session_factory) as session:
        update_project(session, session.get(Project, project.id), ProjectUpdate(labeling_mode="full"))

    own = client.get(f"/api/v1/me/labels/{label_id}", headers=headers).json()
    assert own["labeling_mode"] == "phase1"
    assert [s["text"] for s in own["steps"]] == [ALTERNATIVES[0][0], HUMAN, ALTERNATIVES[2][0]]
    assert own["correction"] == {"open": False, "closes_at": None, "reason": "a phase-1 label cannot be corrected"}
    refused = client.post(
        f"/api/v1/me/labels/{label_id}/corrections",
        headers=headers,
        json={"idempotency_key": "phase-one-fix1", "ratings": [{"rating": 1}] * 3,
              "finish_reason": "solution", "total_time_ms": 1000},
    )
    assert refused.status_code == 409 and "a phase-1 label cannot be corrected" in refused.json()["detail"]
    with session_scope(session_factory) as session:
        label = session.get(Label, label_id)
        assert label.superseded_at is None and label.steps[1]["human_completion"]["text"] == HUMAN
        assert session.scalar(select(func.count()).select_from(Label).where(Label.supersedes_id.is_not(None))) == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"alternatives": [_step([0, -1], chosen=0), *GOOD[1:]]},
        {"alternatives": [GOOD[0], _step([-1, -1], human={"text": HUMAN + " Checked.", "rating": 1}), GOOD[2]]},
        {"alternatives": [GOOD[0], _step([-1, -1], human={"text": HUMAN, "rating": 1, "flagged": True}), GOOD[2]]},
        {"alternatives": [GOOD[0], {"ratings": [{"rating": -1}, {"rating": 0, "flagged": False}],
                                    "human": {"text": HUMAN, "rating": 1}}, GOOD[2]]},
        {"finish_reason": "give_up", "finish_note": "too long"},
    ],
)
def test_a_key_resent_with_other_choices_is_refused_and_the_label_stays(client, session_factory, changes) -> None:  # type: ignore[no-untyped-def]
    _, headers, task = _setup(client, session_factory)
    stored = _submit(client, headers, task, _label())
    assert stored.status_code == 200, stored.text
    refused = _submit(client, headers, task, _label(**changes))
    assert refused.status_code == 409 and "different submission" in refused.json()["detail"], refused.text
    again = _submit(client, headers, task, _label())
    assert again.status_code == 200 and again.json()["duplicate"] and again.json()["label_id"] == stored.json()["label_id"]
