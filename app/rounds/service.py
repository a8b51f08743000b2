"""Rounds as researchers see them: asking for one, following it, its settings, its results."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from active_learning.bases import BaseUnusable, check_base_name
from active_learning.tracking import read_training_log
from app.audit import service as audit
from app.errors import BadInput, Conflict, NotFound
from app.models import (
    ACTIVE_ROUND_STATUSES,
    ModelVersion,
    Problem,
    Project,
    Round,
    RoundPick,
    RoundSettings,
    RoundStatus,
    RoundTrigger,
    SelectorMode,
    Solution,
    SolutionScore,
    User,
    utcnow,
)
from app.rounds.schemas import NULLABLE_SETTINGS, PickRead, RoundSettingsUpdate


def start_round(
    session: Session,
    project: Project,
    *,
    trigger: RoundTrigger = RoundTrigger.manual,
    user: User | None = None,
) -> Round:
    """Queue a round for the project; a worker picks it up. One active round per project."""
    active = active_round(session, project.id)
    if active is not None:
        raise Conflict(
            f"round {active.number} of project {project.name!r} is still {active.status.value}; "
            "wait for it to end or cancel it"
        )
    number = (
        session.scalar(select(func.max(Round.number)).where(Round.project_id == project.id)) or 0
    ) + 1
    now = utcnow()
    round_ = Round(
        project_id=project.id,
        number=number,
        trigger=trigger,
        requested_by=user.id if user else None,
        message="waiting for a worker",
        created_at=now,
        updated_at=now,
    )
    try:
        # The partial unique index settles a race between two triggers of the same project.
        with session.begin_nested():
            session.add(round_)
            session.flush()
    except IntegrityError:
        raise Conflict(f"project {project.name!r} already has a round queued or running") from None
    round_settings(session, project.id)
    # A trigger's round is started by the worker's sweep: recorded as its command line's.
    audit.record(session, user, "round.started", audit.project_target(project), round=number, round_id=round_.id,
                 trigger=trigger.value)
    return round_


def active_round(session: Session, project_id: int) -> Round | None:
    return session.scalar(
        select(Round).where(
            Round.project_id == project_id, Round.status.in_(ACTIVE_ROUND_STATUSES)
        )
    )


def list_rounds(session: Session, project_id: int, limit: int = 200, *, offset: int = 0) -> list[Round]:
    """The newest first, `limit` of them after the `offset` newest."""
    return list(
        session.scalars(
            select(Round)
            .where(Round.project_id == project_id)
            .order_by(Round.number.desc())
            .offset(offset)
            .limit(limit)
        )
    )


def get_round(session: Session, round_id: int) -> Round:
    round_ = session.get(Round, round_id)
    if round_ is None:
        raise NotFound(f"no round with id {round_id}")
    return round_


def cancel_round(round_: Round, *, by: User | None = None) -> Round:
    """Stop a queued or running round; its worker notices at its next lease beat (a third of
    the lease; training stops at the step after it) or stage boundary, and nothing it has not
    finished is served or enqueued. `by` is the researcher, None at the command line."""
    if round_.status not in ACTIVE_ROUND_STATUSES:
        raise Conflict(f"round {round_.number} is {round_.status.value}, not queued or running")
    session = Session.object_session(round_)
    assert session is not None, "a round loaded from the database"
    audit.record(session, by, "round.cancelled", audit.project_target(session.get_one(Project, round_.project_id)),
                 round=round_.number, round_id=round_.id, status=round_.status.value)
    now = utcnow()
    round_.status = RoundStatus.cancelled
    round_.message = "cancelled"
    round_.eta_at = None
    round_.finished_at = now
    round_.updated_at = now
    round_.lease_owner = None
    round_.lease_expires_at = None
    round_.retry_at = None
    return round_


def round_settings(session: Session, project_id: int) -> RoundSettings:
    """The project's settings row, made with the defaults on first use."""
    settings = session.get(RoundSettings, project_id)
    if settings is None:
        settings = RoundSettings(project_id=project_id)
        try:
            with session.begin_nested():
                session.add(settings)
                session.flush()
        except IntegrityError:
            settings = session.get(RoundSettings, project_id, populate_existing=True)
            assert settings is not None
    return settings


def update_round_settings(
    session: Session, project_id: int, data: RoundSettingsUpdate, *, by: User | None = None
) -> RoundSettings:
    """Change the project's round settings; `by` is the researcher, None at the command line."""
    settings = round_settings(session, project_id)
    changes = data.model_dump(exclude_unset=True)
    for field, value in changes.items():
        if value is None and field not in NULLABLE_SETTINGS:
            raise BadInput(f"{field} cannot be null", details=[{"field": field, "message": "cannot be null"}])
    merged = {**{k: getattr(settings, k) for k in ("control_share", "qc_share")}, **changes}
    if merged["control_share"] + merged["qc_share"] > 1:
        raise BadInput("control_share + qc_share must not exceed 1")
    if "base_model" in changes:
        _check_base(session, changes["base_model"])
    version_id = changes.get("selector_version_id")
    if version_id is not None:
        version = session.get(ModelVersion, version_id)
        why = None
        if version is None or version.project_id != project_id:
            why = f"version {version_id} is not a model version of this project"
        elif version_id != settings.selector_version_id and never_judged(session, version):
            why = (f"version {version_id} was trained by a round that then failed or was cancelled, before it "
                   "was evaluated; choose a version a round judged")
        if why:
            raise BadInput(f"selector_version_id: {why}", details=[{"field": "selector_version_id", "message": why}])
    # updated_at says when a setting last changed: a PATCH that changes nothing leaves it.
    changed = {field: value for field, value in changes.items() if getattr(settings, field) != value}
    if changed:
        audit.record(session, by, "round.settings_changed", audit.project_target(session.get_one(Project, project_id)),
                     **{field: [getattr(settings, field), value] for field, value in changed.items()})
        settings.updated_at = utcnow()
    for field, value in changed.items():
        setattr(settings, field, value)
    session.flush()
    return settings


def _check_base(session: Session, base: str) -> None:
    # SQLite's file is on this machine, and so are its workers; a PostgreSQL deployment's
    # workers may mount model directories this API process does not have.
    try:
        check_base_name(base, directories_here=session.get_bind().dialect.name == "sqlite")
    except BaseUnusable as exc:
        raise BadInput(f"base_model: {exc}", details=[{"field": "base_model", "message": str(exc)}]) from None


def never_judged(session: Session, version: ModelVersion) -> bool:
    """Whether the round that trained `version` ended, failed or cancelled, before deciding on
    it: its metrics are then the training run's own, never the round's evaluation."""
    if version.passed is not None or version.round_id is None:
        return False
    status = session.scalar(select(Round.status).where(Round.id == version.round_id))
    return status in (RoundStatus.failed, RoundStatus.cancelled)


def list_model_versions(session: Session, project_id: int) -> list[ModelVersion]:
    return list(
        session.scalars(
            select(ModelVersion)
            .where(ModelVersion.project_id == project_id)
            .order_by(ModelVersion.id.desc())
        )
    )


def selector_version(session: Session, settings: RoundSettings) -> ModelVersion | None:
    """The model that scores the pool: the pinned one in fixed mode (the served one until a
    round pins it), the served one in retrain and uniform modes (uniform rounds score the pool
    for routing and the picks inspector, and do not rank by it)."""
    if settings.selector_mode == SelectorMode.fixed and settings.selector_version_id is not None:
        pinned = session.get(ModelVersion, settings.selector_version_id)
        if pinned is not None:
            return pinned
    return served_version(session, settings.project_id)


def round_training_log(session: Session, round_id: int) -> dict[str, Any] | None:
    """The training log kept in the checkpoint of the round's model, if it has one."""
    path = session.scalar(select(ModelVersion.path).where(ModelVersion.round_id == round_id))
    return read_training_log(path) if path else None


def served_version(session: Session, project_id: int) -> ModelVersion | None:
    return session.scalar(
        select(ModelVersion).where(
            ModelVersion.project_id == project_id, ModelVersion.is_served.is_(True)
        )
    )


def list_picks(
    session: Session, round_: Round, *, reason: str | None = None, offset: int = 0, limit: int = 100
) -> list[PickRead]:
    """The round's picks in queue order, with what the picking model thought of each step."""
    query = (
        select(RoundPick, Solution, Problem, SolutionScore.step_scores)
        .join(Solution, Solution.id == RoundPick.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .outerjoin(
            SolutionScore,
            (SolutionScore.solution_id == RoundPick.solution_id)
            & (SolutionScore.model_version_id == RoundPick.model_version_id),
        )
        .where(RoundPick.round_id == round_.id)
        .order_by(RoundPick.rank)
        .offset(offset)
        .limit(limit)
    )
    if reason is not None:
        query = query.where(RoundPick.reason == reason)
    return [
        PickRead(
            rank=pick.rank,
            solution_id=solution.id,
            problem_id=problem.id,
            reason=pick.reason,
            score=pick.score,
            answer_grade=pick.answer_grade,
            priority=pick.priority,
            model_version_id=pick.model_version_id,
            problem_statement=problem.statement,
            ground_truth_answer=problem.answer,
            final_answer=solution.final_answer,
            steps=solution.steps,
            step_scores=step_scores,
            detail=pick.detail,
        )
        for pick, solution, problem, step_scores in session.execute(query)
    ]


def count_picks(session: Session, round_id: int) -> dict[str, int]:
    return {
        reason.value: count
        for reason, count in session.execute(
            select(RoundPick.reason, func.count())
            .where(RoundPick.round_id == round_id)
            .group_by(RoundPick.reason)
        )
    }
