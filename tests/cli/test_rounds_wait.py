"""`stepwise rounds start --wait` tells a script whether the round it ran is done."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from app.config import Settings
from app.db import session_scope
from app.models import Project
from app.rounds import lease
from app.rounds.config import get_worker_settings
from app.rounds.service import start_round
from app.rounds.worker import run_here
from tests.conftest import make_project


@pytest.mark.parametrize(("outcome", "code"), [(("round 1: done: 12 picks first in the queue (12 new queue slots)", True), 0),
                                               (("round 1: failed: no base", False), 1)])
def test_the_exit_status_says_whether_the_round_is_done(stepwise, database_url, session_factory, monkeypatch,
                                                        outcome, code) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "waited")
    monkeypatch.setattr("app.rounds.worker.run_here", lambda settings, round_id, waiting: outcome)
    result = stepwise(database_url, "rounds", "start", "--project", "waited", "--wait")
    assert result.exit_code == code, result.output
    assert outcome[0] in result.output
    if code:
        assert "Traceback" not in result.output


def test_a_round_another_worker_claimed_first_is_waited_for(database_url, session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A server's own worker, polling SQLite, may claim the round before `--wait` does.
    monkeypatch.setenv("STEPWISE_WORKER_POLL_S", "1")
    get_worker_settings.cache_clear()
    project = make_project(session_factory, "raced")
    with session_scope(session_factory) as session:
        round_id = start_round(session, session.get(Project, project.id)).id
        assert lease.claim(session, round_id, "server-worker", 600)

    said: list[str] = []

    def other_worker_finishes() -> None:
        # Once the waiting is said (run_here's first import of torch takes seconds).
        deadline = time.monotonic() + 120
        while not said and time.monotonic() < deadline:
            time.sleep(0.1)
        with session_scope(session_factory) as session:
            lease.fail(session, round_id, "server-worker", "failed: no base")

    finisher = threading.Thread(target=other_worker_finishes)
    finisher.start()
    try:
        outcome = run_here(Settings(database_url=database_url), round_id, waiting=said.append)
    finally:
        finisher.join()
        get_worker_settings.cache_clear()
    assert said == ["round 1: server-worker runs it; waiting for it to end"]
    assert outcome == ("round 1: failed: no base", False)


def test_an_error_is_said_and_the_round_tried_again_here_once_due(database_url, session_factory,  # type: ignore[no-untyped-def]
                                                                  monkeypatch) -> None:
    from app.models import RoundStage, utcnow
    from app.rounds import stages

    monkeypatch.setenv("STEPWISE_WORKER_POLL_S", "1")
    monkeypatch.setenv("STEPWISE_ROUND_RETRY_AFTER_S", "2")
    monkeypatch.setenv("STEPWISE_ROUND_MAX_ATTEMPTS", "2")
    get_worker_settings.cache_clear()
    tries = []

    def unreachable(run) -> None:  # type: ignore[no-untyped-def]
        tries.append(utcnow())
        raise OSError("the Hub cannot be reached")

    monkeypatch.setitem(stages.STAGES, RoundStage.autolabel, unreachable)
    project = make_project(session_factory, "flaky")
    with session_scope(session_factory) as session:
        round_id = start_round(session, session.get(Project, project.id)).id
    said: list[str] = []
    try:
        outcome = run_here(Settings(database_url=database_url), round_id, waiting=said.append)
    finally:
        get_worker_settings.cache_clear()
    assert len(said) == 1 and said[0].startswith("round 1: error at autolabel; will retry at ")
    assert said[0].endswith("UTC: OSError: the Hub cannot be reached")
    # Tried again only once the retry was due, not at once.
    assert len(tries) == 2 and tries[1] - tries[0] >= timedelta(seconds=2)
    assert outcome == ("round 1: failed at autolabel after 2 failed attempts: OSError: the Hub cannot be reached", False)


def test_the_hub_out_of_reach_is_logged_as_its_message_and_anything_else_with_its_traceback(database_url, session_factory,  # type: ignore[no-untyped-def]
                                                                              monkeypatch, caplog) -> None:
    from active_learning.bases import BaseOutOfReach
    from app.models import RoundStage
    from app.rounds import stages

    monkeypatch.setenv("STEPWISE_ROUND_MAX_ATTEMPTS", "1")
    get_worker_settings.cache_clear()
    project = make_project(session_factory, "refused")
    logged = []
    for error in (BaseOutOfReach("the Hugging Face Hub cannot be reached and org/model is not cached"),
                  ValueError("a bug, say")):
        def fail(run, error=error) -> None:  # type: ignore[no-untyped-def]
            raise error

        monkeypatch.setitem(stages.STAGES, RoundStage.autolabel, fail)
        with session_scope(session_factory) as session:
            round_id = start_round(session, session.get(Project, project.id)).id
        caplog.clear()
        try:
            run_here(Settings(database_url=database_url), round_id, waiting=lambda line: None)
        finally:
            get_worker_settings.cache_clear()
        [record] = [r for r in caplog.records if r.getMessage().startswith(f"round id {round_id} failed")]
        logged.append((record.getMessage(), record.exc_info is not None))
    assert logged[0] == (f"round id {round_id - 1} failed: the Hugging Face Hub cannot be reached and org/model is not cached", False)
    assert logged[1] == (f"round id {round_id} failed", True)


# SQLite has no job queue: its local worker polls the rounds table.
@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize(("wait", "jobs"), [(True, 0), (False, 1)])
def test_a_round_run_here_leaves_no_job_for_a_worker(stepwise, database_url, session_factory, monkeypatch,  # type: ignore[no-untyped-def]
                                                     backend, wait, jobs) -> None:
    from sqlalchemy import text

    make_project(session_factory, "here")
    monkeypatch.setattr("app.rounds.worker.run_here", lambda settings, round_id, waiting: ("round 1: done", True))
    with session_scope(session_factory) as session:
        session.execute(text("DELETE FROM procrastinate.procrastinate_jobs"))
    result = stepwise(database_url, "rounds", "start", "--project", "here", *(["--wait"] if wait else []))
    assert result.exit_code == 0, result.output
    with session_scope(session_factory) as session:
        queued = session.execute(text("SELECT count(*) FROM procrastinate.procrastinate_jobs")).scalar_one()
        session.execute(text("DELETE FROM procrastinate.procrastinate_jobs"))
    assert queued == jobs
