from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from active_learning.data import is_blank
from app.models import FinishReason, LabelingMode
from app.validation import ScalarsAsWritten

STARTED_AT_SKEW = timedelta(minutes=5)
TOO_EARLY = "is too far in the past: it is before the year 1 in UTC"
IN_THE_FUTURE = "is in the future: a label cannot start after it is sent"

# An int, as every other whole-number field: 1.0 is 1 and 1.5 is refused. Not a Literal, which
# takes whatever equals one of its values (true == 1); ScalarsAsWritten refuses true, false and text.
Rating = Annotated[int, Field(ge=-1, le=1)]


class StepRating(ScalarsAsWritten):
    # A misspelt "flaged" would drop the flag without a word.
    model_config = ConfigDict(extra="forbid")

    rating: Rating
    flagged: bool = False


class HumanStep(ScalarsAsWritten):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=5000, description="the step the labeler wrote")
    # A written step is one to continue with: a wrong one would be no step to write.
    rating: Annotated[int, Field(ge=0, le=1)]
    flagged: bool = False

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError("is blank")
        return value


class AlternativesRated(ScalarsAsWritten):
    """Phase-1 mode: one step's alternatives rated, and what the labeler continued with."""

    model_config = ConfigDict(extra="forbid")

    ratings: list[StepRating] = Field(
        max_length=100, description="one per alternative the task gave for this step, in order"
    )
    chosen: int | None = Field(
        default=None, ge=0, description="the index of the alternative the labeler continued with"
    )
    human: HumanStep | None = Field(
        default=None, description="the labeler's own step, where no alternative was good"
    )

    @model_validator(mode="after")
    def _one_continuation(self) -> AlternativesRated:
        if self.chosen is not None and self.human is not None:
            raise ValueError("choose an alternative or write a step, not both")
        return self


class LabelSubmit(ScalarsAsWritten):
    model_config = ConfigDict(extra="forbid")

    idempotency_key: str = Field(
        min_length=8,
        max_length=100,
        description="chosen by the client once per label; a retried submit sends the same key",
    )
    ratings: list[StepRating] = Field(
        default_factory=list,
        max_length=1000,
        description="ratings of the first steps, in order; may stop early (not in phase-1 mode)",
    )
    alternatives: list[AlternativesRated] | None = Field(
        default=None,
        max_length=1000,
        description="phase-1 mode only, instead of `ratings`: the first steps' alternatives "
        "rated, each step with the alternative chosen or the labeler's own step",
    )
    finish_reason: FinishReason
    finish_note: str | None = Field(
        default=None, max_length=5000, description="required for give_up and bad_problem, refused otherwise"
    )
    total_time_ms: int = Field(ge=0, le=7 * 24 * 3600 * 1000)
    started_at: datetime | None = None

    def note_problem(self) -> str | None:
        """What is wrong with the label's finish_note, None when nothing: a give-up or bad-problem
        label needs its reason, and any other takes none (no page or report would show it, yet
        the export would carry it)."""
        reason = self.finish_reason
        needs_note = reason in (FinishReason.give_up, FinishReason.bad_problem)
        if needs_note and is_blank(self.finish_note or ""):
            return f"{reason.value} needs a reason in finish_note"
        if not needs_note and not is_blank(self.finish_note or ""):
            return f"finish_note is the reason for give_up or bad_problem; a {reason.value} label takes none"
        return None

    @field_validator("started_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            value = value.astimezone(UTC)
        except (OverflowError, ValueError):
            # No such instant in UTC: year 1 with a positive offset (or without one, read in the
            # server's zone), year 9999 with a negative one. Python's own words ("year 0 is out of
            # range") named a year the client never sent.
            raise ValueError(TOO_EARLY if value.year < 5000 else IN_THE_FUTURE) from None
        # A start after the submit would make time on task up; a client's clock may run a little ahead.
        if value > datetime.now(UTC) + STARTED_AT_SKEW:
            raise ValueError(IN_THE_FUTURE)
        return value


class TaskProblem(BaseModel):
    id: int
    statement: str
    answer: str | None


class TaskSolution(BaseModel):
    id: int
    steps: list[str]
    alternatives: list[list[str]] | None = Field(
        default=None,
        description="phase-1 mode: each step's alternative completions, to rate and choose from; "
        "null in the other modes",
    )


class Task(BaseModel):
    assignment_id: int = Field(
        description="the task's id for submit and release: a keyed permutation of the queue "
        "slot's row id, so that ids say nothing about when a slot was made"
    )
    project_id: int
    project_name: str
    labeling_mode: LabelingMode
    expires_at: datetime
    problem: TaskProblem
    solution: TaskSolution


class LeaseRenewal(BaseModel):
    expires_at: datetime = Field(description="the task is held for this labeler until then")


class NextTask(BaseModel):
    task: Task | None
    waiting: int = Field(
        description="slots waiting in the queue; counted up to 1,000 while a task is handed out"
    )
    reason: str | None = Field(
        default=None,
        description="why no task is handed out when the labeler is held back in this project "
        "(screening not passed, paused for review, retired); null otherwise",
    )


class LabelReceipt(BaseModel):
    label_id: int
    assignment_id: int
    finish_reason: FinishReason
    duplicate: bool = Field(description="true when this key was already submitted")
    gold: list[int | None] | None = Field(
        default=None,
        description="the reference ratings, step by step, when the solution is a gold item (served as a "
        "check item or as an ordinary task) of a project that shows them after submitting; null otherwise",
    )


class LabelSummary(BaseModel):
    label_id: int
    project_id: int
    project_name: str
    solution_id: int
    finish_reason: FinishReason | None
    steps_rated: int
    total_time_ms: int | None
    created_at: datetime


class LabelerStats(BaseModel):
    labels: int
    labels_today: int
    steps_rated: int
    flagged_steps: int
    by_finish_reason: dict[str, int]
    median_time_ms: int | None
    active_leases: int
    skipped: int = Field(description="solutions passed over unlabeled, in the projects you may label")
    recent: list[LabelSummary] = Field(description="the newest labels, newest first")


class RatingCounts(BaseModel):
    """Every rating the label holds: in phase-1 mode, each alternative rated counts."""

    positive: int
    neutral: int
    negative: int


class OwnLabel(BaseModel):
    """A row of a labeler's own label list."""

    label_id: int
    project_id: int
    project_name: str
    solution_id: int
    problem_snippet: str = Field(description="the problem's first characters")
    ratings: RatingCounts
    finish_reason: FinishReason | None
    supersedes_id: int | None = Field(description="the label this one corrected, if any")
    created_at: datetime


class OwnLabelPage(BaseModel):
    items: list[OwnLabel] = Field(description="current labels (corrections replace what they correct), newest first")
    page: int
    pages: int
    total: int


class OwnSkip(BaseModel):
    """A solution the labeler skipped (POST /assignments/{id}/skip)."""

    solution_id: int
    project_id: int
    project_name: str
    problem_snippet: str = Field(description="the problem's first characters")
    skipped_at: datetime


class OwnSkipPage(BaseModel):
    items: list[OwnSkip] = Field(description="newest first, in the projects the labeler may label")
    page: int
    pages: int
    total: int


class RatedAlternative(BaseModel):
    text: str
    rating: int = Field(description="+1, 0 or -1")
    flagged: bool


class RatedStep(BaseModel):
    text: str
    rating: int | None = Field(description="+1, 0 or -1; null where the label stopped before this step")
    flagged: bool
    written: bool = Field(default=False, description="phase-1 mode: the labeler wrote this step")
    others: list[RatedAlternative] = Field(
        default_factory=list,
        description="phase-1 mode: the step's other alternatives the labeler rated and did not continue with",
    )


class CorrectionWindow(BaseModel):
    open: bool
    closes_at: datetime | None = Field(description="when correcting closes; null when it is not open")
    reason: str | None = Field(description="why correcting is closed; null while it is open")


class OwnLabelDetail(OwnLabel):
    labeling_mode: LabelingMode = Field(
        description="the mode the label is read and corrected in: phase1 for a label with "
        "alternatives or written steps, otherwise the project's (or, in a project since turned "
        "to phase1, the ratings mode whose rules the label keeps)"
    )
    problem_id: int = Field(description="for the problem's figures: GET /api/v1/problems/{problem_id}/figures/{n}")
    problem: str
    answer: str | None
    steps: list[RatedStep] = Field(description="every step of the solution, with the rating as submitted")
    finish_note: str | None
    total_time_ms: int | None
    superseded_by_id: int | None = Field(description="the correction that replaced this label, if any")
    correction: CorrectionWindow


class CorrectionReceipt(BaseModel):
    label_id: int = Field(description="the new label")
    supersedes_id: int
    duplicate: bool = Field(description="true when this key was already submitted")
