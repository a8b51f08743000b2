from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import DataApiUser, ManagerApiUser, RowId, SessionDep
from app.errors import error_responses
from app.models import INT32_MAX
from app.projects.service import get_project
from app.reports import service, skips
from app.quality.gold import set_gold
from app.reports.schemas import (
    MAX_REPORTS_PER_PAGE,
    GoldIn,
    LabelView,
    ProblemRestoration,
    ProblemRetirement,
    ReportFilters,
    ReportPage,
    ReportRead,
    ReportsDismissal,
    ReportsDismissed,
    SkipPage,
    SkipsGivenBack,
)

router = APIRouter(
    prefix="/api/v1/projects/{project_id}",
    tags=["reports"],
    responses=error_responses(401, 403, 422),
)


@router.get("/reports", response_model=ReportPage, responses=error_responses(404))
def list_reports(
    project_id: RowId,
    _: DataApiUser,
    session: SessionDep,
    filters: Annotated[ReportFilters, Query()],
    limit: Annotated[int, Query(ge=1, le=MAX_REPORTS_PER_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=INT32_MAX)] = 0,
) -> ReportPage:
    """Give-ups, bad-problem reports and flagged steps, newest first. A `labeler` no label here
    is by is refused (422), as the export refuses it."""
    project = get_project(session, project_id)
    service.check_labeler(session, project.id, filters)
    return service.list_reports(session, project.id, filters, limit=limit, offset=offset)


@router.get("/skips", response_model=SkipPage, responses=error_responses(404))
def list_skips(
    project_id: RowId,
    _: DataApiUser,
    session: SessionDep,
    labeler: Annotated[str | None, Query(max_length=100, description="a username or labeler UUID, in any case")] = None,
    order: Annotated[skips.SkipOrder, Query(description="newest first, or the most skipped solutions first")] = "newest",
    page: Annotated[int, Query(ge=1, le=100_000, description=f"{skips.PAGE_SIZE} skips a page")] = 1,
) -> SkipPage:
    """The solutions labelers passed over unlabeled, and who; each row says how many labelers
    skipped that solution. A `labeler` that names no user is refused (422)."""
    project = get_project(session, project_id)
    return skips.list_skips(session, project.id, labeler, order, page)


@router.delete("/skips", response_model=SkipsGivenBack, responses=error_responses(404))
def give_back_skips(
    project_id: RowId,
    user: ManagerApiUser,
    session: SessionDep,
    labeler: Annotated[str, Query(min_length=1, max_length=100, description="a username or labeler UUID, in any case")],
) -> SkipsGivenBack:
    """Take back every skip of one labeler in the project; 404 when they have none here."""
    return SkipsGivenBack(given_back=skips.give_back_all(session, get_project(session, project_id), labeler, user))


@router.delete("/skips/{solution_id}/{user_id}", status_code=204, responses=error_responses(404))
def give_back_skip(
    project_id: RowId, solution_id: RowId, user_id: RowId, user: ManagerApiUser, session: SessionDep
) -> None:
    """Take a labeler's skip back: the solution may be served to them again while it still needs
    labels. 404 when they have no such skip in the project."""
    skips.give_back(session, get_project(session, project_id), solution_id, user_id, user)


@router.post("/reports/dismiss", response_model=ReportsDismissed, responses=error_responses(400, 404))
def dismiss_reports(
    project_id: RowId, body: ReportsDismissal, user: ManagerApiUser, session: SessionDep
) -> ReportsDismissed:
    """Dismiss every open report of a kind, a labeler, or both, at once (one audit event): the
    flagged steps a retired problem left, say. `through` stops at the newest report the caller
    listed. 0 when none is open."""
    project = get_project(session, project_id)
    filters = ReportFilters(kind=body.kind, labeler=body.labeler)
    service.check_labeler(session, project.id, filters)
    return ReportsDismissed(dismissed=service.dismiss_reports(session, project, filters, body.through, user))


@router.post(
    "/reports/{report_id}/dismiss", response_model=ReportRead, responses=error_responses(404)
)
def dismiss_report(
    project_id: RowId, report_id: RowId, user: ManagerApiUser, session: SessionDep
) -> ReportRead:
    """Mark a report dismissed; dismissing it again changes nothing."""
    return service.dismiss_report(session, project_id, report_id, user)


@router.post(
    "/problems/{problem_id}/retire",
    response_model=ProblemRetirement,
    responses=error_responses(404),
)
def retire_problem(
    project_id: RowId, problem_id: RowId, user: ManagerApiUser, session: SessionDep
) -> ProblemRetirement:
    """Stop serving the problem's solutions; its labels stay and export. Its open bad-problem
    reports are dismissed in the caller's name. Idempotent."""
    return service.retire_problem(session, project_id, problem_id, user)


@router.post(
    "/problems/{problem_id}/restore",
    response_model=ProblemRestoration,
    responses=error_responses(404),
)
def restore_problem(
    project_id: RowId, problem_id: RowId, user: ManagerApiUser, session: SessionDep
) -> ProblemRestoration:
    """Undo a retirement: serve the problem's solutions again, each with the queue slots it
    lacks to reach the project's overlap. Idempotent."""
    return service.restore_problem(session, project_id, problem_id, user)


@router.get("/labels/{label_id}", response_model=LabelView, responses=error_responses(404))
def get_label(
    project_id: RowId, label_id: RowId, _: DataApiUser, session: SessionDep
) -> LabelView:
    """One label as submitted, with the problem and steps its labeler saw."""
    return service.label_view(session, project_id, label_id)


@router.put("/labels/{label_id}/gold", response_model=LabelView, responses=error_responses(400, 404, 409))
def make_gold(
    project_id: RowId, label_id: RowId, body: GoldIn, user: ManagerApiUser, session: SessionDep
) -> LabelView:
    """Take a person's current label as its solution's gold: a quality-control item from now
    on (a screening item with `screening`), grading the other labels of the solution. Idempotent."""
    set_gold(session, project_id, label_id, gold=True, screening=body.screening, by=user)
    return service.label_view(session, project_id, label_id)


@router.delete("/labels/{label_id}/gold", response_model=LabelView, responses=error_responses(404))
def remove_gold(project_id: RowId, label_id: RowId, user: ManagerApiUser, session: SessionDep) -> LabelView:
    """Make the label an ordinary one again; its solution stays gold only if other gold labels
    remain. Idempotent."""
    set_gold(session, project_id, label_id, gold=False, by=user)
    return service.label_view(session, project_id, label_id)
