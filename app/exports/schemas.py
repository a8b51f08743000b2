from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import date
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.errors import BadInput
from app.models import INT32_MAX, LabelSource


class ExportFormat(StrEnum):
    prm800k = "prm800k"
    trl = "trl"
    parquet = "parquet"


# The parameters only some formats read, and those formats (hf is the CLI's: the Parquet rows
# in a `datasets` directory).
FORMAT_PARAMETERS = {"neutral": ("trl",), "completions": ("trl", "parquet", "hf")}


def refuse_unread(
    fmt: str,
    given: Iterable[str],
    *,
    formats: Collection[str] = tuple(ExportFormat),
    spelled: Callable[[str], str] = str,
) -> None:
    """BadInput naming the first of the `given` parameters that `fmt` does not read, and the
    `formats` (those the caller offers) that do: passed over in silence, it would leave its user
    believing it took effect. `spelled` names a parameter as the caller's user types it."""
    for name in given:
        readers = FORMAT_PARAMETERS.get(name)
        if readers is not None and fmt not in readers:
            named = " or ".join(f for f in readers if f in formats)
            message = f"{spelled(name)} applies to {spelled('format')} {named}, not {fmt}"
            raise BadInput(message, [{"field": name, "message": message}])


# Shared by the model and the API's query parameters, so that the OpenAPI schema states the
# limits the model enforces. They also keep every value one the database can compare: an
# export streams, so a query that fails on its input would fail after the answer has begun.
Generation = Annotated[int, Field(ge=-INT32_MAX, le=INT32_MAX)]
# No NUL: PostgreSQL text cannot hold one, so no stored name has it.
LabelerRef = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\x00]+$")]
# Finite: NaN fails every comparison, and was refused as "must be at most 1".
Accuracy = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
MAX_FILTER_VALUES = 1000


class ExportFilters(BaseModel):
    """Which labels go out. Dates are UTC days: `since` included, `until` excluded."""

    model_config = ConfigDict(extra="forbid")

    since: date | None = Field(default=None, description="labels created on or after this day")
    until: date | None = Field(default=None, description="labels created before this day")
    generations: list[Generation] | None = Field(default=None, max_length=MAX_FILTER_VALUES)
    labelers: list[LabelerRef] | None = Field(
        default=None,
        max_length=MAX_FILTER_VALUES,
        description="usernames, labeler UUIDs or foreign (imported) labeler ids",
    )
    sources: list[LabelSource] | None = Field(
        default=None,
        min_length=1,
        max_length=len(LabelSource),
        description="only labels from these sources (human, rollout, judge, prm); every source when left out",
    )
    qc: Literal["include", "exclude", "only"] = Field(
        default="include", description="quality-control labels: keep, leave out, or nothing else"
    )
    min_labeler_accuracy: Accuracy | None = Field(
        default=None,
        description=(
            "only labels by labelers whose agreement with quality-control gold is at least this "
            "(0 to 1); labelers never compared with gold are left out, gold labels stay"
        ),
    )
    min_agreement: Accuracy | None = Field(
        default=None,
        description=(
            "only solutions labeled by two labelers or more whose label pairs agree on the "
            "first-error step at least this often (0 to 1); 1 keeps unanimous solutions"
        ),
    )
    neutral: Literal["positive", "negative"] = Field(
        default="positive", description="TRL: what a 0 (neutral) rating becomes"
    )
    completions: Literal["chosen", "all"] = Field(
        default="chosen",
        description=(
            "TRL and Parquet: only the steps each labeler went through (chosen), or also every "
            "other rated alternative as an example of its own, with the labeler-written steps "
            "marked in `human_written` (all)"
        ),
    )

    @model_validator(mode="after")
    def _ordered(self) -> ExportFilters:
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since (labeled on or after) must be before until (labeled before)")
        return self


def filters_query(filters: ExportFilters) -> list[tuple[str, str]]:
    """The export API's query parameters for these filters, defaults left out: the page's
    download link, and what the audit trail writes down about an export."""
    query: list[tuple[str, str]] = []
    if filters.since:
        query.append(("since", filters.since.isoformat()))
    if filters.until:
        query.append(("until", filters.until.isoformat()))
    query += [("generation", str(g)) for g in filters.generations or []]
    query += [("labeler", name) for name in filters.labelers or []]
    query += [("source", source.value) for source in filters.sources or []]
    if filters.qc != "include":
        query.append(("qc", filters.qc))
    if filters.min_labeler_accuracy is not None:
        query.append(("min_labeler_accuracy", repr(filters.min_labeler_accuracy)))
    if filters.min_agreement is not None:
        query.append(("min_agreement", repr(filters.min_agreement)))
    if filters.neutral != "positive":
        query.append(("neutral", filters.neutral))
    if filters.completions != "chosen":
        query.append(("completions", filters.completions))
    return query
