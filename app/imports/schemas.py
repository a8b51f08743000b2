from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.models import ImportFormat


class ImportResult(BaseModel):
    batch_id: int = Field(description="the batch this file made, or the earlier one if it was already imported")
    project_id: int
    filename: str
    format: ImportFormat
    lines: int = Field(description="records (non-blank lines) in the file")
    added: dict[str, int] = Field(description="new rows: problems, solutions, labels")
    duplicates: int = Field(description="records whose problem, solution or label was already there")
    grades: dict[str, int] = Field(
        default_factory=dict, description="final-answer grades of the new solutions"
    )
    queued: int = Field(default=0, description="queue slots made for the new solutions")
    unqueued: int = Field(
        default=0, description="waiting queue slots of earlier files' solutions that this file's labels filled, "
        "taken out of the queue (labels count towards a solution's overlap as slots do)"
    )
    problems_without_answer: int = Field(
        default=0, description="new problems with no answer (none given, no \\boxed{} in a reference solution): "
        "their solutions are left ungraded"
    )
    uncut: int = Field(
        default=0, description="solutions whose `text` held no step separator, so that each became one step of "
        "several lines: a sign the separator is not the file's"
    )
    already_imported: bool = Field(
        default=False, description="this file was imported into the project before, read as the same format "
        "(and, for solutions, cut at the same separator): nothing was added"
    )

    def summary(self) -> str:
        if self.already_imported:
            return (
                f"{self.filename} was already imported into this project as {self.format.value} (batch "
                f"{self.batch_id}): nothing added"
            )
        added = ", ".join(f"{n} {kind}" for kind, n in self.added.items())
        grades = ", ".join(f"{n} {grade}" for grade, n in sorted(self.grades.items()))
        return (
            f"imported {self.filename} (batch {self.batch_id}): {self.lines} records, added {added}; "
            f"{self.duplicates} duplicates; {self.queued} queue slots"
            + (f" ({self.unqueued} taken out, filled by its labels)" if self.unqueued else "")
            + (f"; answers {grades}" if grades else "")
            + (f"; warning: {self.uncut} solution text{'' if self.uncut == 1 else 's'} held no separator and "
               f"became one step each (remove the file and import it again with its separator)"
               if self.uncut else "")
        )


class ImportBatchRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    project_id: int
    user_id: int | None
    filename: str
    format: ImportFormat
    file_sha256: str
    separator: str | None = Field(
        description="solutions files: the step separator their text was cut at (null for other formats)"
    )
    lines: int
    added: dict[str, int]
    created_at: datetime


class ImportRemoval(BaseModel):
    """What removing an imported file deleted."""

    batch_id: int
    filename: str
    problems: int = Field(description="problems it added that no other file's solutions share")
    solutions: int
    labels: int = Field(description="labels it brought, on its own solutions or on earlier files'")
    requeued: int = Field(
        default=0, description="queue slots given back to earlier files' solutions whose labels from it went"
    )
