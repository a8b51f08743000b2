"""Rounds that start by themselves: every N new labels, or every so many hours."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.errors import Conflict
from app.machine_labels.service import is_human
from app.models import Label, Project, Round, RoundSettings, RoundTrigger, utcnow
from app.rounds.service import active_round, start_round


def due_trigger(
    session: Session, settings: RoundSettings, now: datetime
) -> RoundTrigger | None:
    """Why the project's next round is due now, or None."""
    project_id = settings.project_id
    if settings.every_new_labels:
        labels = session.scalar(
            select(func.count())
            .select_from(Label)
            .where(Label.project_id == project_id, Label.superseded_at.is_(None), is_human())
        ) or 0
        trained_on = session.scalar(
            select(func.max(Round.snapshot_labels)).where(Round.project_id == project_id)
        ) or 0
        if labels - trained_on >= settings.every_new_labels:
            return RoundTrigger.labels
    if settings.schedule_hours:
        last = session.scalar(
            select(func.max(Round.created_at)).where(Round.project_id == project_id)
        )
        if last is None or last + timedelta(hours=settings.schedule_hours) <= now:
            return RoundTrigger.schedule
    return None


def start_due_rounds(session: Session, now: datetime | None = None) -> list[Round]:
    """Start a round for every project whose trigger is due and that has none active."""
    now = now or utcnow()
    started = []
    automatic = session.scalars(
        select(RoundSettings).where(
            or_(RoundSettings.every_new_labels.is_not(None), RoundSettings.schedule_hours.is_not(None))
        )
    )
    for settings in list(automatic):
        if active_round(session, settings.project_id) is not None:
            continue
        trigger = due_trigger(session, settings, now)
        project = session.get(Project, settings.project_id)
        if trigger is None or project is None:
            continue
        try:
            started.append(start_round(session, project, trigger=trigger))
        except Conflict:
            # Another worker's sweep started it a moment ago.
            continue
    return started
