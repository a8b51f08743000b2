"""The Labels tab: a project's current labels, filtered, a page at a time; each opens as labeled.
The Problems tab: its problems, with their ids, a page at a time."""

from __future__ import annotations

from typing import Annotated, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.browse import problems
from app.browse.labelers import not_labeling_here
from app.browse.service import PAGE_SIZE, LabelFilters, labeler_names, labelers_like, list_labels
from app.deps import MANAGE, DataPageUser, SessionDep, has_role
from app.forms import FormInvalid, PageId, validate_form
from app.models import AnswerGrade, FinishReason, LabelSource
from app.projects.service import get_project
from app.templating import render

router = APIRouter(prefix="/manage/projects/{project_id}/labels", include_in_schema=False)
Filters = TypeVar("Filters", bound=BaseModel)
problems_router = APIRouter(prefix="/manage/projects/{project_id}/problems", include_in_schema=False)


# Past LabelFilters' own limits, so that a value too long is refused in place, by the field.
TYPED = 2000


class FilterForm(BaseModel):
    """The filters as typed in the address; LabelFilters judges them."""

    labeler: str = Field(default="", max_length=TYPED)
    outcome: str = Field(default="", max_length=TYPED)
    source: str = Field(default="", max_length=TYPED)
    kind: str = Field(default="", max_length=TYPED)
    grade: str = Field(default="", max_length=TYPED)
    problem: str = Field(default="", max_length=TYPED)
    text: str = Field(default="", max_length=TYPED)
    agreement: str = Field(default="", max_length=TYPED)
    sort: str = Field(default="", max_length=TYPED)
    page: str = Field(default="", max_length=TYPED)


@router.get("")
def labels_page(
    request: Request,
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[FilterForm, Query()],
) -> Response:
    project = get_project(session, project_id)
    values = {**form.model_dump(), "labeler": form.labeler.strip(), "text": form.text.strip()}
    filters, errors = _judged(LabelFilters, values)
    listing = None if filters is None else list_labels(session, project.id, filters)
    # A labeler filter that matches no label at all is most often a name typed in another case, or
    # part of one (imported ids are matched exactly): say so, with the names it may have meant.
    labeler = filters.labeler if filters is not None else None
    unmatched = (listing is not None and listing.total == 0 and bool(labeler)
                 and bool(not_labeling_here(session, project.id, [labeler])))
    chosen = {k: v for k, v in values.items() if v and k != "page" and k not in errors}
    return render(
        request,
        "manage/labels.html",
        {
            "project": project,
            "tab": "labels",
            "values": values,
            "errors": errors,
            "listing": listing,
            "page_size": PAGE_SIZE,
            "filtered": bool(chosen),
            # The pager keeps the filters; a page number is added to this.
            "query": urlencode(chosen),
            "query_without_labeler": urlencode({k: v for k, v in chosen.items() if k != "labeler"}),
            # A column heading orders from the first page, keeping the filters.
            "query_without_sort": urlencode({k: v for k, v in chosen.items() if k != "sort"}),
            "labelers": labeler_names(session, project.id),
            "unmatched_labeler": unmatched,
            "labelers_like": labelers_like(session, project.id, labeler) if unmatched and labeler else [],
            "outcomes": list(FinishReason),
            "sources": list(LabelSource),
            "grades": list(AnswerGrade),
        },
        status_code=422 if errors else 200,
    )


class ProblemFilterForm(BaseModel):
    """The Problems tab's filters as typed in the address; ProblemFilters judges them."""

    text: str = Field(default="", max_length=TYPED)
    state: str = Field(default="", max_length=TYPED)
    page: str = Field(default="", max_length=TYPED)


@problems_router.get("")
def problems_page(
    request: Request,
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[ProblemFilterForm, Query()],
) -> Response:
    project = get_project(session, project_id)
    values = {**form.model_dump(), "text": form.text.strip()}
    filters, errors = _judged(problems.ProblemFilters, values)
    chosen = {k: v for k, v in values.items() if v and k != "page" and k not in errors}
    notice = next(((kind, request.query_params[kind]) for kind in ("retired", "restored")
                   if request.query_params.get(kind, "").isdigit()), None)
    return render(
        request,
        "manage/problems.html",
        {
            "project": project,
            "tab": "problems",
            "values": values,
            "errors": errors,
            "listing": None if filters is None else problems.list_problems(session, project.id, filters),
            "filtered": bool(chosen),
            "query": urlencode(chosen),
            "notice": notice,
            "can_manage": has_role(user, MANAGE),
        },
        status_code=422 if errors else 200,
    )


def _judged(model: type[Filters], values: dict[str, str]) -> tuple[Filters | None, dict[str, str]]:
    """The filters as `model` judges them, or None and the errors by field."""
    try:
        return validate_form(model, values), {}
    except FormInvalid as exc:
        return None, exc.errors
