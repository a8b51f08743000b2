"""The Reports tab: what labelers raised, filtered, dismissed, downloaded; one label as seen."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.deps import MANAGE, DataPageUser, ManagerPageUser, SessionDep, has_role
from app.errors import BadInput, Conflict, NotFound
from app.forms import FormInvalid, PageId, row_id, validate_form
from app.models import INT32_MAX, Project, User
from app.projects.service import get_project
from app.quality.gold import set_gold
from app.reports import service, skips
from app.reports.csv_export import reports_csv
from app.reports.schemas import ReportFilters, ReportPage, SkipPage
from app.templating import render

router = APIRouter(prefix="/manage/projects/{project_id}", include_in_schema=False)

# Reports a page of the tab shows; the CSV holds every one the filters keep.
REPORTS_PAGE_SIZE = 100


class FilterForm(BaseModel):
    """The filters as typed; ReportFilters judges them."""

    kind: str = Field(default="", max_length=50)
    status: str = Field(default="", max_length=50)
    labeler: str = Field(default="", max_length=200)


class ReportsView(FilterForm):
    page: int = Field(default=1, ge=1, le=100_000)


class DismissAllForm(FilterForm):
    through: int | None = Field(default=None, ge=1, le=INT32_MAX)


class ProblemForm(FilterForm):
    # Set when the button was on a label's page, which is where the manager goes back to.
    label_id: int | None = Field(default=None, ge=1, le=INT32_MAX)
    # "reports" when that page was opened from the Reports tab, which it then links back to;
    # "problems" when the button was on the Problems tab, whose search and page it goes back to.
    via: Literal["", "reports", "problems"] = ""
    text: str = Field(default="", max_length=200)
    state: str = Field(default="", max_length=50)
    page: int | None = Field(default=None, ge=1, le=100_000)


def _filters(form: FilterForm) -> ReportFilters:
    return validate_form(ReportFilters, form.model_dump())


def _checked_filters(session: Session, project_id: int, form: FilterForm) -> ReportFilters:
    """The filters, with a labeler no label here is by refused as the API refuses it."""
    filters = _filters(form)
    try:
        service.check_labeler(session, project_id, filters)
    except BadInput as exc:
        raise FormInvalid({"labeler": exc.message}) from exc
    return filters


def _back_to_reports(project_id: int, form: FilterForm, **extra: object) -> RedirectResponse:
    """The Reports tab with the filters it was showing; values that do not validate are left
    out rather than echoed into the address."""
    try:
        filters = _filters(form).model_dump(exclude_none=True, mode="json")
    except FormInvalid:
        filters = {}
    query = urlencode({**filters, **extra})
    return RedirectResponse(
        f"/manage/projects/{project_id}/reports{'?' + query if query else ''}", status_code=303
    )


@router.get("/reports")
def reports_page(
    request: Request,
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[ReportsView, Query()],
) -> Response:
    project = get_project(session, project_id)
    messages = _problem_notices(request, session, project.id)
    # Where a dismiss sends the manager back to; an address naming an open report says nothing.
    dismissed = row_id(request.query_params.get("dismissed", ""))
    if dismissed is not None and service.is_dismissed(session, project.id, dismissed):
        messages.append({"kind": "success", "text": f"Report {dismissed} is dismissed."})
    # Where a dismiss of a report that is gone sends the manager back to.
    gone = row_id(request.query_params.get("gone", ""))
    if gone is not None and not service.report_exists(session, project.id, gone):
        messages.append({"kind": "info", "text": f"Report {gone} is no longer there: the labeler corrected "
                         "the label and no longer raises it, so there is nothing to dismiss."})
    all_dismissed = request.query_params.get("all_dismissed", "")
    if all_dismissed.isdigit():
        n = int(all_dismissed)
        messages.append({"kind": "success", "text": f"{n:,} report{'' if n == 1 else 's'} dismissed."} if n else
                        {"kind": "info", "text": "No open report matched: nothing was dismissed."})
    try:
        filters = _checked_filters(session, project.id, form)
    except FormInvalid as exc:
        page = ReportPage(total=0, reports=[])
        return _render(request, session, user, project, form, page, (0, None), exc.errors, messages, 422)
    page = service.list_reports(session, project.id, filters, limit=REPORTS_PAGE_SIZE,
                                offset=(form.page - 1) * REPORTS_PAGE_SIZE)
    open_shown = service.open_reports_shown(session, project.id, filters)
    return _render(request, session, user, project, form, page, open_shown, {}, messages, 200)


def _render(
    request: Request,
    session: SessionDep,
    user: User,
    project: Project,
    form: ReportsView,
    page: ReportPage,
    open_shown: tuple[int, int | None],
    errors: dict[str, str],
    messages: list[dict[str, str]],
    status_code: int,
) -> Response:
    values = form.model_dump(exclude={"page"})
    return render(
        request,
        "manage/reports.html",
        {
            "project": project,
            "tab": "reports",
            "page": page,
            "listing": {"page": form.page, "pages": max(1, -(-page.total // REPORTS_PAGE_SIZE))},
            "open_shown": open_shown,
            "values": values,
            "query": urlencode({k: v for k, v in values.items() if v}),
            "labelers": service.reporting_labelers(session, project.id),
            "can_manage": has_role(user, MANAGE),
            "errors": errors,
            "messages": messages,
        },
        status_code=status_code,
    )


@router.get("/reports/download")
def download_reports(
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[FilterForm, Query()],
) -> Response:
    """Every report the filters keep (not only the page's first rows), as CSV."""
    project = get_project(session, project_id)
    try:
        filters = _checked_filters(session, project.id, form)
    except FormInvalid as exc:
        return Response(
            "; ".join(f"{k}: {v}" for k, v in exc.errors.items()),
            status_code=422,
            media_type="text/plain",
        )
    page = service.list_reports(session, project.id, filters)
    return Response(
        reports_csv(page.reports),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="project-{project.id}-reports.csv"'
        },
    )


@router.post("/reports/dismiss-all")
def dismiss_all_reports(
    request: Request,
    project_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[DismissAllForm, Form()],
) -> Response:
    project = get_project(session, project_id)
    try:
        filters = _checked_filters(session, project.id, form)
    except FormInvalid as exc:
        view = ReportsView(**form.model_dump(exclude={"through"}))
        return _render(request, session, user, project, view, ReportPage(total=0, reports=[]), (0, None),
                       exc.errors, [], 422)
    dismissed = service.dismiss_reports(session, project, filters.model_copy(update={"status": None}), form.through, user)
    return _back_to_reports(project.id, form, all_dismissed=dismissed)


@router.post("/reports/{report_id}/dismiss")
def dismiss_report(
    project_id: PageId,
    report_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[ReportsView, Form()],
) -> Response:
    # Back to the page the manager was reading: a dismissed report stays listed where it was.
    on_page = {"page": form.page} if form.page > 1 else {}
    try:
        service.dismiss_report(session, project_id, report_id, user)
    except NotFound:
        # A labeler's correction withdraws the open reports it no longer raises: the list the
        # manager clicked in may be older than that.
        get_project(session, project_id)
        return _back_to_reports(project_id, form, **on_page, gone=report_id)
    return _back_to_reports(project_id, form, **on_page, dismissed=report_id)


@router.post("/problems/{problem_id}/retire")
def retire_problem(
    project_id: PageId,
    problem_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[ProblemForm, Form()],
) -> Response:
    return _change_problem(partial(service.retire_problem, by=user), session, project_id, problem_id, form, "retired")


@router.post("/problems/{problem_id}/restore")
def restore_problem(
    project_id: PageId,
    problem_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[ProblemForm, Form()],
) -> Response:
    return _change_problem(partial(service.restore_problem, by=user), session, project_id, problem_id, form, "restored")


def _change_problem(
    change: Callable[[Session, int, int], object],
    session: Session,
    project_id: int,
    problem_id: int,
    form: ProblemForm,
    notice: str,
) -> RedirectResponse:
    """Retire or restore a problem, then go back to the label page the button was on, or to the
    Reports tab with a banner saying what changed."""
    if form.label_id is not None:
        # Looked up first: a label that is not there changes nothing.
        label = service.label_view(session, project_id, form.label_id)
        change(session, project_id, problem_id)
        query = urlencode({notice: problem_id, **({"via": "reports"} if form.via == "reports" else {})})
        return RedirectResponse(
            f"/manage/projects/{project_id}/labels/{label.label_id}?{query}", status_code=303
        )
    change(session, project_id, problem_id)
    if form.via == "problems":
        kept = {"text": form.text, "state": form.state, "page": form.page}
        query = urlencode({**{k: v for k, v in kept.items() if v}, notice: problem_id})
        return RedirectResponse(f"/manage/projects/{project_id}/problems?{query}#problem-{problem_id}", status_code=303)
    return _back_to_reports(project_id, form, **{notice: problem_id})


@router.get("/labels/{label_id}")
def label_page(
    request: Request, project_id: PageId, label_id: PageId, user: DataPageUser, session: SessionDep
) -> Response:
    project = get_project(session, project_id)
    # Opened from the Reports tab or from the Labels tab: the page leads back there.
    via = "reports" if request.query_params.get("via") == "reports" else ""
    notice = GOLD_NOTICES.get(request.query_params.get("gold", ""))
    messages = [{"kind": "success", "text": notice}] if notice else []
    return _label_page(request, session, project, label_id, user, via,
                       messages + _problem_notices(request, session, project.id))


def _problem_notices(request: Request, session: SessionDep, project_id: int) -> list[dict[str, str]]:
    """Where the retire and restore buttons send the manager back to; an address typed by hand
    with another value, or with a problem in another state, shows no banner."""
    messages = []
    retired = row_id(request.query_params.get("retired", ""))
    if retired is not None and service.is_retired(session, project_id, retired) is True:
        answered = (" Its bad-problem reports are dismissed."
                    if service.bad_problem_reports_settled(session, project_id, retired) else "")
        messages.append({"kind": "success", "text": f"Problem {retired} is retired: it is not served again.{answered}"})
    restored = row_id(request.query_params.get("restored", ""))
    if restored is not None and service.is_retired(session, project_id, restored) is False:
        messages.append({"kind": "success",
                         "text": f"Problem {restored} is back in labeling: its solutions are served again."})
    return messages


GOLD_NOTICES = {
    "made": "This label is now gold: its solution is a quality-control item, and the other labels "
            "of the solution are graded against it.",
    "screening": "This label is now gold: its solution is a screening item, served to new labelers first.",
    "removed": "This label is an ordinary label again.",
}


class GoldForm(BaseModel):
    gold: bool
    screening: bool = False
    via: Literal["", "reports"] = ""


@router.post("/labels/{label_id}/gold")
def gold_form(
    request: Request,
    project_id: PageId,
    label_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[GoldForm, Form()],
) -> Response:
    project = get_project(session, project_id)
    try:
        set_gold(session, project.id, label_id, gold=form.gold, screening=form.screening, by=user)
    except Conflict as exc:
        return _label_page(request, session, project, label_id, user, form.via,
                           [{"kind": "error", "text": f"Nothing changed: {exc.message}."}], status_code=409)
    done = "removed" if not form.gold else "screening" if form.screening else "made"
    query = urlencode({"gold": done, **({"via": form.via} if form.via else {})})
    return RedirectResponse(f"/manage/projects/{project.id}/labels/{label_id}?{query}", status_code=303)


def _label_page(request: Request, session: SessionDep, project: Project, label_id: int, user: User,
                via: str, messages: list[dict[str, str]], status_code: int = 200) -> Response:
    context: dict[str, Any] = {
        "project": project,
        "tab": "reports" if via else "labels",
        "view": service.label_view(session, project.id, label_id),
        "can_manage": has_role(user, MANAGE),
        "messages": messages,
    }
    address = f"/manage/projects/{project.id}/labels/{label_id}" + ("?via=reports" if via else "")
    return render(request, "manage/label.html", context, status_code=status_code, address=address)


class SkipFilterForm(BaseModel):
    labeler: str = Field(default="", max_length=100)
    order: skips.SkipOrder = "newest"
    page: int = Field(default=1, ge=1, le=100_000)


def _skips_filters(form: SkipFilterForm) -> dict[str, object]:
    return {k: v for k, v in form.model_dump(exclude={"page"}).items() if v and (k, v) != ("order", "newest")}


def _skips_address(project_id: int, form: SkipFilterForm, **extra: object) -> str:
    kept = _skips_filters(form) | ({"page": form.page} if form.page > 1 else {})
    query = urlencode({**kept, **extra})
    return f"/manage/projects/{project_id}/skips{'?' + query if query else ''}"


@router.get("/skips")
def skips_page(
    request: Request,
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[SkipFilterForm, Query()],
) -> Response:
    project = get_project(session, project_id)
    messages = []
    given = row_id(request.query_params.get("given_back", ""))
    if given is not None:
        messages.append({"kind": "success", "text": f"Solution {given} is back in the labeler's queue: it may be "
                         "served to them again while it still needs labels."})
    all_given = request.query_params.get("all_given_back", "")
    if all_given.isdigit() and form.labeler:
        messages.append({"kind": "success", "text": f"{int(all_given):,} skipped solution{'' if all_given == '1' else 's'} "
                         f"given back to {form.labeler}: each may be served to them again while it still needs labels."})
    try:
        page = skips.list_skips(session, project.id, form.labeler or None, form.order, form.page)
        status_code = 200
    except BadInput as exc:
        page = SkipPage(total=0, page=form.page, pages=1, skips=[])
        messages.append({"kind": "error", "text": exc.message})
        status_code = 422
    return render(
        request,
        "manage/skips.html",
        {
            "project": project,
            "tab": "skips",
            "page": page,
            "values": form.model_dump(),
            "labelers": skips.skipping_labelers(session, project.id),
            "can_manage": has_role(user, MANAGE),
            "messages": messages,
            "query": urlencode(_skips_filters(form)),
        },
        status_code=status_code,
    )


class GiveBackAllForm(BaseModel):
    labeler: str = Field(min_length=1, max_length=100)


@router.post("/skips/give-back")
def give_back_all_skips(
    project_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[GiveBackAllForm, Form()],
) -> Response:
    project = get_project(session, project_id)
    try:
        given = skips.give_back_all(session, project, form.labeler, user)
    except NotFound:
        # Given back already, from another tab.
        given = 0
    return RedirectResponse(_skips_address(project.id, SkipFilterForm(labeler=form.labeler), all_given_back=given),
                            status_code=303)


@router.post("/skips/{solution_id}/{user_id}/give-back")
def give_back_skip(
    project_id: PageId,
    solution_id: PageId,
    user_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[SkipFilterForm, Form()],
) -> Response:
    project = get_project(session, project_id)
    try:
        skips.give_back(session, project, solution_id, user_id, user)
    except NotFound:
        # Given back already, from another tab or by the labeler: what was asked is so.
        pass
    return RedirectResponse(_skips_address(project.id, form, given_back=solution_id), status_code=303)
