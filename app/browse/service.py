"""Browsing a project's labels, as a data manager lists records: current labels, newest first or
in another order, filtered by labeler, outcome, source, kind, the solution's answer grade, the problem or whether
the solution's labelers agree, a page at a time. Each row carries its step ratings, for a strip
that shows where the labeler stopped, and says whether the solution's labelers disagree, so that
a manager finds what to adjudicate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from app.browse.labelers import labels_by
from app.labeling.review import step_ratings
from app.models import INT32_MAX, AnswerGrade, FinishReason, Label, LabelSource, Problem, Solution, User
from app.quality.agreement import compared_labels, labels_disagree, of_labels, of_solutions

PAGE_SIZE = 50
# With the agreement filter, a page lists this many solutions with all their labels compared.
SOLUTIONS_PER_PAGE = 20
# Labelers offered as the labeler filter's suggestions; an imported PRM800K file may name
# thousands, and the filter takes any name typed.
LABELER_SUGGESTIONS = 500

# The orders a manager lists labels in: by when labeled, by time on task (the quickest first finds
# rushed labels; a label without a time, as many imported ones, comes last either way), or by
# problem and solution ("solution": a solution's labels together).
Sort = Literal["newest", "oldest", "quickest", "slowest", "solution"]


class LabelFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labeler: str | None = Field(default=None, max_length=100,
                                description="a username or labeler UUID (in any case), or an imported labeler id")
    outcome: FinishReason | None = None
    source: LabelSource | None = None
    kind: Literal["all", "ordinary", "qc", "screening"] = "all"
    grade: AnswerGrade | None = Field(default=None, description="the graded final answer of the solution")
    problem: int | None = Field(default=None, ge=1, le=INT32_MAX)
    text: str | None = Field(default=None, max_length=200,
                             description="words the problem's statement holds, as typed, in any case")
    agreement: Literal["all", "disagreed", "agreed"] = Field(
        default="all",
        description="the labels compared on solutions whose labelers disagree, or agree (see `overlap`)",
    )
    sort: Sort | None = Field(
        default=None,
        description="newest first by default; by solution with an agreement filter, whose other orders order the solutions",
    )
    page: int = Field(default=1, ge=1, le=100_000)

    @property
    def order(self) -> Sort:
        return self.sort or ("newest" if self.agreement == "all" else "solution")


@dataclass(frozen=True)
class LabelRow:
    label_id: int
    created_at: datetime
    labeler: str | None
    source: LabelSource
    problem_id: int
    statement: str
    solution_id: int
    grade: AnswerGrade
    ratings: list[tuple[int | None, bool]]
    finish_reason: FinishReason | None
    is_quality_control: bool
    is_initial_screening: bool
    total_time_ms: int | None
    corrects: int | None
    # One of the labels compared on a solution whose labelers disagree (see `overlap`).
    disagreed: bool

    @property
    def flags(self) -> int:
        return sum(flagged for _, flagged in self.ratings)


@dataclass(frozen=True)
class Overlap:
    """The solutions that two labelers or more rated, by whether they agree (see `overlap`), and
    the labels compared on each side."""

    agreed: frozenset[int]
    disagreed: frozenset[int]
    # Disagreements a manager settled: a label of the solution is its gold now (Use as gold).
    settled: frozenset[int]
    agreed_labels: frozenset[int]
    disagreed_labels: frozenset[int]

    @property
    def shared(self) -> int:
        return len(self.agreed) + len(self.disagreed) + len(self.settled)


@dataclass(frozen=True)
class LabelPage:
    rows: list[LabelRow]
    page: int
    pages: int
    total: int
    overlap: Overlap
    order: Sort


def overlap(session: Session, project_id: int) -> Overlap:
    """Which solutions with current labels of two labelers or more have labelers who disagree:
    the labels the Agreement report compares (app.quality.agreement.compared_labels: current
    human labels about the steps, a labeler's later one where they have two), any two of which
    disagree by app.quality.agreement.labels_disagree. A disagreement whose solution has a
    current gold label is settled: a manager chose the right one."""
    by_solution = compared_labels(session, project_id)
    split = {
        solution_id: any(labels_disagree(a, b) for a, b in combinations(labels, 2))
        for solution_id, labels in by_solution.items()
    }
    gold = set(session.scalars(select(Label.solution_id).where(
        Label.project_id == project_id, Label.superseded_at.is_(None), Label.is_quality_control.is_(True),
        of_solutions(s for s, apart in split.items() if apart),
    ))) if any(split.values()) else set()
    disagreed = frozenset(s for s, apart in split.items() if apart and s not in gold)
    agreed = frozenset(s for s, apart in split.items() if not apart)

    def labels_of(solutions: frozenset[int]) -> frozenset[int]:
        return frozenset(label.label_id for s in solutions for label in by_solution[s])

    return Overlap(agreed=agreed, disagreed=disagreed, settled=frozenset(gold),
                   agreed_labels=labels_of(agreed), disagreed_labels=labels_of(disagreed))


def _conditions(project_id: int, filters: LabelFilters, found: Overlap) -> list[ColumnElement[bool]]:
    where = [Label.project_id == project_id, Label.superseded_at.is_(None)]
    if filters.labeler:
        where.append(labels_by([filters.labeler]))
    if filters.outcome is not None:
        where.append(Label.finish_reason == filters.outcome)
    if filters.source is not None:
        where.append(Label.source == filters.source)
    if filters.kind == "qc":
        where.append(Label.is_quality_control.is_(True))
    elif filters.kind == "screening":
        # Labelers' answers to screening items; a screening item's gold is gold, under "qc", so
        # that the three kinds part the labels.
        where.append(and_(Label.is_initial_screening.is_(True), Label.is_quality_control.is_(False)))
    elif filters.kind == "ordinary":
        where.append(and_(Label.is_quality_control.is_(False), Label.is_initial_screening.is_(False)))
    if filters.grade is not None:
        where.append(Solution.answer_grade == filters.grade)
    if filters.problem is not None:
        where.append(Solution.problem_id == filters.problem)
    if filters.text:
        where.append(Solution.problem_id.in_(select(Problem.id).where(
            Problem.project_id == project_id, holds_typed(Problem.statement, filters.text))))
    if filters.agreement != "all":
        # The labels compared, not every label of those solutions (a give-up, a labeler's earlier one).
        where.append(of_labels(found.disagreed_labels if filters.agreement == "disagreed" else found.agreed_labels))
    return where


def list_labels(session: Session, project_id: int, filters: LabelFilters) -> LabelPage:
    found = overlap(session, project_id)
    where = _conditions(project_id, filters, found)
    joined = (
        select(Label.id)
        .join(Solution, Solution.id == Label.solution_id)
        .outerjoin(User, User.id == Label.user_id)
        .where(*where)
    )
    total = session.scalar(select(func.count()).select_from(joined.subquery())) or 0
    listed = (
        select(Label, User.username, Solution.answer_grade, Solution.problem_id, Problem.statement)
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .outerjoin(User, User.id == Label.user_id)
    )
    if filters.agreement == "all":
        pages = max(1, -(-total // PAGE_SIZE))
        listed = (listed.where(*where).order_by(*_label_order(filters.order))
                  .offset((filters.page - 1) * PAGE_SIZE).limit(PAGE_SIZE))
        rows = session.execute(listed).all()
    else:
        # A page of solutions, each with all its labels: a page of labels could part them. The
        # order orders the solutions; a solution's labels go by when labeled, for comparing.
        solutions = joined.with_only_columns(Label.solution_id).group_by(Label.solution_id)
        count = session.scalar(select(func.count()).select_from(solutions.subquery())) or 0
        pages = max(1, -(-count // SOLUTIONS_PER_PAGE))
        shown = list(session.scalars(solutions.order_by(*_solution_order(filters.order))
                                     .offset((filters.page - 1) * SOLUTIONS_PER_PAGE).limit(SOLUTIONS_PER_PAGE)))
        place = {solution_id: index for index, solution_id in enumerate(shown)}
        listed = listed.where(*where, of_solutions(shown)).order_by(Label.created_at.asc(), Label.id.asc())
        rows = sorted(session.execute(listed).all(), key=lambda row: place[row[0].solution_id])
    return LabelPage(
        rows=[
            LabelRow(
                label_id=label.id,
                created_at=label.created_at,
                labeler=username or label.foreign_labeler,
                source=label.source,
                problem_id=problem_id,
                statement=statement,
                solution_id=label.solution_id,
                grade=grade,
                ratings=step_ratings(label.steps),
                finish_reason=label.finish_reason,
                is_quality_control=label.is_quality_control,
                is_initial_screening=label.is_initial_screening,
                total_time_ms=label.total_time_ms,
                corrects=label.supersedes_id,
                disagreed=label.id in found.disagreed_labels,
            )
            for label, username, grade, problem_id, statement in rows
        ],
        page=filters.page,
        pages=pages,
        total=total,
        overlap=found,
        order=filters.order,
    )


def holds_typed(column: ColumnElement[str], typed: str) -> ColumnElement[bool]:
    """`column` holds `typed`, in any case; % and _ typed are themselves, not LIKE's wildcards."""
    escaped = typed.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return column.ilike(f"%{escaped}%", escape="\\")


def _label_order(order: Sort) -> tuple[ColumnElement[Any], ...]:
    # By when labeled: an imported label keeps its file's time, which its id does not follow.
    newest = (Label.created_at.desc(), Label.id.desc())
    return {
        "newest": newest,
        "oldest": (Label.created_at.asc(), Label.id.asc()),
        "quickest": (Label.total_time_ms.asc().nulls_last(), *newest),
        "slowest": (Label.total_time_ms.desc().nulls_last(), *newest),
        "solution": (Solution.problem_id.asc(), Label.solution_id.asc(), Label.created_at.asc(), Label.id.asc()),
    }[order]


def _solution_order(order: Sort) -> tuple[ColumnElement[Any], ...]:
    """Solutions by their labels: the newest label, the quickest, and so on."""
    key: dict[Sort, tuple[ColumnElement[Any], ...]] = {
        "newest": (func.max(Label.created_at).desc(),),
        "oldest": (func.min(Label.created_at).asc(),),
        "quickest": (func.min(Label.total_time_ms).asc().nulls_last(),),
        "slowest": (func.max(Label.total_time_ms).desc().nulls_last(),),
        "solution": (func.min(Solution.problem_id).asc(),),
    }
    return (*key[order], Label.solution_id.asc())


def labelers_like(session: Session, project_id: int, typed: str, limit: int = 5) -> list[str]:
    """Who labeled here with `typed` in their name, whatever its case: what a labeler filter that
    matched nobody may have meant."""
    name = func.coalesce(User.username, Label.foreign_labeler)
    return list(session.scalars(
        select(name).select_from(Label).outerjoin(User, User.id == Label.user_id)
        .where(Label.project_id == project_id, func.lower(name).contains(typed.lower(), autoescape=True))
        .group_by(name).order_by(name).limit(limit)
    ))


def labeler_names(session: Session, project_id: int) -> list[str]:
    """Who labeled here (usernames and imported ids), for the labeler filter's suggestions."""
    name = func.coalesce(User.username, Label.foreign_labeler)
    return list(
        session.scalars(
            select(name)
            .select_from(Label)
            .outerjoin(User, User.id == Label.user_id)
            .where(Label.project_id == project_id, name.is_not(None))
            .group_by(name)
            .order_by(name)
            .limit(LABELER_SUGGESTIONS)
        )
    )
