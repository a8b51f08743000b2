from __future__ import annotations

from fastapi import APIRouter, status

from app.deps import ApiUser, RowId, SessionDep
from app.labeling import service
from app.labeling.schemas import LabelerStats, LabelReceipt, LabelSubmit, NextTask
from app.projects.service import get_project

router = APIRouter(prefix="/api/v1", tags=["labeling"])


@router.post("/projects/{project_id}/tasks/next", response_model=NextTask)
def next_task(project_id: RowId, user: ApiUser, session: SessionDep) -> NextTask:
    """Lease the best solution this labeler may label next (or return the one already held)."""
    return service.next_task(session, get_project(session, project_id), user)


@router.post("/assignments/{assignment_id}/submit", response_model=LabelReceipt)
def submit(
    assignment_id: RowId, body: LabelSubmit, user: ApiUser, session: SessionDep
) -> LabelReceipt:
    """Store a label. Sending the same idempotency key again returns the first receipt."""
    return service.submit_label(session, user, assignment_id, body)


@router.post("/assignments/{assignment_id}/release", status_code=status.HTTP_204_NO_CONTENT)
def release(assignment_id: RowId, user: ApiUser, session: SessionDep) -> None:
    service.release_task(session, user, assignment_id)


@router.get("/me/stats", response_model=LabelerStats)
def my_stats(user: ApiUser, session: SessionDep) -> LabelerStats:
    return service.labeler_stats(session, user)
