from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LabelerAgreementRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str = Field(description="username, or the imported labeler id")
    labels: int = Field(description="current labels on solutions another labeler labeled too")
    step_alpha: float | None = Field(description="ordinal α over the steps this labeler rated")
    step_alpha_reason: str | None
    rating_pairs: int
    rating_agreement: float | None = Field(
        description="share of this labeler's ratings equal to another labeler's of the same step"
    )
    first_error_pairs: int
    first_error_agreement: float | None


class ProjectAgreementRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    overlap: int
    solutions: int = Field(description="solutions with current labels from two labelers or more")
    labels: int = Field(description="the labels compared on those solutions: current labels about the steps, "
                        "each labeler's later one where they have two")
    units: int = Field(description="steps rated by two labelers or more")
    step_alpha: float | None = Field(description="Krippendorff's ordinal α on step ratings")
    step_alpha_reason: str | None = Field(description="why step_alpha is null")
    first_error_pairs: int
    first_error_agreement: float | None = Field(
        description="share of label pairs on one solution with the same first −1 (or none)"
    )
    rating_pairs: int
    confusion: list[list[int]] = Field(
        description="rating pairs by (−1, 0, +1) × (−1, 0, +1), each pair counted both ways round"
    )
    labelers: list[LabelerAgreementRead]
    earlier_labels: int = Field(description="current labels left out because their labeler has a later label of "
                                "the same solution (an import can hold both)")
