"""The export form: filters checked where a mistake can be shown, then the API streams the file."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, status
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.deps import DataPageUser, SessionDep
from app.errors import BadInput
from app.exports.query import check_generations, check_labelers
from app.exports.schemas import FORMAT_PARAMETERS, ExportFilters, ExportFormat, filters_query, refuse_unread
from app.exports.service import Export, ExportCount
from app.forms import FormInvalid, PageId, validate_form
from app.models import Label, LabelSource, Project
from app.projects.service import get_project
from app.templating import render

router = APIRouter(prefix="/manage/projects/{project_id}/export", include_in_schema=False)


class ExportForm(BaseModel):
    """The fields as typed; lists are comma- or space-separated."""

    format: str = Field(default="", max_length=50)
    since: str = Field(default="", max_length=50)
    until: str = Field(default="", max_length=50)
    generations: str = Field(default="", max_length=5000)
    labelers: str = Field(default="", max_length=20_000)
    # The boxes ticked. `sources_offered` says the form showed them: then none ticked is a
    # choice of nothing, refused; a link without either keeps every source.
    sources: list[str] = Field(default_factory=list, max_length=len(LabelSource))
    sources_offered: bool = False
    qc: str = Field(default="", max_length=50)
    min_labeler_accuracy: str = Field(default="", max_length=50)
    min_agreement: str = Field(default="", max_length=50)
    neutral: str = Field(default="", max_length=50)
    completions: str = Field(default="", max_length=50)
    # The Count button: the page says what the filters keep instead of downloading it.
    count: bool = False


@router.get("")
def export_page(
    request: Request, project_id: PageId, user: DataPageUser, session: SessionDep
) -> Response:
    project = get_project(session, project_id)
    return _export_form(request, project, {"format": ExportFormat.prm800k.value}, {})


@router.get("/download")
def export_download(
    request: Request,
    project_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    form: Annotated[ExportForm, Query()],
) -> Response:
    project = get_project(session, project_id)
    errors: dict[str, str] = {}
    if form.format not in set(ExportFormat):
        errors["format"] = "choose PRM800K, TRL or Parquet"
    min_accuracy = None
    try:
        min_accuracy = _fraction(form.min_labeler_accuracy)
    except ValueError as exc:
        errors["min_labeler_accuracy"] = str(exc)
    min_agreement = None
    try:
        min_agreement = _fraction(form.min_agreement)
    except ValueError as exc:
        errors["min_agreement"] = str(exc)
    try:
        filters = validate_form(
            ExportFilters,
            {
                "since": form.since,
                "until": form.until,
                "generations": _listed(form.generations),
                "labelers": _listed(form.labelers),
                "sources": _sources(form.sources),
                "qc": form.qc,
                "min_labeler_accuracy": min_accuracy,
                "min_agreement": min_agreement,
                "neutral": form.neutral,
                "completions": form.completions,
            },
        )
    except FormInvalid as exc:
        errors.update(exc.errors)
    else:
        for field, check in (("labelers", check_labelers), ("generations", check_generations)):
            try:
                check(session, project.id, filters)
            except BadInput as exc:
                errors[field] = exc.message
        if "format" not in errors:
            # The form sends every field: one left at its default chooses nothing, and the API's
            # link leaves it out.
            chosen = [name for name in FORMAT_PARAMETERS
                      if getattr(filters, name) != ExportFilters.model_fields[name].default]
            try:
                refuse_unread(form.format, chosen)
            except BadInput as exc:
                errors[exc.details[0]["field"]] = exc.message
    if form.sources_offered and not form.sources:
        errors["sources"] = "tick at least one source"
    if not errors and Export(session, project.id, form.format, filters).is_empty():
        errors["form"] = _nothing_to_export(session, project.id, form.format, filters)
    if errors:
        return _export_form(request, project, form.model_dump(), errors, 422)
    if form.count:
        counted = Export(session, project.id, form.format, filters).count()
        return _export_form(request, project, form.model_dump(), {}, counted=counted)
    query = urlencode([("format", form.format), *filters_query(filters)])
    return RedirectResponse(f"/api/v1/projects/{project.id}/export?{query}", status_code=303)


def _nothing_to_export(session: Session, project_id: int, fmt: str, filters: ExportFilters) -> str:
    if session.scalar(select(Label.id).where(Label.project_id == project_id).limit(1)) is None:
        return "this project has no labels yet: label some, or import PRM800K labels, first"
    if fmt == ExportFormat.trl and not Export(session, project_id, ExportFormat.prm800k, filters).is_empty():
        return ("these filters keep labels, but none makes a TRL record: each gave up, reported the problem "
                "or left its first step unrated; PRM800K and Parquet export them")
    return "no label matches these filters"


def _fraction(percent: str) -> float | None:
    """The form asks for a percentage, the filter holds a fraction; ValueError, with the form's
    message, for anything but a number from 0 to 100, and for one between 0 and 1: the settings
    form takes shares (0.8), and 0.8 here would keep nearly everyone; and for 1, which the API
    reads as 100%. Written with its % sign, such a number is taken as it says."""
    signed = percent.strip().endswith("%")
    text = percent.strip().removesuffix("%").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError("give a percentage from 0 to 100") from None
    if not 0 <= value <= 100:
        raise ValueError("give a percentage from 0 to 100")
    if 0 < value <= 1 and not signed:
        raise ValueError(f"this field is a percentage: {text} would mean {text}%; for {value * 100:g}%, type "
                         f"{value * 100:g}, or {text}% if {text}% is meant")
    return value / 100


def _sources(ticked: list[str]) -> list[str] | None:
    # Every box ticked filters nothing: left out, the API's query stays as short as before.
    return None if not ticked or set(ticked) == set(LabelSource) else ticked


def _listed(text: str) -> list[str] | None:
    return [item for item in re.split(r"[\s,]+", text) if item] or None


def _export_form(
    request: Request,
    project: Project,
    values: dict[str, str],
    errors: dict[str, str],
    status_code: int = status.HTTP_200_OK,
    counted: ExportCount | None = None,
) -> Response:
    return render(
        request,
        "manage/export.html",
        {"project": project, "values": values, "errors": errors, "tab": "export", "sources": list(LabelSource),
         "counted": counted},
        status_code=status_code,
    )
