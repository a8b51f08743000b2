from __future__ import annotations

from fastapi import APIRouter, Request, status
from sqlalchemy.orm import Session

from app.db import in_transaction
from app.deps import ApiCredentials, ApiUser, RowId, SessionDep, api_caller
from app.errors import error_responses
from app.labeling import service
from app.labeling.schemas import LabelerStats, LabelReceipt, LabelSubmit, NextTask

router = APIRouter(prefix="/api/v1", tags=["labeling"], responses=error_responses(401, 403, 422))


@router.post(
    "/projects/{project_id}/tasks/next",
    response_model=NextTask,
    responses=error_responses(404),
)
async def next_task(project_id: RowId, request: Request, caller: ApiCredentials) -> NextTask:
    """Lease the best solution this labeler may label next (or return the one already held)."""

    def lease(session: Session) -> NextTask:
        user_id = api_caller(session, caller, lock_user=True).user_id
        return service.next_task(session, project_id, user_id, user_locked=True)

    return await in_transaction(request, lease)


@router.post(
    "/assignments/{assignment_id}/submit",
    response_model=LabelReceipt,
    responses=error_responses(
        400,
        404,
        409,
        described={
            409: "already submitted under another key, the key was used for another "
            "assignment, or the lease ran out and this labeler took the solution again"
        },
    ),
)
async def submit(
    assignment_id: RowId, body: LabelSubmit, request: Request, caller: ApiCredentials
) -> LabelReceipt:
    """Store a label. Sending the same idempotency key again returns the first receipt."""

    def store(session: Session) -> LabelReceipt:
        return service.submit_label(session, api_caller(session, caller).user_id, assignment_id, body)

    return await in_transaction(request, store)


@router.post(
    "/assignments/{assignment_id}/release",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409),
)
def release(assignment_id: RowId, user: ApiUser, session: SessionDep) -> None:
    service.release_task(session, user, assignment_id)


@router.get("/me/stats", response_model=LabelerStats)
def my_stats(user: ApiUser, session: SessionDep) -> LabelerStats:
    return service.labeler_stats(session, user)
