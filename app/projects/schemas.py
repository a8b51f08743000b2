from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from app.models import LabelingMode
from app.projects.guidelines import GUIDELINES_MAX_LENGTH, guidelines_version
from app.validation import ScalarsAsWritten, named_by_rule, refuse_bidi_controls

# Not ending in a space: "racer " beside "racer" is two projects that look like one.
PROJECT_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9 _.\-]{0,98}[A-Za-z0-9_.\-])?$"


def _as_typed(value: object) -> object:
    """A text as the person typed it: browsers send a textarea's line breaks as CRLF, which
    stored as sent would make the form's copy of a text differ from the API's (a new guidelines
    version for labelers to read again) and count each break twice against the limit."""
    if not isinstance(value, str):
        return value
    value = value.replace("\r\n", "\n")
    return value if value.strip() else ""


NAME_RULE = ("1-100 letters (A-Z, without accents), digits, space, _ . -, the first a letter or digit, "
             "the last not a space")
ProjectName = named_by_rule(PROJECT_NAME_PATTERN, NAME_RULE, 100)


class ProjectCreate(ScalarsAsWritten):
    model_config = ConfigDict(extra="forbid")

    name: ProjectName
    description: str = Field(default="", max_length=5000)
    guidelines: str = Field(
        default="", max_length=GUIDELINES_MAX_LENGTH,
        description="what labelers read before their first task and on the labeling page: Markdown, "
        "math in $…$ and $$…$$",
    )
    labeling_mode: LabelingMode = LabelingMode.first_error
    overlap: int = Field(default=1, ge=1, le=20, description="labelers per solution")
    lease_minutes: int = Field(default=30, ge=1, le=1440, description="how long a task is held")
    correction_window_hours: int = Field(
        default=24, ge=0, le=720, description="how long a labeler may correct a label; 0 closes corrections"
    )
    open_to_all: bool = Field(
        default=True, description="every labeler may label here; false: only the project's members"
    )
    screening_items: int = Field(
        default=0, ge=0, le=100, description="a new labeler's first tasks are this many screening items; 0: no screening"
    )
    screening_pass_mark: float = Field(
        default=0.0, ge=0, le=1, description="the agreement on screening items a labeler needs to go on, 0–1"
    )
    qc_rate: float = Field(
        default=0.0, ge=0, le=1, description="the chance that a task is a QC gold item the labeler has not labeled"
    )
    qc_feedback: bool = Field(default=False, description="show the gold in the submit receipt of a QC item")
    qc_pause_below: float = Field(
        default=0.0, ge=0, le=1, description="pause a labeler whose QC accuracy (5 items or more) is below; 0: never"
    )

    _typed = field_validator("description", "guidelines", mode="before")(_as_typed)
    _in_order = field_validator("description", "guidelines")(refuse_bidi_controls)


def _without_null(schema: dict[str, Any]) -> None:
    """A field a PATCH may leave out but not send as null (`_changes_something`): the schema says
    so, without the `null` that pydantic's `| None` shows (a client generated from it sent one)."""
    for field in schema.get("properties", {}).values():
        kinds = field.pop("anyOf", None)
        if kinds is None:
            continue
        kept = [kind for kind in kinds if kind != {"type": "null"}]
        if len(kept) == 1:
            field.update(kept[0])
        else:
            field["anyOf"] = kept
        if field.get("default", 0) is None:
            del field["default"]


class ProjectUpdate(ScalarsAsWritten):
    # A field this cannot change (is_demo, say) is refused by name, not dropped with a 200.
    model_config = ConfigDict(extra="forbid", json_schema_extra=_without_null)

    name: ProjectName | None = None
    description: str | None = Field(default=None, max_length=5000)
    guidelines: str | None = Field(default=None, max_length=GUIDELINES_MAX_LENGTH)
    labeling_mode: LabelingMode | None = None
    overlap: int | None = Field(default=None, ge=1, le=20)
    lease_minutes: int | None = Field(default=None, ge=1, le=1440)
    correction_window_hours: int | None = Field(default=None, ge=0, le=720)
    open_to_all: bool | None = None
    screening_items: int | None = Field(default=None, ge=0, le=100)
    screening_pass_mark: float | None = Field(default=None, ge=0, le=1)
    qc_rate: float | None = Field(default=None, ge=0, le=1)
    qc_feedback: bool | None = None
    qc_pause_below: float | None = Field(default=None, ge=0, le=1)
    paused: bool | None = Field(default=None, description="true: no new task is handed out here until "
                                "set false again; tasks in hand can still be submitted")

    _typed = field_validator("description", "guidelines", mode="before")(_as_typed)
    _in_order = field_validator("description", "guidelines")(refuse_bidi_controls)

    @model_validator(mode="after")
    def _changes_something(self) -> ProjectUpdate:
        # `{}` and `{"description": null}` answered 200 with nothing done, as if saved.
        nulls = sorted(field for field in self.model_fields_set if getattr(self, field) is None)
        if nulls:
            raise ValueError(f"{', '.join(nulls)} cannot be null: leave a setting out to keep it as it is")
        if not self.model_fields_set:
            raise ValueError("nothing to change: no setting was given")
        return self


class ProjectRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str
    guidelines: str
    labeling_mode: LabelingMode
    overlap: int
    lease_minutes: int
    correction_window_hours: int
    open_to_all: bool
    screening_items: int
    screening_pass_mark: float
    qc_rate: float
    qc_feedback: bool
    qc_pause_below: float
    is_demo: bool
    created_at: datetime
    guidelines_updated_at: datetime | None = Field(description="when the guidelines text last changed")
    paused: bool = Field(description="labeling is paused: next-task hands out no new task")
    paused_at: datetime | None = Field(description="since when labeling is paused")

    @computed_field(description="changes with every edit of the guidelines; null when there are none")  # type: ignore[prop-decorator]
    @property
    def guidelines_version(self) -> str | None:
        return guidelines_version(self.guidelines) if self.guidelines else None


# The days the overview counts labels over: its chart, and each labeler's on the activity card.
CHART_DAYS = 14


class DailyCount(BaseModel):
    day: date
    labels: int


# The hours the overview counts labels over, for a manager watching a labeling session.
CHART_HOURS = 24


class HourlyCount(BaseModel):
    hour: datetime = Field(description="the hour's start (UTC)")
    labels: int


class ProjectProgress(BaseModel):
    problems: int
    solutions: int
    solutions_done: int = Field(description="every slot of the solution is labeled")
    solutions_in_progress: int = Field(description="some slot labeled or leased, not all done")
    solutions_waiting: int = Field(description="nothing labeled or leased yet")
    solutions_retired: int = Field(description="of retired problems: served to nobody, none of the three above")
    labels: int
    labels_to_go: int = Field(description="labels the queue still asks for: slots not yet labeled, waiting or in hand")
    labels_per_day: list[DailyCount] = Field(description="each of the last 14 days (UTC), oldest first, zeros included")
    labels_per_hour: list[HourlyCount] = Field(
        description="each of the last 24 hours (UTC), oldest first, the hour under way last, zeros included")


class LabelerActivityRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    user_id: int
    username: str
    labeler_uuid: str = Field(description="the id this labeler's labels carry in exports (PRM800K's `labeler`)")
    labels: int = Field(description="current labels made in the project (a correction replaces what it corrects)")
    median_seconds_per_step: float | None = Field(description="median of active time over rated steps, per label")
    negative_share: float | None = Field(description="share of rated steps rated -1")
    give_ups: int
    bad_problems: int = Field(description="labels that reported the problem as bad")
    skips: int = Field(description="solutions passed over unlabeled: not served to this labeler again")
    qc_compared: int = Field(description="quality-control items compared with their gold")
    qc_accuracy: float | None
    fast: bool = Field(description="flagged for review: median pace under a quarter of the project's")
    last_label_at: datetime | None
    labels_last_hour: int = Field(description="labels made in the last 60 minutes")
    labels_per_day: list[DailyCount] = Field(description="each of the last 14 days (UTC), oldest first, zeros included")


class ProjectActivityRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    median_seconds_per_step: float | None = Field(description="the median of the labelers' medians")
    fast_below: float | None = Field(description="the pace under which a labeler is flagged")
    labelers: list[LabelerActivityRead] = Field(description="most labels first")


class LeaseRead(BaseModel):
    """A task a labeler holds now."""

    assignment_id: int = Field(description="the task id its labeler holds (tasks/next's `assignment_id`)")
    solution_id: int
    problem_id: int
    user_id: int
    labeler: str
    check_item: bool = Field(description="a quality-control or screening item")
    leased_at: datetime
    expires_at: datetime


class LeaseList(BaseModel):
    total: int = Field(description="tasks held now")
    leases: list[LeaseRead] = Field(description="the longest held first, up to `limit`")


class MemberCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=64)


class MemberRead(BaseModel):
    user_id: int
    username: str
    is_active: bool
    added_at: datetime


class StandingDecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["admit", "retire"] = Field(
        description="admit: may label regardless of screening, QC accuracy counts afresh; "
        "retire: no more tasks in this project"
    )


class LabelerStandingRead(BaseModel):
    user_id: int
    username: str
    screening_done: int = Field(description="screening items labeled")
    screening_agreed: int
    qc_compared: int = Field(description="QC items compared since the last admit decision")
    qc_agreed: int
    decision: str | None = Field(description="admitted, retired, or null when no manager decided")
    status: str = Field(
        description="screening, failed screening, passed screening, paused, admitted, retired or labeling"
    )


class GuidelinesReadIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = Field(min_length=1, max_length=16, description="the project's guidelines_version that was read")


class GuidelinesReceipt(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    version: str
    read_at: datetime


class GuidelinesReaderRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    user_id: int
    username: str
    read: Literal["current", "older", "none"] = Field(
        description="current: read the guidelines as they stand; older: read them before the last edit; none: never"
    )
    read_at: datetime | None


class GuidelinesReadersRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    version: str | None = Field(description="the current guidelines_version; null when the project has none")
    updated_at: datetime | None
    current: int = Field(description="how many of the labelers listed have read the current version")
    rows: list[GuidelinesReaderRead] = Field(
        description="the project's labelers: its members, those who labeled here, and those who read a version")
