"""What a submit's body may hold: a rating is a JSON integer, -1, 0 or 1, and nothing equal to one."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from app.labeling.schemas import LabelSubmit

BODY = {"idempotency_key": "strict-key-1", "finish_reason": "solution", "total_time_ms": 10}


def _ratings(rating: object) -> dict[str, object]:
    return {**BODY, "ratings": [{"rating": rating}]}


def _alternatives(rating: object) -> dict[str, object]:
    return {**BODY, "alternatives": [{"ratings": [{"rating": rating}], "chosen": 0}]}


def _written(rating: object) -> dict[str, object]:
    return {**BODY, "alternatives": [{"ratings": [{"rating": -1}], "human": {"text": "x = 2", "rating": rating}}]}


@pytest.mark.parametrize("body", [_ratings, _alternatives, _written])
@pytest.mark.parametrize("rating", [True, False, 1.0, 0.0, "1", 2])
def test_a_rating_that_only_equals_an_integer_is_refused(body, rating) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError):
        LabelSubmit.model_validate_json(json.dumps(body(rating)))


@pytest.mark.parametrize("body", [_ratings, _alternatives, _written])
def test_integer_ratings_are_taken(body) -> None:  # type: ignore[no-untyped-def]
    for rating in (1, 0) if body is _written else (-1, 0, 1):
        LabelSubmit.model_validate_json(json.dumps(body(rating)))
