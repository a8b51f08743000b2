"""The Labels and Problems tabs' lists as JSON, with the same filters and pages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.browse import problems
from app.browse.labelers import check_labeling_here
from app.browse.schemas import LabelList, LabelListItem, ProblemList, ProblemListItem
from app.browse.service import LabelFilters, list_labels
from app.deps import DataApiUser, RowId, SessionDep
from app.errors import error_responses
from app.projects.service import get_project

router = APIRouter(prefix="/api/v1/projects/{project_id}", tags=["browse"], responses=error_responses(401, 403, 422))


@router.get("/labels", response_model=LabelList, responses=error_responses(404))
def labels(project_id: RowId, _: DataApiUser, session: SessionDep,
           filters: Annotated[LabelFilters, Query()]) -> LabelList:
    """The project's current labels, 50 a page, newest first unless `sort` says otherwise (the
    Labels tab's list). A `labeler` no label here is by is refused (422), as the export refuses it."""
    project = get_project(session, project_id)
    if filters.labeler:
        check_labeling_here(session, project.id, [filters.labeler])
    listing = list_labels(session, project.id, filters)
    return LabelList(total=listing.total, page=listing.page, pages=listing.pages, items=[
        LabelListItem(
            label_id=row.label_id, created_at=row.created_at, labeler=row.labeler, source=row.source,
            problem_id=row.problem_id, solution_id=row.solution_id, answer_grade=row.grade,
            ratings=[rating for rating, _ in row.ratings], flagged=[flagged for _, flagged in row.ratings],
            finish_reason=row.finish_reason, is_quality_control=row.is_quality_control,
            is_initial_screening=row.is_initial_screening, total_time_ms=row.total_time_ms,
            corrects=row.corrects, disagrees=row.disagreed,
        )
        for row in listing.rows
    ])


@router.get("/problems", response_model=ProblemList, responses=error_responses(404))
def problems_list(project_id: RowId, _: DataApiUser, session: SessionDep,
                  filters: Annotated[problems.ProblemFilters, Query()]) -> ProblemList:
    """The project's problems, 50 a page, in the order they came (the Problems tab's list)."""
    project = get_project(session, project_id)
    listing = problems.list_problems(session, project.id, filters)
    return ProblemList(total=listing.total, page=listing.page, pages=listing.pages, items=[
        ProblemListItem(problem_id=row.problem_id, unique_id=row.source_id, statement=row.statement,
                        answer=row.answer, retired_at=row.retired_at, solutions=row.solutions,
                        labels=row.labels, waiting=row.waiting)
        for row in listing.rows
    ])
