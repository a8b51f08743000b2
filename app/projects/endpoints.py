from __future__ import annotations

from fastapi import APIRouter, status

from app.deps import ApiUser, DataApiUser, ManagerApiUser, RowId, SessionDep
from app.errors import error_responses
from app.projects import service
from app.projects.schemas import ProjectCreate, ProjectProgress, ProjectRead, ProjectUpdate

router = APIRouter(
    prefix="/api/v1/projects", tags=["projects"], responses=error_responses(401, 403, 422)
)


@router.get("", response_model=list[ProjectRead])
def list_projects(_: ApiUser, session: SessionDep) -> list[ProjectRead]:
    return [ProjectRead.model_validate(p) for p in service.list_projects(session)]


@router.post(
    "",
    response_model=ProjectRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 409),
)
def create_project(body: ProjectCreate, _: ManagerApiUser, session: SessionDep) -> ProjectRead:
    return ProjectRead.model_validate(service.create_project(session, body))


@router.get("/{project_id}", response_model=ProjectRead, responses=error_responses(404))
def get_project(project_id: RowId, _: ApiUser, session: SessionDep) -> ProjectRead:
    return ProjectRead.model_validate(service.get_project(session, project_id))


@router.patch("/{project_id}", response_model=ProjectRead, responses=error_responses(400, 404, 409))
def update_project(
    project_id: RowId, body: ProjectUpdate, _: ManagerApiUser, session: SessionDep
) -> ProjectRead:
    project = service.get_project(session, project_id)
    return ProjectRead.model_validate(service.update_project(session, project, body))


@router.get(
    "/{project_id}/progress", response_model=ProjectProgress, responses=error_responses(404)
)
def progress(project_id: RowId, _: DataApiUser, session: SessionDep) -> ProjectProgress:
    return service.project_progress(session, service.get_project(session, project_id))
