from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from app.deps import ApiUser, DataApiUser, ManagerApiUser, RowId, SessionDep
from app.errors import error_responses
from app.models import StandingDecision
from app.projects import guidelines_reads, members, service
from app.projects.access import get_visible_project
from app.projects.activity import leases_in_hand, project_activity
from app.projects.schemas import (
    GuidelinesReadersRead,
    GuidelinesReadIn,
    GuidelinesReceipt,
    LabelerStandingRead,
    MemberCreate,
    MemberRead,
    LeaseList,
    ProjectActivityRead,
    ProjectCreate,
    ProjectProgress,
    ProjectRead,
    ProjectUpdate,
    StandingDecisionIn,
)
from app.quality import gate
from app.quality.agreement import project_agreement
from app.quality.schemas import ProjectAgreementRead

router = APIRouter(
    prefix="/api/v1/projects", tags=["projects"], responses=error_responses(401, 403, 422)
)


@router.get("", response_model=list[ProjectRead])
def list_projects(user: ApiUser, session: SessionDep) -> list[ProjectRead]:
    """Every project; for a labeler, those open to all and those they are a member of."""
    return [ProjectRead.model_validate(p) for p in service.list_projects(session, seen_by=user)]


@router.post(
    "",
    response_model=ProjectRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 409),
)
def create_project(body: ProjectCreate, manager: ManagerApiUser, session: SessionDep) -> ProjectRead:
    return ProjectRead.model_validate(service.create_project(session, body, by=manager))


@router.get("/{project_id}", response_model=ProjectRead, responses=error_responses(404))
def get_project(project_id: RowId, user: ApiUser, session: SessionDep, response: Response) -> ProjectRead:
    """The project; its `ETag` header names its settings as they are, for a PATCH's If-Match."""
    project = get_visible_project(session, user, project_id)
    response.headers["ETag"] = service.settings_etag(project)
    return ProjectRead.model_validate(project)


@router.patch("/{project_id}", response_model=ProjectRead, responses=error_responses(400, 404, 409, 412))
def update_project(
    project_id: RowId,
    body: ProjectUpdate,
    manager: ManagerApiUser,
    session: SessionDep,
    response: Response,
    if_match: Annotated[str | None, Header(description="the ETag the caller read: 412 when the settings "
                                                        "changed since, so that a change made meanwhile is not overwritten")] = None,
) -> ProjectRead:
    """Change the settings given, leaving the others as stored."""
    project = service.get_project(session, project_id)
    service.check_if_match(project, if_match)
    updated = service.update_project(session, project, body, by=manager)
    response.headers["ETag"] = service.settings_etag(updated)
    return ProjectRead.model_validate(updated)


@router.delete(
    "/{project_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409, described={409: "a worker runs a round or measures a comparison of it"}),
)
def delete_project(project_id: RowId, manager: ManagerApiUser, session: SessionDep) -> None:
    """Delete the project with everything in it: problems, solutions, labels, reports, rounds and
    their picks, model versions' records. There is no undo; export what you need first. Model
    checkpoint directories stay on the workers' disk."""
    service.delete_project(session, service.get_project(session, project_id), by=manager)


@router.post(
    "/{project_id}/guidelines/read",
    response_model=GuidelinesReceipt,
    responses=error_responses(400, 404, 409, described={409: "no guidelines, or they changed since this version"}),
)
def read_guidelines(
    project_id: RowId, body: GuidelinesReadIn, user: ApiUser, session: SessionDep
) -> GuidelinesReceipt:
    """Acknowledge having read the project's guidelines in their current version (the labeling
    page does so when its labeler closes them)."""
    project = get_visible_project(session, user, project_id)
    return GuidelinesReceipt.model_validate(guidelines_reads.record_read(session, project, user.id, body.version))


@router.get(
    "/{project_id}/guidelines/readers", response_model=GuidelinesReadersRead, responses=error_responses(404)
)
def guidelines_readers(project_id: RowId, _: DataApiUser, session: SessionDep) -> GuidelinesReadersRead:
    """Who of the project's labelers (its members, those who labeled here or read a version) has
    read the guidelines as they stand, an older version, or none."""
    return GuidelinesReadersRead.model_validate(
        guidelines_reads.readers(session, service.get_project(session, project_id)))


@router.get(
    "/{project_id}/progress", response_model=ProjectProgress, responses=error_responses(404)
)
def progress(project_id: RowId, _: DataApiUser, session: SessionDep) -> ProjectProgress:
    return service.project_progress(session, service.get_project(session, project_id))


@router.get(
    "/{project_id}/agreement", response_model=ProjectAgreementRead, responses=error_responses(404)
)
def agreement(project_id: RowId, _: DataApiUser, session: SessionDep) -> ProjectAgreementRead:
    """Inter-annotator agreement among the current labels of solutions with several labelers."""
    project = service.get_project(session, project_id)
    return ProjectAgreementRead.model_validate(project_agreement(session, project))


@router.get(
    "/{project_id}/activity", response_model=ProjectActivityRead, responses=error_responses(404)
)
def activity(project_id: RowId, _: DataApiUser, session: SessionDep) -> ProjectActivityRead:
    """Per labeler: labels, pace, share of -1 ratings, give-ups, QC accuracy, the last label and
    labels per day over the last 14 days (the overview's Labeler activity card)."""
    project = service.get_project(session, project_id)
    return ProjectActivityRead.model_validate(project_activity(session, project.id))


@router.get("/{project_id}/members", response_model=list[MemberRead], responses=error_responses(404))
def list_members(project_id: RowId, _: DataApiUser, session: SessionDep) -> list[MemberRead]:
    """The labelers who may label in the project when it is not open to all. Researchers may
    read it, as on the project's page; changing it is the managers'."""
    return members.list_members(session, service.get_project(session, project_id))


@router.post(
    "/{project_id}/members",
    response_model=MemberRead,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(
        400, 404, 409, described={404: "no such project or user", 409: "already a member"}
    ),
)
def add_member(project_id: RowId, body: MemberCreate, manager: ManagerApiUser, session: SessionDep) -> MemberRead:
    """Let a labeler into the project. Only labelers are members: 422 for other roles."""
    return members.add_member(session, service.get_project(session, project_id), body.username, by=manager)


@router.delete(
    "/{project_id}/members/{user_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, described={404: "no such project, or the user is not a member"}),
)
def remove_member(project_id: RowId, user_id: RowId, manager: ManagerApiUser, session: SessionDep) -> None:
    """Take a labeler out: in a project not open to all, their leases go back to the queue and
    their submits are refused."""
    members.remove_member(session, service.get_project(session, project_id), user_id, by=manager)


@router.get(
    "/{project_id}/screening", response_model=list[LabelerStandingRead], responses=error_responses(404)
)
def list_standings(project_id: RowId, _: DataApiUser, session: SessionDep) -> list[LabelerStandingRead]:
    """Each labeler's screening result, QC accuracy and standing in the project. Researchers
    may read them, as on the project's page; admitting and retiring are the managers'."""
    found = gate.standings(session, service.get_project(session, project_id))
    return [LabelerStandingRead.model_validate(s, from_attributes=True) for s in found]


@router.post(
    "/{project_id}/screening/{user_id}",
    response_model=LabelerStandingRead,
    responses=error_responses(400, 404, described={404: "no such project or labeler"}),
)
def decide_about_labeler(
    project_id: RowId, user_id: RowId, body: StandingDecisionIn, manager: ManagerApiUser, session: SessionDep
) -> LabelerStandingRead:
    """Admit a labeler (they label regardless of screening; a QC pause is lifted) or retire
    them (no more tasks here; their leases go back to the queue)."""
    decision = StandingDecision.admitted if body.decision == "admit" else StandingDecision.retired
    standing = gate.decide_about(session, service.get_project(session, project_id), user_id, decision, manager.id)
    return LabelerStandingRead.model_validate(standing, from_attributes=True)


@router.get("/{project_id}/leases", response_model=LeaseList, responses=error_responses(404))
def leases(
    project_id: RowId,
    _: DataApiUser,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> LeaseList:
    """The tasks labelers hold now, the longest held first: labeler, solution, since when, until
    when. A lease that runs out goes back to the queue by itself."""
    project = service.get_project(session, project_id)
    return leases_in_hand(session, project.id, limit)
