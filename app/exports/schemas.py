from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ExportFormat(StrEnum):
    prm800k = "prm800k"
    trl = "trl"
    parquet = "parquet"


class ExportFilters(BaseModel):
    """Which labels go out. Dates are UTC days: `since` included, `until` excluded."""

    model_config = ConfigDict(extra="forbid")

    since: date | None = Field(default=None, description="labels created on or after this day")
    until: date | None = Field(default=None, description="labels created before this day")
    generations: list[int] | None = Field(default=None, max_length=1000)
    labelers: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        default=None,
        max_length=1000,
        description="usernames, labeler UUIDs or foreign (imported) labeler ids",
    )
    qc: Literal["include", "exclude", "only"] = Field(
        default="include", description="quality-control labels: keep, leave out, or nothing else"
    )
    min_labeler_accuracy: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "only labels by labelers whose agreement with quality-control gold is at least this "
            "(0 to 1); labelers never compared with gold are left out, gold labels stay"
        ),
    )
    neutral: Literal["positive", "negative"] = Field(
        default="positive", description="TRL: what a 0 (neutral) rating becomes"
    )

    @model_validator(mode="after")
    def _ordered(self) -> ExportFilters:
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")
        return self
