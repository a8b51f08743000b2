"""A rule the writable schemas share."""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class NumbersNotTruthValues(BaseModel):
    """Refuses JSON `true` and `false` for numbers: pydantic reads them as 1 and 0, so
    `"selector_version_id": true` pinned version 1 and `"correction_window_hours": false`
    closed corrections. Browser forms send text, which this leaves to the fields' own checks.
    Refuses "nan" and infinities too, which failed a 0-1 range as "must be at most 1.0"."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_not_truth_values(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = _kinds(cls.model_fields[info.field_name].annotation)
        if bool in kinds or not kinds & {int, float}:
            return value
        values = value.values() if isinstance(value, dict) else [value]
        if any(isinstance(item, bool) for item in values):
            raise ValueError("must be a number, not true or false")
        return value


@cache
def _kinds(annotation: Any) -> frozenset[Any]:
    """The types an annotation names, its unions' and containers' included (once per field:
    every request's every field asks)."""
    kinds = {annotation}
    for arg in get_args(annotation):
        kinds |= _kinds(arg)
    return frozenset(kinds)
