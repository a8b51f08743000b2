"""The Problems tab: a project's problems with their ids, the unique_id their file gave them, and
how far labeling has come on each; a manager retires or restores one from here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.browse.service import holds_typed
from app.machine_labels.service import is_human
from app.models import Assignment, AssignmentStatus, Label, Problem, Solution

PAGE_SIZE = 50

# The ends of display math, after an even run of backslashes: after an odd one the first
# character is escaped (\$$ is a dollar sign and a formula's start, \\[2pt] a row's spacing).
# MATH writes the words after a display straight after it ("\[2x = 3y = -z\]is a line"), the
# display's own line their only break; a one-line preview draws it inline, where the words ran
# into the formula. Spaces inside math change nothing.
DISPLAY_EDGE = re.compile(r"(?<!\\)((?:\\\\)*)(\$\$|\\\[|\\\]|\\(?:begin|end)\{[^}]*\})")


class ProblemFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, max_length=200,
                             description="words the statement or the unique_id holds, as typed, in any case")
    state: Literal["all", "served", "retired"] = "all"
    page: int = Field(default=1, ge=1, le=100_000)


@dataclass(frozen=True)
class ProblemRow:
    problem_id: int
    source_id: str | None
    statement: str
    answer: str | None
    retired_at: datetime | None
    solutions: int
    labels: int
    waiting: int

    @property
    def preview(self) -> str:
        """The statement for the list's one-line preview: a space each side of every display."""
        return DISPLAY_EDGE.sub(r"\1 \2 ", self.statement)


@dataclass(frozen=True)
class ProblemPage:
    rows: list[ProblemRow]
    page: int
    pages: int
    total: int


def list_problems(session: Session, project_id: int, filters: ProblemFilters) -> ProblemPage:
    """A page of the project's problems in the order they came, with counts of their solutions,
    current human labels and waiting queue slots."""
    where = [Problem.project_id == project_id]
    if filters.text:
        where.append(holds_typed(Problem.statement, filters.text) | holds_typed(Problem.source_id, filters.text))
    if filters.state == "served":
        where.append(Problem.retired_at.is_(None))
    elif filters.state == "retired":
        where.append(Problem.retired_at.is_not(None))
    total = session.scalar(select(func.count()).select_from(Problem).where(*where)) or 0
    of_problem = Solution.problem_id == Problem.id
    solutions = select(func.count()).select_from(Solution).where(of_problem).scalar_subquery()
    labels = (select(func.count()).select_from(Label).join(Solution, Solution.id == Label.solution_id)
              .where(of_problem, Label.superseded_at.is_(None), is_human()).scalar_subquery())
    waiting = (select(func.count()).select_from(Assignment).join(Solution, Solution.id == Assignment.solution_id)
               .where(of_problem, Assignment.status == AssignmentStatus.waiting).scalar_subquery())
    rows = session.execute(
        select(Problem.id, Problem.source_id, Problem.statement, Problem.answer, Problem.retired_at,
               solutions, labels, waiting)
        .where(*where).order_by(Problem.id).offset((filters.page - 1) * PAGE_SIZE).limit(PAGE_SIZE)
    ).all()
    return ProblemPage(rows=[ProblemRow(*row) for row in rows], page=filters.page,
                       pages=max(1, -(-total // PAGE_SIZE)), total=total)
