"""Rounds that start by themselves: every N new labels, or on a schedule; never two at once."""

from __future__ import annotations

import io
from datetime import timedelta

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.imports.service import import_file
from app.models import Project, Round, RoundStatus, RoundTrigger, utcnow
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import update_round_settings
from app.rounds.triggers import start_due_rounds
from tests.conftest import make_project


def add_labels(factory: sessionmaker[Session], project_id: int, count: int, seed: int) -> None:
    records = [to_prm800k(c) for c in iter_candidates(count, 1, seed)]
    with session_scope(factory) as session:
        import_file(session, session.get(Project, project_id),
                    io.BytesIO(b"".join(orjson.dumps(r) + b"\n" for r in records)),
                    filename=f"labels-{seed}.jsonl", fmt="prm800k", separator=None, user=None)


def started(factory: sessionmaker[Session], now=None) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return [(r.number, r.trigger.value) for r in start_due_rounds(session, now)]


def finish_all(factory: sessionmaker[Session], labels: int) -> None:
    with session_scope(factory) as session:
        for round_ in session.scalars(select(Round).where(Round.status == RoundStatus.queued)):
            round_.status = RoundStatus.done
            round_.snapshot_labels = labels


def test_every_n_new_labels(session_factory: sessionmaker[Session]) -> None:
    project = make_project(session_factory, "auto")
    with session_scope(session_factory) as session:
        update_round_settings(session, project.id, RoundSettingsUpdate(every_new_labels=5))
    add_labels(session_factory, project.id, 4, seed=1)
    assert started(session_factory) == []
    add_labels(session_factory, project.id, 2, seed=2)
    assert started(session_factory) == [(1, RoundTrigger.labels.value)]
    # One round at a time: the queued one blocks the next trigger.
    add_labels(session_factory, project.id, 9, seed=3)
    assert started(session_factory) == []
    finish_all(session_factory, labels=6)
    assert started(session_factory) == [(2, RoundTrigger.labels.value)]
    finish_all(session_factory, labels=15)
    assert started(session_factory) == []


def test_on_a_schedule(session_factory: sessionmaker[Session]) -> None:
    project = make_project(session_factory, "nightly")
    other = make_project(session_factory, "by-hand")
    with session_scope(session_factory) as session:
        update_round_settings(session, project.id, RoundSettingsUpdate(schedule_hours=24))
        update_round_settings(session, other.id, RoundSettingsUpdate(picks_per_round=10))
    now = utcnow()
    assert started(session_factory, now) == [(1, RoundTrigger.schedule.value)]
    finish_all(session_factory, labels=0)
    assert started(session_factory, now + timedelta(hours=23)) == []
    assert started(session_factory, now + timedelta(hours=25)) == [(2, RoundTrigger.schedule.value)]
    with session_scope(session_factory) as session:
        assert session.scalars(select(Round.project_id).distinct()).all() == [project.id]
