from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.models import INT32_MAX, FinishReason, LabelSource, ReportKind, ReportStatus
from app.validation import ScalarsAsWritten

# The most reports one page of the API returns.
MAX_REPORTS_PER_PAGE = 500


class ReportFilters(BaseModel):
    kind: ReportKind | None = None
    status: ReportStatus | None = None
    labeler: str | None = Field(default=None, min_length=1, max_length=100,
                                description="a username or labeler UUID, in any case")


class ReportRead(BaseModel):
    id: int
    project_id: int
    kind: ReportKind
    status: ReportStatus
    created_at: datetime
    user_id: int | None
    labeler: str | None = Field(description="username; null once the user is deleted")
    label_id: int
    solution_id: int
    problem_id: int
    problem_statement: str
    problem_retired: bool
    step: int | None = Field(description="the flagged step, counted from 1; null for a whole solution")
    reason: str | None = Field(description="the labeler's reason; a flagged step has none")
    dismissed_at: datetime | None
    dismissed_by: str | None


class ReportPage(BaseModel):
    total: int = Field(description="reports matching the filters, on every page")
    reports: list[ReportRead] = Field(description="newest first")


class SkipRead(BaseModel):
    solution_id: int
    problem_id: int
    problem_snippet: str = Field(description="the problem's first characters")
    user_id: int
    labeler: str = Field(description="username of the labeler who skipped")
    skipped_at: datetime
    skipped_by: int = Field(description="labelers who skipped this solution, this one included")


class SkipPage(BaseModel):
    total: int = Field(description="skips matching the filter, on every page")
    page: int
    pages: int
    skips: list[SkipRead]


class ReportsDismissal(ScalarsAsWritten):
    """Which open reports to dismiss at once: every one of the kind and labeler given."""

    model_config = ConfigDict(extra="forbid")

    kind: ReportKind | None = None
    labeler: str | None = Field(default=None, min_length=1, max_length=100,
                                description="a username or labeler UUID, in any case")
    through: int | None = Field(
        default=None, ge=1, le=INT32_MAX,
        description="the newest report id to dismiss, as listed when the choice was made: one sent since then "
                    "stays open; by default every open report now matching",
    )


class ReportsDismissed(BaseModel):
    dismissed: int = Field(description="reports dismissed now; those dismissed before are not counted")


class SkipsGivenBack(BaseModel):
    given_back: int = Field(description="skips taken back")


class ProblemRetirement(BaseModel):
    problem_id: int
    retired_at: datetime
    slots_removed: int = Field(description="waiting queue slots taken out by this call")
    reports_dismissed: int = Field(description="open bad-problem reports of the problem this call dismissed")


class ProblemRestoration(BaseModel):
    problem_id: int
    slots_added: int = Field(description="queue slots given back to the problem's solutions by this call")


class ViewedStep(BaseModel):
    text: str
    rating: int | None = Field(description="null where the labeler stopped before this step")
    flagged: bool
    human: bool = Field(default=False, description="written by the labeler (phase 1), not by the model")
    solution_step: bool = Field(
        default=True, description="the solution's own step at this place, which the other labels' "
        "step_ratings rate (false past a phase-1 label's other alternative or own step)")


class OtherLabel(BaseModel):
    """Another current label of the same solution, as the label view lists it."""

    label_id: int
    labeler: str | None
    source: LabelSource
    finish_reason: FinishReason | None
    is_quality_control: bool
    disagrees: bool | None = Field(
        description="whether it disagrees with this label on the steps both rated (as the Agreement report and "
        "the Labels tab's Disagree filter judge it); null where either is not compared (a give-up, a "
        "machine's label, a labeler's earlier label)")
    compared_instead: int | None = Field(
        default=None, description="where it is its labeler's earlier label of the solution: their later one, "
        "which agreement compares instead")
    step_ratings: list[int | None] = Field(
        default_factory=list,
        description="its rating of each of the solution's own steps, in order, as far as it took them (a "
        "phase-1 label that continued with another alternative or its own step stops there); null: not rated")


class GoldReference(BaseModel):
    """What a gold item's other labels are graded against: the first error most of its gold labels
    agree on, a tie going to the earliest label."""

    label_id: int = Field(description="the gold label whose verdict is the reference")
    first_error_step: int | None = Field(description="the reference's first wrong step, counted from 1; null: no error")
    votes: int = Field(description="how many of the solution's gold labels give the reference's verdict")
    golds: int = Field(description="how many gold labels the solution has")
    tied: bool = Field(description="another verdict has as many gold labels: the earliest label's counts")


class LabelView(BaseModel):
    """One label as its labeler submitted it, with the problem and solution they saw."""

    label_id: int
    project_id: int
    labeler: str | None
    created_at: datetime
    finish_reason: FinishReason | None
    finish_note: str | None
    total_time_ms: int | None
    source: LabelSource
    is_quality_control: bool = Field(description="gold: the reference its solution's other labels are graded by")
    is_initial_screening: bool = Field(description="on gold, a screening item; on a labeler's label, a screening answer")
    superseded: bool = Field(description="a correction replaced it")
    corrected_by: int | None = Field(default=None, description="the correction that replaced it, if one did")
    corrects: int | None = Field(default=None, description="the label it corrects, where it is a correction")
    other_gold: list[int] = Field(description="the other gold labels of its solution, whose majority is the reference")
    gold: GoldReference | None = Field(description="the reference, where its solution is a gold item")
    other_labels: list[OtherLabel] = Field(description="its solution's other current labels, oldest first")
    compared_instead: int | None = Field(
        default=None, description="where it is its labeler's earlier label of the solution (an import can hold "
        "both): their later one, which agreement and the Labels tab's agreement filters compare instead")
    problem_id: int
    statement: str
    answer: str | None
    problem_retired_at: datetime | None
    solution_id: int
    steps: list[ViewedStep]
    reports: list[ReportRead]


class GoldIn(BaseModel):
    # Strict: a flag that decides what new labelers are served is true or false, not "yes".
    model_config = ConfigDict(extra="forbid", strict=True)

    screening: bool = Field(default=False, description="also a screening item: new labelers are served it first")
