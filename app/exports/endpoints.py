from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from app.audit import service as audit
from app.deps import DataApiUser, RowId, SessionDep
from app.errors import BadInput, error_responses, field_error
from app.exports.query import check_generations, check_labelers
from app.exports.schemas import (
    MAX_FILTER_VALUES,
    Accuracy,
    ExportFilters,
    ExportFormat,
    Generation,
    LabelerRef,
    filters_query,
    refuse_unread,
)
from app.exports.service import MEDIA_TYPES, export_filename, stream_export
from app.exports.streaming import ClosingStreamingResponse
from app.models import utcnow
from app.projects.service import get_project

router = APIRouter(
    prefix="/api/v1/projects/{project_id}",
    tags=["exports"],
    responses=error_responses(401, 403, 404, 422),
)


def export_filters(
    since: Annotated[date | None, Query(description="labels created on or after this UTC day")] = None,
    until: Annotated[date | None, Query(description="labels created before this UTC day")] = None,
    generation: Annotated[
        list[Generation] | None,
        Query(max_length=MAX_FILTER_VALUES, description="only these generations (repeatable)"),
    ] = None,
    labeler: Annotated[
        list[LabelerRef] | None,
        Query(
            max_length=MAX_FILTER_VALUES,
            description="username, labeler UUID or imported labeler id (repeatable)",
        ),
    ] = None,
    source: Annotated[
        list[str] | None,
        Query(
            max_length=MAX_FILTER_VALUES,
            description="only labels from these sources: human, rollout, judge, prm (repeatable or comma-separated)",
        ),
    ] = None,
    qc: Annotated[Literal["include", "exclude", "only"], Query()] = "include",
    min_labeler_accuracy: Annotated[
        Accuracy | None,
        Query(description="only labelers whose agreement with QC gold is at least this (0 to 1)"),
    ] = None,
    min_agreement: Annotated[
        Accuracy | None,
        Query(description="only solutions whose labelers agree on the first error at least this often (0 to 1)"),
    ] = None,
    neutral: Annotated[
        Literal["positive", "negative"],
        Query(description="TRL only (refused with another format): what a 0 rating becomes"),
    ] = "positive",
    completions: Annotated[
        Literal["chosen", "all"],
        Query(
            description="TRL and Parquet only (refused with another format): the labelers' paths only "
            "(chosen), or also every other rated alternative as its own example, human-written steps marked (all)"
        ),
    ] = "chosen",
) -> ExportFilters:
    try:
        return ExportFilters(
            since=since,
            until=until,
            generations=generation,
            labelers=labeler,
            sources=[s for value in source for s in value.split(",") if s] if source else None,
            qc=qc,
            min_labeler_accuracy=min_labeler_accuracy,
            min_agreement=min_agreement,
            neutral=neutral,
            completions=completions,
        )
    except ValidationError as exc:
        # Named as the query names them: `source`, not ExportFilters' `sources.0`; the one check
        # across fields is that `since` comes before `until`.
        details = [field_error(e, whole="until", name=_query_parameter) for e in exc.errors()]
        raise BadInput("invalid export filters", details) from exc


def _query_parameter(field: str) -> str:
    name = field.split(".")[0]
    return {"generations": "generation", "labelers": "labeler", "sources": "source"}.get(name, name)


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "the export, streamed as an attachment",
            "content": {media: {} for media in set(MEDIA_TYPES.values())},
        }
    },
)
@router.head("/export", include_in_schema=False)
def export(
    project_id: RowId,
    request: Request,
    user: DataApiUser,
    session: SessionDep,
    fmt: Annotated[ExportFormat, Query(alias="format")],
    filters: Annotated[ExportFilters, Depends(export_filters)],
) -> StreamingResponse:
    """Labels of the project as PRM800K JSONL, TRL stepwise supervision JSONL, or Parquet. HEAD
    answers as GET would, without the export."""
    refuse_unread(fmt.value, request.query_params.keys())
    project = get_project(session, project_id)
    check_labelers(session, project.id, filters)
    check_generations(session, project.id, filters)
    filename = export_filename(project, fmt.value, utcnow().date())
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if request.method == "HEAD":
        # A monitor's check of the address: building the export would cost a download's work,
        # and recording it would fill the audit trail with downloads nobody made.
        return StreamingResponse(iter(()), media_type=MEDIA_TYPES[fmt], headers=headers)
    audit.record(session, user, "export.downloaded", audit.project_target(project), format=fmt.value,
                 filters=filters_query(filters))
    return ClosingStreamingResponse(
        stream_export(request.app.state.session_factory, project.id, fmt.value, filters),
        media_type=MEDIA_TYPES[fmt],
        headers=headers,
    )
