from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Request, Response, UploadFile, status

from app.deps import DataApiUser, ManagerApiUser, RowId, SessionDep
from app.errors import BadInput, error_responses
from app.imports import removal, service
from app.imports.candidates import MAX_SEPARATOR_LENGTH
from app.imports.schemas import ImportBatchRead, ImportRemoval, ImportResult
from app.imports.upload_form import ONE_FILE, FileParts
from app.models import ImportFormat
from app.projects.service import get_project
from app.request_body import media_type

router = APIRouter(
    prefix="/api/v1/projects/{project_id}/imports",
    tags=["imports"],
    responses=error_responses(401, 403, 404, 422),
)


async def _multipart(request: Request) -> None:
    """Refuses a body of any other type: FastAPI reads one as a form without parts, and asked
    for `file` and `format` as if they had been left out of it."""
    kind = media_type(request.headers)
    if kind != "multipart/form-data":
        said = f", not {kind}" if kind else ": the request had no Content-Type"
        raise BadInput("send the file as multipart/form-data with parts `file` and `format` (and `separator` "
                       f"for solutions){said}", field="body")


@router.post(
    "",
    response_model=ImportResult,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": ImportResult, "description": "this file was imported before: nothing added"},
        **error_responses(
            400,
            409,
            413,
            422,
            described={
                422: "bad lines: `errors` lists file, line, field and message; nothing added"
            },
        ),
    },
)
def import_upload(
    project_id: RowId,
    request: Request,
    response: Response,
    user: ManagerApiUser,
    session: SessionDep,
    # After the login and role checks, which answer a caller they turn away first.
    multipart: Annotated[None, Depends(_multipart)],
    file_parts: FileParts,
    file: Annotated[UploadFile, File(description="JSONL, one record a line")],
    fmt: Annotated[ImportFormat, Form(alias="format", description="prm800k, math or solutions")],
    separator: Annotated[
        str | None,
        Form(max_length=MAX_SEPARATOR_LENGTH, description='solutions given as `text`: the step separator (default "\\n\\n"; \\n is a newline)'),
    ] = None,
) -> ImportResult:
    """Import a file: all of it, or nothing if any line is bad."""
    project = get_project(session, project_id)
    if file_parts > 1:
        raise BadInput(ONE_FILE.format(count=file_parts), field="file")
    service.check_upload_size(file.size, request.app.state.settings.max_upload_mb)
    result = service.import_file(
        session,
        project,
        file.file,
        filename=file.filename or "upload.jsonl",
        fmt=fmt.value,
        separator=separator,
        user=user,
    )
    if result.already_imported:
        response.status_code = status.HTTP_200_OK
    return result


@router.get("", response_model=list[ImportBatchRead])
def list_imports(project_id: RowId, _: DataApiUser, session: SessionDep) -> list[ImportBatchRead]:
    """The project's imported files, newest first."""
    return service.list_batches(session, get_project(session, project_id))


@router.delete(
    "/{batch_id}",
    response_model=ImportRemoval,
    responses=error_responses(409, described={409: "work was done on what it added since; nothing changed"}),
)
def remove_import(project_id: RowId, batch_id: RowId, manager: ManagerApiUser, session: SessionDep) -> ImportRemoval:
    """Remove an imported file with the problems, solutions and labels it added. Refused while
    its solutions carry labels that did not come with it, are leased, or were picked by a round,
    and while a worker is at a round or comparison of the project."""
    return removal.remove_import(session, get_project(session, project_id), batch_id, by=manager)
