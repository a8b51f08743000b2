"""Labeler pages: choose a project, label, see one's own counts."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.deps import PageUser, SessionDep
from app.forms import PageId
from app.labeling import service
from app.labeling.queue import waiting_count
from app.projects.service import get_project, list_projects
from app.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/label")
def choose_project(request: Request, user: PageUser, session: SessionDep) -> Response:
    projects = [(p, waiting_count(session, p.id)) for p in list_projects(session)]
    return render(request, "labeling/projects.html", {"projects": projects})


@router.get("/label/stats")
def my_stats(request: Request, user: PageUser, session: SessionDep) -> Response:
    return render(request, "labeling/stats.html", {"stats": service.labeler_stats(session, user)})


@router.get("/label/{project_id}")
def label(project_id: PageId, request: Request, user: PageUser, session: SessionDep) -> Response:
    """The labeling page. It leases and submits through the JSON API, so that the page and
    API clients share one path; what it needs to start is handed over as JSON, never as
    markup."""
    project = get_project(session, project_id)
    config = {
        "project": {
            "id": project.id,
            "name": project.name,
            "labeling_mode": project.labeling_mode.value,
            "lease_minutes": project.lease_minutes,
        },
        "username": user.username,
    }
    return render(request, "labeling/task.html", {"project": project, "config": config})
