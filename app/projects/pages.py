"""Manager pages: the projects, their settings and their progress (researchers may look)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated, Any, Literal

import orjson

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field

from app.deps import MANAGE, DataPageUser, ManagerPageUser, SessionDep, has_role
from app.errors import Conflict, NotFound, ServiceError
from app.forms import FormInvalid, PageId, SentFields, row_id, sent_values, validate_form
from app.imports import removal
from app.imports.service import list_batches
from app.models import Project, StandingDecision, User, utcnow
from app.projects import guidelines_reads, members, service
from app.projects.activity import leases_in_hand, project_activity
from app.projects.checks import unmet_settings
from app.projects.guidelines import GUIDELINES_MAX_LENGTH
from app.projects.schemas import CHART_DAYS, DailyCount, HourlyCount, MemberRead, ProjectCreate, ProjectUpdate
from app.quality import gate
from app.quality.agreement import project_agreement
from app.quality.service import labeler_accuracy
from app.templating import render

router = APIRouter(prefix="/manage/projects", include_in_schema=False)

CHART_HEIGHT = 120
# A labeler's bars on the activity card: a day with one label among hundreds still shows.
SPARKLINE_HEIGHT, SPARKLINE_LEAST = 19, 2


# A number typed into a form: long enough that a mistyped one is answered next to its field
# ("must be at most 20"), where past this cap the page could only give a bare error.
NUMBER_TEXT = 1000


class SettingsForm(BaseModel):
    """The fields as typed: ProjectCreate/ProjectUpdate judge them, so errors show in place."""

    # Far above ProjectUpdate's limit, which says what is too long next to the field; past this
    # the page could only answer with a bare error and lose the other fields as typed.
    name: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=100_000)
    guidelines: str = Field(default="", max_length=2 * GUIDELINES_MAX_LENGTH)
    labeling_mode: str = Field(default="", max_length=50)
    overlap: str = Field(default="", max_length=NUMBER_TEXT)
    lease_minutes: str = Field(default="", max_length=NUMBER_TEXT)
    correction_window_hours: str = Field(default="", max_length=NUMBER_TEXT)
    screening_items: str = Field(default="", max_length=NUMBER_TEXT)
    screening_pass_mark: str = Field(default="", max_length=NUMBER_TEXT)
    qc_rate: str = Field(default="", max_length=NUMBER_TEXT)
    qc_feedback: str = Field(default="", max_length=50)
    qc_pause_below: str = Field(default="", max_length=NUMBER_TEXT)
    # Asked on the new-project form only: an existing project's access has a button of its own.
    open_to_all: str = Field(default="", max_length=50)
    # The settings form's fingerprints of what it showed (service.settings_fingerprints).
    seen: str = Field(default="", max_length=2000)


# The settings a manager may leave blank; every other field of the form needs a value.
OPTIONAL_TEXTS = ("description", "guidelines")


class MemberForm(BaseModel):
    username: str = Field(default="", max_length=200)


class AccessForm(BaseModel):
    open_to_all: bool


class DecisionForm(BaseModel):
    decision: Literal["admit", "retire"]


@router.get("")
def projects_page(request: Request, user: DataPageUser, session: SessionDep) -> Response:
    return _projects_list(request, session, user, {}, {}, status.HTTP_200_OK)


@router.post("")
def create_project(
    request: Request,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[SettingsForm, Form()],
    sent: SentFields,
) -> Response:
    values = {**form.model_dump(), "name": form.name.strip()}
    # As the settings form: a number field the page sent emptied is refused, not replaced by
    # its default under a page that says the project was made as typed.
    emptied = {name for name in sent & SettingsForm.model_fields.keys() if name not in OPTIONAL_TEXTS}
    try:
        project = service.create_project(
            session, validate_form(ProjectCreate, values, keep_blank=OPTIONAL_TEXTS, required=emptied), by=user)
    except FormInvalid as exc:
        return _projects_list(request, session, user, values, exc.errors, 422)
    except Conflict as exc:
        return _projects_list(request, session, user, values, {"name": exc.message}, 409)
    return RedirectResponse(f"/manage/projects/{project.id}", status_code=303)


def _projects_list(
    request: Request,
    session: SessionDep,
    user: User,
    values: dict[str, str],
    errors: dict[str, str],
    status_code: int,
) -> Response:
    rows = [(p, service.project_progress(session, p)) for p in service.list_projects(session)]
    # No name: a name in the address would let any link claim a project was deleted.
    done = ("The project was deleted, with its problems, solutions and labels."
            if request.query_params.get("deleted") == "1" else None)
    return render(
        request,
        "manage/projects.html",
        {
            "rows": rows,
            "can_manage": has_role(user, MANAGE),
            "values": values,
            "errors": errors,
            "messages": [{"kind": "success", "text": done}] if done else [],
        },
        status_code=status_code,
    )


@router.get("/{project_id}")
def project_page(
    request: Request, project_id: PageId, user: DataPageUser, session: SessionDep
) -> Response:
    project = service.get_project(session, project_id)
    return _project_overview(request, session, user, project, {}, {}, status.HTTP_200_OK)


@router.post("/{project_id}/settings")
def update_settings(
    request: Request,
    project_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[SettingsForm, Form()],
    sent: SentFields,
) -> Response:
    project = service.get_project(session, project_id)
    values = sent_values(form, sent)
    seen = _seen(values.pop("seen", ""))
    if "name" in values:
        values["name"] = values["name"].strip()
    try:
        changes = validate_form(ProjectUpdate, values, keep_blank=OPTIONAL_TEXTS,
                                required=SettingsForm.model_fields.keys() - set(OPTIONAL_TEXTS) - {"seen"})
    except FormInvalid as exc:
        return _project_overview(request, session, user, project, values, exc.errors, 422)
    if seen is not None:
        # Only what this manager changed on the page is saved: the rest of a form opened before a
        # colleague's change would put their overlap or QC rate back.
        given = changes.model_dump(exclude_unset=True)
        mine = {field for field, mark in service.settings_fingerprints(given).items() if mark != seen.get(field)}
        stored = service.settings_fingerprints(service.current_settings(project))
        clash = sorted(field for field in mine if stored[field] != seen.get(field))
        if clash:
            now = _settings_of(project)
            errors = {field: f"changed by someone else to “{now[field]}” while you edited: save again to keep yours"
                      if field not in ("description", "guidelines") else
                      "changed by someone else while you edited: save again to keep yours" for field in clash}
            kept = {field: value for field, value in values.items() if field in mine}
            return _project_overview(request, session, user, project, kept, errors, 409, settings_clash=True)
        if not mine:
            return RedirectResponse(f"/manage/projects/{project.id}?saved=1", status_code=303)
        changes = ProjectUpdate.model_validate({field: given[field] for field in mine})
    try:
        service.update_project(session, project, changes, by=user)
    except Conflict as exc:
        # The one setting another project can make wrong: its name.
        return _project_overview(request, session, user, project, values, {"name": exc.message}, 409)
    return RedirectResponse(f"/manage/projects/{project.id}?saved=1", status_code=303)


@router.post("/{project_id}/members")
def add_member(
    request: Request,
    project_id: PageId,
    user: ManagerPageUser,
    session: SessionDep,
    form: Annotated[MemberForm, Form()],
) -> Response:
    project = service.get_project(session, project_id)
    username = form.username.strip()
    if not username:
        return _project_overview(
            request, session, user, project, {}, {}, 422,
            member=username, member_error="type a labeler's username",
        )
    try:
        added = members.add_member(session, project, username, by=user)
    except ServiceError as exc:
        return _project_overview(
            request, session, user, project, {}, {}, exc.status_code,
            member=username, member_error=exc.message,
        )
    return RedirectResponse(f"/manage/projects/{project.id}?member_added={added.user_id}#members", status_code=303)


@router.post("/{project_id}/members/{user_id}/remove")
def remove_member(
    request: Request, project_id: PageId, user_id: PageId, manager: ManagerPageUser, session: SessionDep
) -> Response:
    project = service.get_project(session, project_id)
    try:
        members.remove_member(session, project, user_id, by=manager)
    except NotFound as exc:
        # Removed already, from another tab: the page says so next to the members list.
        return _project_overview(request, session, manager, project, {}, {}, exc.status_code,
                                 members_notice=f"Nothing changed: {exc.message}.")
    return RedirectResponse(f"/manage/projects/{project_id}?member_removed={user_id}#members", status_code=303)


class DeleteForm(BaseModel):
    confirm_name: str = Field(default="", max_length=200)


@router.post("/{project_id}/delete")
def delete_project(
    request: Request,
    project_id: PageId,
    manager: ManagerPageUser,
    session: SessionDep,
    form: Annotated[DeleteForm, Form()],
) -> Response:
    project = service.get_project(session, project_id)
    # The name typed, as GitHub asks for a repository's: a click alone cannot delete a project.
    if form.confirm_name.strip() != project.name.strip():
        return _project_overview(request, session, manager, project, {}, {}, 422,
                                 delete_error=f"type the project's name, “{project.name}”, to delete it")
    try:
        service.delete_project(session, project, by=manager)
    except Conflict as exc:
        return _project_overview(request, session, manager, project, {}, {}, exc.status_code, delete_error=exc.message)
    return RedirectResponse("/manage/projects?deleted=1", status_code=303)


@router.post("/{project_id}/imports/{batch_id}/remove")
def remove_import(
    request: Request,
    project_id: PageId,
    batch_id: PageId,
    manager: ManagerPageUser,
    session: SessionDep,
) -> Response:
    project = service.get_project(session, project_id)
    try:
        removal.remove_import(session, project, batch_id, by=manager)
    except NotFound:
        # Removed already, from another tab or by a second click.
        return _project_overview(request, session, manager, project, {}, {}, 404,
                                 imports_error="That file is no longer in the project: it was removed already.")
    except Conflict as exc:
        return _project_overview(request, session, manager, project, {}, {}, exc.status_code,
                                 imports_error=f"Nothing changed: {exc.message}.")
    # No file name: a name in the address would let any link claim a file was removed.
    return RedirectResponse(f"/manage/projects/{project_id}?import_removed=1#imports", status_code=303)


class PauseForm(BaseModel):
    paused: bool


@router.post("/{project_id}/pause")
def set_paused(
    project_id: PageId,
    manager: ManagerPageUser,
    session: SessionDep,
    form: Annotated[PauseForm, Form()],
) -> Response:
    # Pausing twice (another tab) keeps the first time: the setter leaves a set paused_at alone.
    return _switch(session, project_id, manager, ProjectUpdate(paused=form.paused), "#pause")


@router.post("/{project_id}/access")
def set_access(
    project_id: PageId,
    manager: ManagerPageUser,
    session: SessionDep,
    form: Annotated[AccessForm, Form()],
) -> Response:
    access = "open" if form.open_to_all else "members"
    return _switch(session, project_id, manager, ProjectUpdate(open_to_all=form.open_to_all), f"?access={access}#members")


def _switch(session: SessionDep, project_id: int, manager: User, changes: ProjectUpdate, back_to: str) -> Response:
    """One of the overview's single-setting buttons: no form to show again, so back to the overview."""
    project = service.get_project(session, project_id)
    service.update_project(session, project, changes, by=manager)
    return RedirectResponse(f"/manage/projects/{project.id}{back_to}", status_code=303)


@router.post("/{project_id}/screening/{user_id}")
def decide_about_labeler(
    project_id: PageId,
    user_id: PageId,
    manager: ManagerPageUser,
    session: SessionDep,
    form: Annotated[DecisionForm, Form()],
) -> Response:
    decision = StandingDecision.admitted if form.decision == "admit" else StandingDecision.retired
    gate.decide_about(session, service.get_project(session, project_id), user_id, decision, manager.id)
    return RedirectResponse(f"/manage/projects/{project_id}?decided={user_id}#screening", status_code=303)


def _project_overview(
    request: Request,
    session: SessionDep,
    user: User,
    project: Project,
    values: dict[str, str],
    errors: dict[str, str],
    status_code: int,
    *,
    member: str = "",
    member_error: str | None = None,
    members_notice: str | None = None,
    delete_error: str | None = None,
    imports_error: str | None = None,
    settings_clash: bool = False,
) -> Response:
    progress = service.project_progress(session, project, days=CHART_DAYS)
    accuracy = labeler_accuracy(session, project.id)
    now = utcnow()
    today = now.date()
    activity = project_activity(session, project.id, accuracy, now=now)
    member_list = members.list_members(session, project)
    standings = gate.standings(session, project)
    return render(
        request,
        "manage/project.html",
        {
            "project": project,
            "progress": progress,
            "chart": daily_bars(progress.labels_per_day, today),
            "hourly_chart": hourly_bars(progress.labels_per_hour),
            "chart_height": CHART_HEIGHT,
            "can_manage": has_role(user, MANAGE),
            # A field the post left out shows what is stored, as it stays.
            "values": {**_settings_of(project), **values},
            "seen_settings": orjson.dumps(
                {k: v for k, v in service.settings_fingerprints(service.current_settings(project)).items()
                 if k in SettingsForm.model_fields}).decode(),
            "unmet": unmet_settings(session, project),
            "errors": errors,
            "settings_clash": settings_clash,
            "messages": [{"kind": "success", "text": "Settings saved."}]
            if request.query_params.get("saved") == "1" and not errors
            else [],
            "tab": "overview",
            "batches": list_batches(session, project),
            "batch_contents": removal.batch_contents(session, project.id) if has_role(user, MANAGE) else {},
            "removal_refusals": removal.refusals(session, project.id) if has_role(user, MANAGE) else {},
            "imports_error": imports_error,
            "imports_done": "The file was removed, with the problems, solutions and labels it added."
            if request.query_params.get("import_removed") == "1" and not imports_error else None,
            "accuracy": accuracy,
            "activity": activity,
            "leases": leases_in_hand(session, project.id),
            "sparklines": {a.user_id: daily_bars(a.labels_per_day, today, height=SPARKLINE_HEIGHT, least=SPARKLINE_LEAST)
                           for a in activity.labelers},
            "sparkline_height": SPARKLINE_HEIGHT,
            "agreement": project_agreement(session, project),
            "members": member_list,
            "standings": standings,
            "guidelines_readers": guidelines_reads.readers(session, project),
            "member": member,
            "member_error": member_error,
            "members_notice": members_notice,
            "members_done": None if member_error else _members_done(request, session, project, member_list),
            "screening_done": _screening_done(request, standings),
            "delete_error": delete_error,
        },
        status_code=status_code,
    )


def _members_done(request: Request, session: SessionDep, project: Project, member_list: list[MemberRead]) -> str | None:
    """What the last change to the members card did, while it is still so: an address typed by
    hand, or kept after a later change, says nothing."""
    query = request.query_params
    added = row_id(query.get("member_added", ""))
    if added is not None:
        member = next((m for m in member_list if m.user_id == added), None)
        if member is not None:
            return f"{member.username} is now a member." + (
                " The project is open to every labeler: membership counts once it is restricted."
                if project.open_to_all else "")
    removed = row_id(query.get("member_removed", ""))
    if removed is not None and all(m.user_id != removed for m in member_list):
        removed_user = session.get(User, removed)
        if removed_user is not None:
            return f"{removed_user.username} is no longer a member." + (
                "" if project.open_to_all else " Their tasks in progress went back to the queue.")
    access = query.get("access")
    if access == "open" and project.open_to_all:
        return "Every labeler may label this project now."
    if access == "members" and not project.open_to_all:
        return "Only members may label this project now; other labelers' tasks in progress went back to the queue."
    return None


def _screening_done(request: Request, standings: list[gate.Standing]) -> str | None:
    decided = row_id(request.query_params.get("decided", ""))
    standing = next((s for s in standings if s.user_id == decided), None)
    if standing is None or standing.decision is None:
        return None
    if standing.decision == StandingDecision.admitted:
        return f"{standing.username} is admitted: screening is behind them, and their QC agreement counts afresh from now."
    return f"{standing.username} is retired from this project: it serves them no more tasks."


def _seen(text: str) -> dict[str, str] | None:
    """The fingerprints a settings form carried; None for a post without them (a script's),
    which sets every field it sends."""
    try:
        seen = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None
    return seen if isinstance(seen, dict) and all(isinstance(v, str) for v in seen.values()) else None


def _settings_of(project: Project) -> dict[str, Any]:
    return {
        "name": project.name,
        "description": project.description,
        "guidelines": project.guidelines,
        "labeling_mode": project.labeling_mode.value,
        "overlap": project.overlap,
        "lease_minutes": project.lease_minutes,
        "correction_window_hours": project.correction_window_hours,
        "screening_items": project.screening_items,
        "screening_pass_mark": project.screening_pass_mark,
        "qc_rate": project.qc_rate,
        "qc_feedback": "true" if project.qc_feedback else "false",
        "qc_pause_below": project.qc_pause_below,
    }


def daily_bars(
    per_day: list[DailyCount], today: date, days: int = CHART_DAYS, *, height: float = CHART_HEIGHT,
    least: float = 0,
) -> list[dict[str, Any]]:
    """One bar a day for the last `days` days up to today, days without labels included, the
    busiest `height` tall and none with labels under `least`."""
    counts = {d.day: d.labels for d in per_day}
    first = today - timedelta(days=days - 1)
    days_shown = [(first + timedelta(days=i)) for i in range(days)]
    bars = _scaled([counts.get(day, 0) for day in days_shown], height, least)
    for bar, day in zip(bars, days_shown, strict=True):
        bar.update(day=day, tick=day.strftime("%d"), when=day.isoformat())
    return bars


def hourly_bars(per_hour: list[HourlyCount], *, height: float = CHART_HEIGHT) -> list[dict[str, Any]]:
    """One bar an hour, as daily_bars draws days; a tick every third hour, or 24 crowd the axis."""
    bars = _scaled([h.labels for h in per_hour], height, 0)
    for bar, h in zip(bars, per_hour, strict=True):
        bar.update(tick=h.hour.strftime("%H") if h.hour.hour % 3 == 0 else "",
                   when=f"{h.hour.strftime('%Y-%m-%d %H:00')}–{(h.hour + timedelta(hours=1)).strftime('%H:00')}")
    return bars


def _scaled(counts: list[int], height: float, least: float) -> list[dict[str, Any]]:
    """Each count with its bar's height: the largest `height` tall, none with labels under `least`."""
    peak = max(counts, default=0) or 1
    return [{"labels": n, "height": max(round(height * n / peak, 1), least if n else 0)} for n in counts]
