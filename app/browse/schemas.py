from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.models import AnswerGrade, FinishReason, LabelSource


class LabelListItem(BaseModel):
    label_id: int
    created_at: datetime
    labeler: str | None = Field(description="the username, or an imported label's labeler id; null for a machine's")
    source: LabelSource
    problem_id: int
    solution_id: int
    answer_grade: AnswerGrade = Field(description="the graded final answer of the solution")
    ratings: list[int | None] = Field(description="each labeled step's rating (-1, 0, 1, or null: not rated)")
    flagged: list[bool] = Field(description="each labeled step's flag")
    finish_reason: FinishReason | None
    is_quality_control: bool
    is_initial_screening: bool
    total_time_ms: int | None
    corrects: int | None = Field(description="the label this one corrects, if it is a correction")
    disagrees: bool = Field(description="compared on a solution whose labelers disagree")


class LabelList(BaseModel):
    total: int = Field(description="labels the filters keep; with an agreement filter, pages hold solutions")
    page: int
    pages: int
    items: list[LabelListItem]


class ProblemListItem(BaseModel):
    problem_id: int
    unique_id: str | None = Field(description="the id its file gave it (MATH's unique_id)")
    statement: str
    answer: str | None
    retired_at: datetime | None
    solutions: int
    labels: int = Field(description="current human labels of its solutions")
    waiting: int = Field(description="queue slots of its solutions waiting for a labeler")


class ProblemList(BaseModel):
    total: int
    page: int
    pages: int
    items: list[ProblemListItem]
