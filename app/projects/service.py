"""Projects: creation, settings, progress."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from enum import Enum
from typing import Any

import orjson

from sqlalchemy import case, delete, func, select
from sqlalchemy.orm import Session

from app.db import one_named
from app.errors import Conflict, NotFound, Stale
from app.labeling.queue import add_slots, trim_slots
from app.machine_labels.service import is_human
from app.models import (
    Assignment,
    AssignmentStatus,
    ComparisonStatus,
    Label,
    ModelComparison,
    Problem,
    Project,
    Round,
    RoundStatus,
    Solution,
    User,
    utcnow,
)
from app.audit import service as audit
from app.projects.access import release_leases_of_outsiders, visible_projects
from app.projects.schemas import CHART_HOURS, DailyCount, HourlyCount, ProjectCreate, ProjectProgress, ProjectUpdate
from app.rounds.lease import stale_claim


def _check_name_free(session: Session, name: str, project_id: int | None = None) -> None:
    # As usernames: two projects a letter's case apart are one name to the person typing it.
    taken = session.scalar(select(Project.name).where(func.lower(Project.name) == name.lower(),
                                                      Project.id != (project_id or 0)))
    if taken == name:
        raise Conflict(f"a project named {name!r} already exists")
    if taken is not None:
        raise Conflict(f"a project named {taken!r} already exists: names may not differ only in case")


def create_project(session: Session, data: ProjectCreate, *, is_demo: bool = False, by: User | None = None) -> Project:
    """A new project; `by` is the manager creating it, None at the command line (and the demo)."""
    _check_name_free(session, data.name)
    project = Project(**data.model_dump(), is_demo=is_demo,
                      guidelines_updated_at=utcnow() if data.guidelines else None)
    session.add(project)
    session.flush()
    audit.record(session, by, "project.created", audit.project_target(project),
                 labeling_mode=project.labeling_mode.value, overlap=project.overlap)
    return project


def list_projects(session: Session, seen_by: User | None = None) -> list[Project]:
    """Every project, or those `seen_by` may see (see app.projects.access)."""
    statement = select(Project).order_by(Project.name)
    if seen_by is not None:
        statement = statement.where(visible_projects(seen_by))
    return list(session.scalars(statement))


def get_project(session: Session, project_id: int) -> Project:
    project = session.get(Project, project_id)
    if project is None:
        raise NotFound(f"no project with id {project_id}")
    return project


def get_project_by_name(session: Session, name: str) -> Project:
    """The project of that name, in any case (see app.db.named_alike)."""
    return one_named(session, Project.name, name, "project")


def refuse_during_live_work(session: Session, project: Project) -> None:
    """Conflict while a worker is at a round of the project or measuring a comparison of its
    models (a live lease or claim): what it reads could go from under it, and it would write
    into what is gone."""
    now = utcnow()
    running = session.scalar(select(Round.number).where(
        Round.project_id == project.id, Round.status == RoundStatus.running,
        Round.lease_expires_at > now).limit(1))
    if running is not None:
        raise Conflict(f"a worker is running round {running} of {project.name}: cancel it first")
    measuring = session.scalar(select(ModelComparison.id).where(
        ModelComparison.project_id == project.id, ModelComparison.status == ComparisonStatus.running,
        ModelComparison.claimed_at > now - stale_claim()).limit(1))
    if measuring is not None:
        raise Conflict(f"a worker is measuring a comparison of {project.name}'s models: wait for it to end")


def delete_project(session: Session, project: Project, *, by: User | None = None) -> dict[str, int]:
    """Delete the project and everything in it (problems, solutions, labels, reports, rounds,
    model versions' records); what it held, counted before. Refused (Conflict) during live work
    (refuse_during_live_work). A round or comparison still queued goes with the project; a worker
    that picks it up finds nothing to claim. Checkpoint directories stay where the workers wrote
    them."""
    refuse_during_live_work(session, project)
    held = {
        kind: session.scalar(select(func.count()).select_from(model).where(model.project_id == project.id)) or 0
        for kind, model in (("problems", Problem), ("solutions", Solution), ("labels", Label))
    }
    project_id = project.id
    audit.record(session, by, "project.deleted", audit.project_target(project), **held)
    session.expunge(project)
    # The database removes the rest: every table that names a project, problem or solution
    # does so with ON DELETE CASCADE (SQLite's foreign keys are on, app.db).
    session.execute(delete(Project).where(Project.id == project_id))
    return held


def settings_fingerprints(settings: Mapping[str, Any]) -> dict[str, str]:
    """Each setting's value as a short hash. The settings form carries those of what it showed,
    so that a save changes only what its manager changed there; and the API's ETag is made of
    them, so that a PATCH with If-Match refuses to overwrite a change it did not see. An empty
    text and none are the same setting."""
    def plain(value: Any) -> Any:
        value = value.value if isinstance(value, Enum) else value
        return "" if value is None else value

    return {field: hashlib.sha256(orjson.dumps(plain(value))).hexdigest()[:12] for field, value in settings.items()}


def current_settings(project: Project) -> dict[str, Any]:
    """Every setting ProjectUpdate can change, as stored."""
    return {field: getattr(project, field) for field in ProjectUpdate.model_fields}


def settings_etag(project: Project) -> str:
    fingerprints = settings_fingerprints(current_settings(project))
    return '"' + hashlib.sha256(orjson.dumps(fingerprints, option=orjson.OPT_SORT_KEYS)).hexdigest()[:20] + '"'


def check_if_match(project: Project, if_match: str | None) -> None:
    """Stale unless If-Match is absent, `*` or names the settings as they are now."""
    if if_match is None or if_match.strip() == "*":
        return
    now = settings_etag(project)
    if now not in (tag.strip().removeprefix("W/") for tag in if_match.split(",")):
        raise Stale(f"the project's settings changed since you read them (ETag {now} now): "
                    "read the project again and send your change with its ETag")


def update_project(session: Session, project: Project, data: ProjectUpdate, *, by: User | None = None) -> Project:
    """Change the project's settings; `by` is the manager, None at the command line."""
    changes = data.model_dump(exclude_none=True)
    if changes.get("name", project.name) != project.name:
        if project.is_demo:
            # `stepwise demo` finds its project by name: renamed, a second demo would be made.
            raise Conflict("the demo project keeps its name (stepwise demo finds it by its name)")
        _check_name_free(session, changes["name"], project.id)
    old_overlap = project.overlap
    # Each setting that changes, from what to what; the texts, too long for that, as changed.
    changed = {field: "changed" if field in ("description", "guidelines") else [getattr(project, field), value]
               for field, value in changes.items() if getattr(project, field) != value}
    if changed:
        audit.record(session, by, "project.settings_changed", audit.project_target(project), **changed)
    if "guidelines" in changes and changes["guidelines"] != project.guidelines:
        project.guidelines_updated_at = utcnow()
    for field, value in changes.items():
        setattr(project, field, value)
    session.flush()
    if project.overlap > old_overlap:
        # A retired problem's solutions get theirs when it returns to labeling (restore_problem).
        solutions = session.execute(
            select(Solution.id, Solution.priority, Solution.generation)
            .join(Problem, Problem.id == Solution.problem_id)
            .where(Solution.project_id == project.id, Problem.retired_at.is_(None))
        ).all()
        add_slots(session, project, [(s.id, s.priority, s.generation) for s in solutions])
    elif project.overlap < old_overlap:
        trim_slots(session, project)
    if changes.get("open_to_all") is False:
        release_leases_of_outsiders(session, project)
    return project


def project_progress(session: Session, project: Project, days: int = 14) -> ProjectProgress:
    now = datetime.now(UTC)
    done = func.sum(case((Assignment.status == AssignmentStatus.done, 1), else_=0))
    leased = func.sum(
        case(
            (
                (Assignment.status == AssignmentStatus.leased) & (Assignment.expires_at > now),
                1,
            ),
            else_=0,
        )
    )
    # A retired problem's solutions are served to nobody: counted apart, neither done (its
    # waiting slots went, and a solution without slots would read as having all its labels) nor
    # waiting; a lease in hand on one is no labeling the queue asks for either.
    retired = (
        select(Solution.id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(Problem.project_id == project.id, Problem.retired_at.is_not(None))
    )
    per_solution = (
        select(
            Assignment.solution_id,
            func.count().label("slots"),
            done.label("done"),
            leased.label("leased"),
        )
        # Check slots (see app.quality.gate) are labelers' own, not the solution's progress.
        .where(Assignment.project_id == project.id, Assignment.slot >= 0, Assignment.solution_id.not_in(retired))
        .group_by(Assignment.solution_id)
        .subquery()
    )
    labeled = (
        select(Label.solution_id)
        .where(Label.project_id == project.id, Label.superseded_at.is_(None), is_human())
        .scalar_subquery()
    )
    row = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((per_solution.c.done == per_solution.c.slots, 1), else_=0)), 0),
            func.coalesce(
                func.sum(
                    case(
                        (
                            (per_solution.c.done < per_solution.c.slots)
                            & (((per_solution.c.done + per_solution.c.leased) > 0)
                               # Labels imported with it count too: raising the overlap after an
                               # import left such solutions "waiting" beside their labels.
                               | per_solution.c.solution_id.in_(labeled)),
                            1,
                        ),
                        else_=0,
                    )
                ),
                0,
            ),
            func.coalesce(func.sum(per_solution.c.slots - per_solution.c.done), 0),
        ).select_from(per_solution)
    ).one()
    queued, done_count, in_progress, to_go = int(row[0]), int(row[1]), int(row[2]), int(row[3])
    solutions = session.scalar(
        select(func.count()).select_from(Solution).where(Solution.project_id == project.id)
    ) or 0
    solutions_retired = session.scalar(select(func.count()).select_from(retired.subquery())) or 0
    # A solution without slots already has all the labels it needs (imported with labels).
    done_count += solutions - solutions_retired - queued
    # Whole UTC days, today's included: a dashboard plots each of them, zeros too.
    first_day = now.date() - timedelta(days=days - 1)
    since = datetime.combine(first_day, time.min, tzinfo=UTC)
    day = func.date(Label.created_at)
    per_day = session.execute(
        select(day, func.count())
        .where(
            Label.project_id == project.id,
            Label.superseded_at.is_(None),
            is_human(),
            # An imported label may carry a time to come; it is not one of the last days'.
            Label.created_at.between(since, now),
        )
        .group_by(day)
        .order_by(day)
    ).all()
    return ProjectProgress(
        problems=session.scalar(
            select(func.count()).select_from(Problem).where(Problem.project_id == project.id)
        )
        or 0,
        solutions=solutions,
        solutions_done=done_count,
        solutions_in_progress=in_progress,
        solutions_waiting=solutions - solutions_retired - done_count - in_progress,
        solutions_retired=solutions_retired,
        labels_to_go=to_go,
        labels=session.scalar(
            select(func.count())
            .select_from(Label)
            .where(Label.project_id == project.id, Label.superseded_at.is_(None), is_human())
        )
        or 0,
        labels_per_day=_every_day(first_day, days, {_as_date(d): n for d, n in per_day}),
        labels_per_hour=_labels_per_hour(session, project.id, now),
    )


def _every_day(first: date, days: int, counts: dict[date, int]) -> list[DailyCount]:
    return [DailyCount(day=day, labels=counts.get(day, 0)) for day in (first + timedelta(days=i) for i in range(days))]


def _labels_per_hour(session: Session, project_id: int, now: datetime) -> list[HourlyCount]:
    """Each of the last CHART_HOURS hours, the one under way last. One count per hour in one
    statement: the same on both databases, where grouping by the hour is written differently
    and reads the session's time zone on PostgreSQL."""
    first = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=CHART_HOURS - 1)
    hours = [first + timedelta(hours=i) for i in range(CHART_HOURS)]
    counts = session.execute(
        select(*(func.count(case(((Label.created_at >= start) & (Label.created_at < start + timedelta(hours=1)), 1)))
                 for start in hours))
        .where(
            Label.project_id == project_id,
            Label.superseded_at.is_(None),
            is_human(),
            Label.created_at.between(first, now),
        )
    ).one()
    return [HourlyCount(hour=start, labels=n) for start, n in zip(hours, counts, strict=True)]


def _as_date(value: date | str) -> date:
    # SQLite's date() returns text, PostgreSQL's a date.
    return value if isinstance(value, date) else date.fromisoformat(value)
