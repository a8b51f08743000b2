"""What a submit's body may hold: a rating is a whole number, -1, 0 or 1 (1.0 is 1, as in every
whole-number field), and not true, false or text equal to one."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from app.labeling.schemas import LabelSubmit
from tests.conftest import add_solutions, api_headers, make_project, make_user

BODY = {"idempotency_key": "strict-key-1", "finish_reason": "solution", "total_time_ms": 10}


def _ratings(rating: object) -> dict[str, object]:
    return {**BODY, "ratings": [{"rating": rating}]}


def _alternatives(rating: object) -> dict[str, object]:
    return {**BODY, "alternatives": [{"ratings": [{"rating": rating}], "chosen": 0}]}


def _written(rating: object) -> dict[str, object]:
    return {**BODY, "alternatives": [{"ratings": [{"rating": -1}], "human": {"text": "x = 2", "rating": rating}}]}


@pytest.mark.parametrize("body", [_ratings, _alternatives, _written])
@pytest.mark.parametrize("rating", [True, False, 0.5, "1", 2])
def test_a_rating_that_only_equals_an_integer_is_refused(body, rating) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError):
        LabelSubmit.model_validate_json(json.dumps(body(rating)))


@pytest.mark.parametrize("body", [_ratings, _alternatives, _written])
def test_integer_ratings_are_taken(body) -> None:  # type: ignore[no-untyped-def]
    for rating in (1, 0) if body is _written else (-1, 0, 1):
        LabelSubmit.model_validate_json(json.dumps(body(rating)))


@pytest.mark.parametrize("body", [_ratings, _alternatives, _written])
def test_a_whole_float_rating_is_the_whole_number_it_writes(body) -> None:  # type: ignore[no-untyped-def]
    submit = LabelSubmit.model_validate_json(json.dumps(body(1.0)))
    rated = submit.ratings[0] if body is _ratings else (
        submit.alternatives[0].ratings[0] if body is _alternatives else submit.alternatives[0].human)
    assert type(rated.rating) is int and rated.rating == 1
    with pytest.raises(ValidationError, match="int_from_float"):
        LabelSubmit.model_validate_json(json.dumps(body(0.5)))


def test_a_submit_takes_a_whole_float_rating_as_other_whole_number_fields(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 1, steps=1)
    make_user(session_factory, "ann", "labeler")
    headers = api_headers(client, "ann")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    submit = f"/api/v1/assignments/{task['assignment_id']}/submit"
    half = client.post(submit, headers=headers, json={**BODY, "ratings": [{"rating": 0.5}]})
    assert half.status_code == 422 and half.json()["errors"][0]["message"] == "must be a whole number"
    taken = client.post(submit, headers=headers, json={**BODY, "ratings": [{"rating": 1.0}], "total_time_ms": 10.0})
    assert taken.status_code == 200, taken.text
