"""The manager's upload page: a file in, every bad line shown, or a summary of what was added."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile, status
from fastapi.responses import Response

from app.deps import ManagerPageUser, SessionDep
from app.errors import BadInput
from app.forms import PageId
from app.imports.candidates import MAX_SEPARATOR_LENGTH
from app.imports.schemas import ImportResult
from app.imports.service import UploadTooLarge, check_upload_size, import_file
from app.imports.upload_form import ONE_FILE, FileParts
from app.models import ImportFormat, Project
from app.projects.service import get_project
from app.templating import render

router = APIRouter(prefix="/manage/projects/{project_id}/import", include_in_schema=False)


@router.get("")
def import_page(
    request: Request, project_id: PageId, user: ManagerPageUser, session: SessionDep
) -> Response:
    project = get_project(session, project_id)
    return _import_form(request, project, {"format": ImportFormat.solutions.value})


@router.post("")
def import_upload(
    request: Request,
    project_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    file_parts: FileParts,
    file: Annotated[UploadFile | None, File()] = None,
    fmt: Annotated[str, Form(alias="format", max_length=50)] = "",
    separator: Annotated[str, Form(max_length=MAX_SEPARATOR_LENGTH)] = "",
) -> Response:
    project = get_project(session, project_id)
    values = {"format": fmt, "separator": separator}
    if file_parts > 1:
        return _import_form(request, project, values, {"message": ONE_FILE.format(count=file_parts)}, 422)
    if file is None or not file.filename:
        return _import_form(request, project, values, {"message": "choose a file to upload"}, 422)
    try:
        check_upload_size(file.size, request.app.state.settings.max_upload_mb)
    except UploadTooLarge as exc:
        return _import_form(request, project, values, {"message": exc.message}, exc.status_code)
    try:
        # A savepoint: the service may have written part of the file before it met a bad line,
        # and this page answers normally, so the request's commit would otherwise keep that part.
        with session.begin_nested():
            result = import_file(
                session,
                project,
                file.file,
                filename=file.filename,
                fmt=fmt,
                separator=separator or None,
                user=user,
            )
    except BadInput as exc:
        details = exc.details or []
        by_line = sorted(details, key=lambda d: (d.get("line") is None, d.get("line") or 0))
        failed = {"message": exc.message, "details": by_line}
        return _import_form(request, project, values, failed, 422)
    return _import_form(request, project, values, result=result)


def _import_form(
    request: Request,
    project: Project,
    values: dict[str, str],
    failed: dict[str, Any] | None = None,
    status_code: int = status.HTTP_200_OK,
    result: ImportResult | None = None,
) -> Response:
    return render(
        request,
        "manage/import.html",
        {
            "project": project,
            "values": values,
            "failed": failed,
            "result": result,
            "formats": list(ImportFormat),
            "tab": "import",
        },
        status_code=status_code,
    )
