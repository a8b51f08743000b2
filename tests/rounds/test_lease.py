"""Who runs a round: one lease holder at a time, taken over only once it lapses."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Project, Round, RoundStage, RoundStatus, utcnow
from app.rounds import lease
from app.rounds.service import cancel_round, start_round
from app.rounds.stages import run_round
from tests.conftest import make_project


@pytest.fixture
def round_id(session_factory: sessionmaker[Session]) -> int:
    project = make_project(session_factory, "leases")
    with session_scope(session_factory) as session:
        return start_round(session, session.get(Project, project.id)).id


def claim(factory: sessionmaker[Session], round_id: int, owner: str) -> bool:
    with session_scope(factory) as session:
        return lease.claim(session, round_id, owner, lease_s=60)


def test_one_worker_holds_a_round_until_its_lease_lapses(session_factory, round_id) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        assert lease.runnable_rounds(session) == [round_id]
    assert claim(session_factory, round_id, "a")
    assert not claim(session_factory, round_id, "b")
    with session_scope(session_factory) as session:
        assert lease.runnable_rounds(session) == []
        session.execute(update(Round).values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    with session_scope(session_factory) as session:
        assert lease.runnable_rounds(session) == [round_id]
    assert claim(session_factory, round_id, "b")
    # The old holder can no longer record anything.
    with pytest.raises(lease.LeaseLost), session_scope(session_factory) as session:
        lease.advance(session, round_id, "a", RoundStage.autolabel, RoundStage.snapshot)
    with session_scope(session_factory) as session:
        lease.advance(session, round_id, "b", RoundStage.autolabel, RoundStage.snapshot)
        round_ = session.get(Round, round_id)
        assert (round_.stage, round_.attempts, round_.lease_owner) == (RoundStage.snapshot, 2, "b")


def test_a_cancelled_round_stops_its_worker(session_factory, round_id) -> None:  # type: ignore[no-untyped-def]
    assert claim(session_factory, round_id, "a")
    with session_scope(session_factory) as session:
        cancel_round(session, session.get(Round, round_id))
    with pytest.raises(lease.LeaseLost), session_scope(session_factory) as session:
        lease.report(session, round_id, "a", percent=50.0)
    assert not claim(session_factory, round_id, "b")


def test_errors_are_retried_then_fail_for_good(session_factory, round_id) -> None:  # type: ignore[no-untyped-def]
    for attempt in (1, 2, 3):
        assert claim(session_factory, round_id, f"w{attempt}")
        status = lease.give_up_or_retry(session_factory, round_id, f"w{attempt}", "boom", max_attempts=3)
        assert status == (RoundStatus.failed if attempt == 3 else RoundStatus.queued)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.error == "boom" and "after 3 attempts" in round_.message


def test_a_round_whose_workers_keep_dying_is_failed(session_factory, round_id, worker_settings) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        session.execute(update(Round).values(attempts=worker_settings.round_max_claims))
    assert run_round(session_factory, round_id, "w", worker_settings) == RoundStatus.failed
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.status == RoundStatus.failed and "died 20 times" in round_.message


def test_a_round_whose_training_diverges_fails_at_once_and_says_why(  # type: ignore[no-untyped-def]
    session_factory, worker_settings, monkeypatch
) -> None:
    from active_learning.train import TrainingDiverged
    from app.rounds import stages
    from tests.rounds.conftest import synthetic_project

    def diverge(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise TrainingDiverged("training diverged by step 40 (mean loss nan) with peak learning rate 0.5")

    # The same settings diverge the same way again: a retry would only spend another worker.
    monkeypatch.setattr(stages, "train", diverge)
    project = synthetic_project(session_factory, "diverging")
    with session_scope(session_factory) as session:
        round_id = start_round(session, session.get(Project, project.id)).id
    assert run_round(session_factory, round_id, "w", worker_settings) == RoundStatus.failed
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.status == RoundStatus.failed and round_.attempts == 1
        assert round_.message == "failed: training diverged by step 40 (mean loss nan) with peak learning rate 0.5"
