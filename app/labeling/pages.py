"""Labeler pages: choose a project, label, see one's own counts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup
from pydantic import BaseModel, Field

from app.deps import PageUser, SessionDep
from app.errors import Conflict, NotFound
from app.forms import PageId
from app.labeling import review, service
from app.labeling.queue import WAITING_COUNT_LIMIT
from app.models import Project, User, utcnow
from app.projects.access import get_visible_project
from app.projects.guidelines import guidelines_version, render_guidelines
from app.projects.guidelines_reads import current_read, record_read
from app.projects.service import get_project
from app.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/label")
def choose_project(request: Request, user: PageUser, session: SessionDep) -> Response:
    return render(request, "labeling/projects.html",
                  {"choices": service.project_choices(session, user, WAITING_COUNT_LIMIT), "waiting_limit": WAITING_COUNT_LIMIT})


@router.get("/label/stats")
def my_stats(
    request: Request,
    user: PageUser,
    session: SessionDep,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    skipped_page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    unskipped: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    return render(
        request,
        "labeling/stats.html",
        {
            "stats": service.labeler_stats(session, user),
            "labels": review.list_own_labels(session, user.id, page),
            "skips": review.list_own_skips(session, user.id, skipped_page),
            "unskipped": unskipped,
        },
    )


@router.post("/label/skips/{solution_id}/return")
def unskip(solution_id: PageId, user: PageUser, session: SessionDep) -> Response:
    """Take back a skip from My stats. One taken back already (another tab) is no error: the
    labeler asked for what is so."""
    try:
        service.unskip(session, user, solution_id)
    except NotFound:
        pass
    return RedirectResponse(f"/label/stats?unskipped={solution_id}#skipped", status_code=303)


@router.get("/label/labels/{label_id}")
def my_label(label_id: PageId, request: Request, user: PageUser, session: SessionDep) -> Response:
    """One of the labeler's labels, read-only, as submitted."""
    label = review.get_own_label(session, user.id, label_id)
    corrected = request.query_params.get("corrected") == "1"
    return render(request, "labeling/label.html", {"label": label, "corrected": corrected})


@router.get("/label/labels/{label_id}/correct")
def correct_label(label_id: PageId, request: Request, user: PageUser, session: SessionDep) -> Response:
    """The labeling page, started on one of the labeler's own labels with its ratings filled
    in; it submits a correction instead of a new label. A closed window shows the read-only
    view, which says why."""
    label = review.get_own_label(session, user.id, label_id)
    if not label.correction.open:
        return render(request, "labeling/label.html", {"label": label, "corrected": False}, status_code=409)
    project = get_project(session, label.project_id)
    config = {
        "project": {
            "id": project.id,
            "name": project.name,
            # The label's mode, not the project's: the project may have changed mode since.
            "labeling_mode": label.labeling_mode.value,
            "lease_minutes": project.lease_minutes,
        },
        "username": user.username,
        "correction": {
            # The page's clock, set from the server's: a correction leases nothing, so no answer
            # before its submit would tell how far the device's clock is off (its start is checked).
            "server_ms": int(utcnow().timestamp() * 1000),
            "label_id": label.label_id,
            "closes_at": label.correction.closes_at.isoformat() if label.correction.closes_at else None,
            "task": {
                "labeling_mode": label.labeling_mode.value,
                "problem": {"statement": label.problem, "answer": label.answer},
                "solution": {"id": label.solution_id, "steps": [s.text for s in label.steps]},
            },
            "ratings": [{"rating": s.rating, "flagged": s.flagged} for s in label.steps],
        },
    }
    return render(
        request,
        "labeling/task.html",
        {"project": project, "config": config, "correcting": label, **_guidelines_of(project)},
    )


@router.get("/label/{project_id}")
def label(project_id: PageId, request: Request, user: PageUser, session: SessionDep) -> Response:
    """The labeling page. It leases and submits through the JSON API, so that the page and
    API clients share one path; what it needs to start is handed over as JSON, never as
    markup."""
    project = get_visible_project(session, user, project_id)
    config = {
        "project": {
            "id": project.id,
            "name": project.name,
            "labeling_mode": project.labeling_mode.value,
            "lease_minutes": project.lease_minutes,
        },
        "username": user.username,
        # A labeler at work on a long lease still sends something before the session would end
        # unused (labeler.js, renewLease).
        "session_idle_minutes": request.app.state.settings.session_idle_minutes,
        # The page opens guidelines this labeler has not read in this version by itself.
        "guidelines": {
            "version": guidelines_version(project.guidelines),
            "read": current_read(session, project, user.id) is not None,
        } if project.guidelines else None,
    }
    return render(
        request, "labeling/task.html", {"project": project, "config": config, **_guidelines_of(project)}
    )


@router.get("/label/{project_id}/guidelines")
def guidelines(project_id: PageId, request: Request, user: PageUser, session: SessionDep) -> Response:
    """The project's guidelines on a page of their own: to read before starting, or to print."""
    project = get_visible_project(session, user, project_id)
    return _guidelines_page(request, session, user, project)


class GuidelinesReadForm(BaseModel):
    version: str = Field(default="", max_length=100)


@router.post("/label/{project_id}/guidelines/read")
def read_guidelines(
    project_id: PageId, request: Request, user: PageUser, session: SessionDep,
    form: Annotated[GuidelinesReadForm, Form()],
) -> Response:
    project = get_visible_project(session, user, project_id)
    try:
        record_read(session, project, user.id, form.version)
    except Conflict as exc:
        return _guidelines_page(request, session, user, project, error=exc.message, status_code=409)
    return RedirectResponse(f"/label/{project.id}/guidelines", status_code=303)


def _guidelines_page(
    request: Request, session: SessionDep, user: User, project: Project, *, error: str | None = None,
    status_code: int = 200,
) -> Response:
    read = current_read(session, project, user.id)
    return render(
        request, "labeling/guidelines.html",
        {"project": project, **_guidelines_of(project), "error": error,
         "version": guidelines_version(project.guidelines) if project.guidelines else None,
         "read_at": read.read_at if read is not None else None},
        status_code=status_code,
    )


def _guidelines_of(project: Project) -> dict[str, Markup | None]:
    text = project.guidelines
    return {"guidelines": render_guidelines(text) if text else None}
