"""The audit trail for scripts: admins only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.audit import service
from app.audit.schemas import AuditEventPage, AuditEventRead, EventQuery
from app.deps import AdminApiUser, SessionDep
from app.errors import error_responses

router = APIRouter(prefix="/api/v1/audit-events", tags=["audit"])


@router.get("", response_model=AuditEventPage, responses=error_responses(
    401, 403, 422, described={422: "a bad filter, or an `actor` no user has and no event keeps"}))
def list_audit_events(
    _: AdminApiUser,
    session: SessionDep,
    query: Annotated[EventQuery, Query()],
) -> AuditEventPage:
    """Who changed accounts, roles, projects, their settings and members, imported or removed
    files, retired or restored problems, dismissed reports, made labels gold, admitted or retired
    labelers, changed round settings or started or cancelled rounds, newest first."""
    page = service.list_events(session, category=query.category, actor=query.actor, limit=query.limit,
                               offset=query.offset)
    return AuditEventPage(total=page.total, events=[
        AuditEventRead(id=e.id, at=e.at, actor=e.actor, action=e.action, target=e.target,
                       summary=service.describe(e), details=e.details or {})
        for e in page.events
    ])
