"""The Labels tab: a project's current labels, filtered, a page at a time; each opens as labeled."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.browse.service import PAGE_SIZE, LabelFilters, labeled_here, labeler_names, labelers_like, list_labels
from app.deps import DataPageUser, SessionDep
from app.forms import FormInvalid, PageId, validate_form
from app.models import AnswerGrade, FinishReason, LabelSource
from app.projects.service import get_project
from app.templating import render

router = APIRouter(prefix="/manage/projects/{project_id}/labels", include_in_schema=False)


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
    errors: dict[str, str] = {}
    try:
        filters = validate_form(LabelFilters, values)
    except FormInvalid as exc:
        errors = exc.errors
    listing = None if errors else list_labels(session, project.id, filters)
    # A labeler filter that matches no label at all is most often a name typed in another case, or
    # part of one (imported ids are matched exactly): say so, with the names it may have meant.
    unmatched = (listing is not None and listing.total == 0 and bool(filters.labeler)
                 and not labeled_here(session, project.id, filters.labeler))
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
            "labelers_like": labelers_like(session, project.id, filters.labeler) if unmatched else [],
            "outcomes": list(FinishReason),
            "sources": list(LabelSource),
            "grades": list(AnswerGrade),
        },
        status_code=422 if errors else 200,
    )
