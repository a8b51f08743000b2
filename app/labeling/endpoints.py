from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from sqlalchemy.orm import Session

from app.db import in_transaction
from app.deps import ApiCredentials, ApiUser, RowId, SessionDep, api_caller
from app.errors import error_responses
from app.labeling import review, service
from app.labeling.schemas import (
    CorrectionReceipt,
    LabelerStats,
    LabelReceipt,
    LabelSubmit,
    LeaseRenewal,
    NextTask,
    OwnLabelDetail,
    OwnLabelPage,
    OwnSkipPage,
)
from app.ops.metrics import LABELS_SUBMITTED

router = APIRouter(prefix="/api/v1", tags=["labeling"], responses=error_responses(401, 403, 422))


@router.post(
    "/projects/{project_id}/tasks/next",
    response_model=NextTask,
    responses=error_responses(404, 409, described={
        409: "`guidelines` was given and the project's guidelines are now another version: nothing was leased",
    }),
)
async def next_task(
    project_id: RowId, request: Request, caller: ApiCredentials,
    guidelines: Annotated[str | None, Query(
        max_length=64,
        description="the version of the guidelines the labeler has read (the labeling page sends it; "
        "empty for a project without guidelines): when they have changed since, nothing is leased (409)",
    )] = None,
) -> NextTask:
    """Lease the best solution this labeler may label next (or return the one already held)."""

    def lease(session: Session) -> NextTask:
        user_id = api_caller(session, caller, lock_user=True).user_id
        request.state.user_id = user_id
        if guidelines is not None:
            service.check_guidelines_read(session, project_id, user_id, guidelines)
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
        request.state.user_id = api_caller(session, caller).user_id
        return service.submit_label(session, request.state.user_id, assignment_id, body)

    receipt = await in_transaction(request, store)
    if not receipt.duplicate:
        # Counted once committed: a label rolled back is no label.
        LABELS_SUBMITTED.labels(receipt.finish_reason.value).inc()
    return receipt


@router.post(
    "/assignments/{assignment_id}/release",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409),
)
def release(assignment_id: RowId, user: ApiUser, session: SessionDep) -> None:
    """Hand the lease back unlabeled: its slot waits in the queue again at once, for another
    labeler, or for you when nobody else takes it."""
    service.release_task(session, user, assignment_id)


@router.post(
    "/assignments/{assignment_id}/skip",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409),
)
def skip(assignment_id: RowId, user: ApiUser, session: SessionDep) -> None:
    """Pass over the task without labeling it: the solution is not served to you again in this
    project, and its slot goes to another labeler. Release, by contrast, hands the lease back
    and the solution may come back to you. A screening question cannot be skipped (409)."""
    service.skip_task(session, user, assignment_id)


@router.post(
    "/assignments/{assignment_id}/renew",
    response_model=LeaseRenewal,
    responses=error_responses(404, 409),
)
def renew(assignment_id: RowId, user: ApiUser, session: SessionDep) -> LeaseRenewal:
    """Hold the task for a whole lease from now (the project's lease minutes); a lease that ran
    out is taken again while nobody else has taken the solution's slot."""
    return service.renew_lease(session, user, assignment_id)


@router.get("/me/stats", response_model=LabelerStats)
def my_stats(user: ApiUser, session: SessionDep) -> LabelerStats:
    return service.labeler_stats(session, user)


@router.get("/me/labels", response_model=OwnLabelPage)
def my_labels(
    user: ApiUser,
    session: SessionDep,
    page: Annotated[int, Query(ge=1, le=100_000, description="20 labels a page, newest first")] = 1,
) -> OwnLabelPage:
    return review.list_own_labels(session, user.id, page)


@router.get("/me/skips", response_model=OwnSkipPage)
def my_skips(
    user: ApiUser,
    session: SessionDep,
    page: Annotated[int, Query(ge=1, le=100_000, description="20 skips a page, newest first")] = 1,
) -> OwnSkipPage:
    return review.list_own_skips(session, user.id, page)


@router.delete("/me/skips/{solution_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
def unskip(solution_id: RowId, user: ApiUser, session: SessionDep) -> None:
    """Take back a skip: the solution may be served to you again while it still needs labels."""
    service.unskip(session, user, solution_id)


@router.get("/me/labels/{label_id}", response_model=OwnLabelDetail, responses=error_responses(404))
def my_label(label_id: RowId, user: ApiUser, session: SessionDep) -> OwnLabelDetail:
    """One of the caller's labels, with the solution and the ratings as submitted."""
    return review.get_own_label(session, user.id, label_id)


@router.post(
    "/me/labels/{label_id}/corrections",
    response_model=CorrectionReceipt,
    responses=error_responses(
        400,
        404,
        409,
        described={
            409: "the correction window has closed, the label was already corrected, or the "
            "idempotency key was used for another label"
        },
    ),
)
def correct_label(
    label_id: RowId, body: LabelSubmit, user: ApiUser, session: SessionDep
) -> CorrectionReceipt:
    """Replace one of the caller's labels with a corrected one, within the project's
    correction window; the replaced label is kept, marked superseded."""
    return review.correct_label(session, user.id, label_id, body)
