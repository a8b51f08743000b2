"""Who runs a round: one lease holder at a time, taken over only once it lapses."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from active_learning.model import META_FILE
from app.db import session_scope
from app.models import ModelVersion, Project, Round, RoundStage, RoundStatus, utcnow
from app.rounds import lease
from app.rounds.run import RoundRun
from app.rounds.service import cancel_round, start_round
from app.rounds.stages import run_round
from tests.conftest import api_headers, make_project


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
        lease.report(session, round_id, "a", percent=30.0, eta_at=utcnow() + timedelta(minutes=5))
    with session_scope(session_factory) as session:
        cancel_round(session.get(Round, round_id))
    with session_scope(session_factory) as session:
        # No longer due to finish at all.
        assert session.get(Round, round_id).eta_at is None
    with pytest.raises(lease.LeaseLost), session_scope(session_factory) as session:
        lease.report(session, round_id, "a", percent=50.0)
    assert not claim(session_factory, round_id, "b")


def test_errors_are_retried_later_then_fail_for_good(session_factory, round_id) -> None:  # type: ignore[no-untyped-def]
    for attempt in (1, 2, 3):
        assert claim(session_factory, round_id, f"w{attempt}")
        before = utcnow()
        status = lease.give_up_or_retry(session_factory, round_id, f"w{attempt}", "boom", max_attempts=3,
                                        retry_after_s=60)
        assert status == (RoundStatus.failed if attempt == 3 else RoundStatus.queued)
        if status == RoundStatus.failed:
            break
        with session_scope(session_factory) as session:
            round_ = session.get(Round, round_id)
            # A minute after the first failure, two after the second: not claimed before.
            wait = round_.retry_at - before
            assert timedelta(seconds=60 * attempt) <= wait < timedelta(seconds=60 * attempt + 30)
            assert round_.message == f"error at autolabel; will retry at {round_.retry_at:%H:%M:%S} UTC: boom"
            assert lease.runnable_rounds(session) == []
        assert not claim(session_factory, round_id, "eager")
        with session_scope(session_factory) as session:
            session.execute(update(Round).values(retry_at=utcnow() - timedelta(seconds=1)))
            assert lease.runnable_rounds(session) == [round_id]
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.error == "boom" and "after 3 failed attempts" in round_.message


def test_a_worker_killed_mid_round_fails_no_attempt(session_factory, round_id) -> None:  # type: ignore[no-untyped-def]
    # Two deploys while a round runs, then one error: the round is retried, not failed for good.
    for owner in ("killed-1", "killed-2"):
        assert claim(session_factory, round_id, owner)
        with session_scope(session_factory) as session:
            session.execute(update(Round).values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    assert claim(session_factory, round_id, "w")
    status = lease.give_up_or_retry(session_factory, round_id, "w", "boom", max_attempts=3, retry_after_s=60)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert (status, round_.attempts, round_.failures) == (RoundStatus.queued, 3, 1)
        # The first failure's wait: a minute, not four.
        assert round_.retry_at - utcnow() < timedelta(seconds=90)


def test_a_failed_round_says_why_in_its_message(session_factory, worker_settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from app.rounds import stages
    from tests.rounds.conftest import synthetic_project

    def unreadable_base(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise ValueError("cannot load the tokenizer of no-such-org/no-such-model: OSError: offline\n" + "x" * 600)

    monkeypatch.setattr(stages, "train", unreadable_base)
    project = synthetic_project(session_factory, "unreadable")
    with session_scope(session_factory) as session:
        round_id = start_round(session, session.get(Project, project.id)).id
    settings = worker_settings.model_copy(update={"round_max_attempts": 2})
    messages = []
    for _ in range(2):
        status = run_round(session_factory, round_id, "w", settings)
        with session_scope(session_factory) as session:
            messages.append(session.get(Round, round_id).message)
    assert status == RoundStatus.failed
    cause = "ValueError: cannot load the tokenizer of no-such-org/no-such-model: OSError: offline xxx"
    assert re.match(rf"error at train; will retry at \d\d:\d\d:\d\d UTC: {re.escape(cause)}", messages[0])
    assert messages[1].startswith(f"failed at train after 2 failed attempts: {cause}")
    # Clipped to fit the column, whole in the round's error, which holds no traceback: no
    # server path reaches the pages or the API.
    assert len(messages[1]) == 500 and messages[1].endswith("…")
    with session_scope(session_factory) as session:
        error = session.get(Round, round_id).error
    assert error.startswith(cause) and "Traceback" not in error and 'File "' not in error


def test_a_round_whose_workers_keep_dying_is_failed(session_factory, round_id, worker_settings) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        session.execute(update(Round).values(attempts=worker_settings.round_max_claims))
    assert run_round(session_factory, round_id, "w", worker_settings) == RoundStatus.failed
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.status == RoundStatus.failed and "died 20 times" in round_.message
        # Killed, not failed on an error: none counted, none made up.
        assert (round_.error, round_.failures) == (None, 0)


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
        assert (round_.error, round_.failures) == (round_.message.removeprefix("failed: "), 1)


def test_a_round_failed_for_good_shows_its_reason_once_and_its_api_counts_it(  # type: ignore[no-untyped-def]
    client, session_factory, round_id
) -> None:
    from tests.conftest import browser_login, make_user

    why = "the base model cannot be used: HF_HUB_OFFLINE is set and org/model is not in this machine's cache"
    assert claim(session_factory, round_id, "w")
    with session_scope(session_factory) as session:
        lease.fail(session, round_id, "w", f"failed: {why}", error=why)
        project_id = session.get(Round, round_id).project_id
    make_user(session_factory, "rita", "researcher")
    answer = client.get(f"/api/v1/rounds/{round_id}", headers=api_headers(client, "rita")).json()
    assert (answer["status"], answer["error"], answer["failures"], answer["attempts"]) == ("failed", why, 1, 1)
    browser_login(client, "rita")
    # The message quotes the error whole: each page says it once, with no "error" box repeating it.
    for page in (f"/research/rounds/{round_id}", f"/research/projects/{project_id}"):
        text = client.get(page).text
        assert text.count("HF_HUB_OFFLINE is set and org/model") == 1, page


def test_a_rounds_eta_follows_its_stages_pace_and_its_own_attempts(worker_settings) -> None:  # type: ignore[no-untyped-def]
    # The first attempt ran for an hour and died at 50%; this one took it to 75% in a minute.
    run = RoundRun(None, 1, "b", worker_settings, 1, 1, None,  # type: ignore[arg-type]
                   resumed_percent=50.0, resumed_at=utcnow() - timedelta(minutes=1))
    # Scoring (73% to 93%) has just begun: no estimate until it moves.
    assert run.eta(73.0) is None
    # Half of it in 40 seconds: 40 more, then the last 7% at this attempt's pace (33% a minute).
    run.stage_seen = (RoundStage.score, utcnow() - timedelta(seconds=40), 73.0)
    left = (run.eta(83.0) - utcnow()).total_seconds()
    assert 40 + 7 * 60 / 33 - 2 < left < 40 + 7 * 60 / 33 + 2
    # Nothing before training, nor at its start, nor once the round is done.
    fresh = RoundRun(None, 2, "b", worker_settings, 1, 1, None)  # type: ignore[arg-type]
    assert fresh.eta(2.0) is None and fresh.eta(3.0) is None and fresh.eta(100.0) is None
    assert run.eta(50.0) is None


def _started_round(session_factory, name: str) -> int:  # type: ignore[no-untyped-def]
    from tests.rounds.conftest import synthetic_project

    project = synthetic_project(session_factory, name)
    with session_scope(session_factory) as session:
        return start_round(session, session.get(Project, project.id)).id


def test_cancelling_a_round_stops_its_training_within_a_lease_beat(  # type: ignore[no-untyped-def]
    session_factory, worker_settings, monkeypatch
) -> None:
    from active_learning.train import TrainingStopped
    from app.rounds import stages

    round_id = _started_round(session_factory, "cancelled-in-training")
    steps = []

    def long_training(config, train_records, heldout_records=None, stop=None):  # type: ignore[no-untyped-def]
        # Cancelled by a researcher once it is under way, as from the page or the API.
        with session_scope(session_factory) as session:
            cancel_round(session.get(Round, round_id))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if stop is not None and stop():
                raise TrainingStopped(f"training stopped at step {len(steps)} of many")
            steps.append(1)
            time.sleep(0.05)
        raise AssertionError("training ran on after its round was cancelled")

    monkeypatch.setattr(stages, "train", long_training)
    settings = worker_settings.model_copy(update={"round_lease_s": 1.5})
    started = time.monotonic()
    assert run_round(session_factory, round_id, "w", settings) is None
    assert time.monotonic() - started < 20
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.status == RoundStatus.cancelled and round_.stage == RoundStage.train
        assert session.scalar(select(func.count()).select_from(ModelVersion)) == 0


def test_a_round_cancelled_as_its_training_ends_leaves_no_checkpoint(  # type: ignore[no-untyped-def]
    session_factory, worker_settings, monkeypatch
) -> None:
    from app.rounds import stages

    round_id = _started_round(session_factory, "cancelled-at-the-end")
    written = []

    def training_that_ends_first(config, train_records, heldout_records=None, stop=None):  # type: ignore[no-untyped-def]
        # Cancelled between lease beats: the trainer finishes before it hears of it.
        with session_scope(session_factory) as session:
            cancel_round(session.get(Round, round_id))
        output = Path(config.output)
        for folder in (output, output.with_name(output.name + ".partial")):
            folder.mkdir(parents=True)
            written.append(folder)
        (output / META_FILE).write_text(json.dumps({"data_hash": "d", "metrics": {}}))

    monkeypatch.setattr(stages, "train", training_that_ends_first)
    assert run_round(session_factory, round_id, "w", worker_settings) is None
    assert len(written) == 2 and not any(folder.exists() for folder in written)
    with session_scope(session_factory) as session:
        assert session.get(Round, round_id).status == RoundStatus.cancelled
        assert session.scalar(select(func.count()).select_from(ModelVersion)) == 0


def _bad_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, Callable[[], object]]:
    # A model directory whose tokenizer file is damaged: every attempt reads it the same.
    from active_learning.model import load_base, save_checkpoint

    base = tmp_path / "backbone"
    save_checkpoint(*load_base("tiny"), base, {})
    (base / "tokenizer.json").write_text("not a tokenizer")
    return str(base), f"cannot load the tokenizer of {base}", lambda: None


def _deleted_after_queueing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, Callable[[], object]]:
    # A whole model directory when the round was asked for, gone when a worker takes it.
    from active_learning.model import load_base, save_checkpoint

    base = tmp_path / "backbone"
    save_checkpoint(*load_base("tiny"), base, {})
    return str(base), f"{base} is not a model directory here", lambda: shutil.rmtree(base)


def _hub_id_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, Callable[[], object]]:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    name = "stepwise-tests/no-such-model"
    return name, f"HF_HUB_OFFLINE is set and {name} is not in this machine's cache", lambda: None


@pytest.mark.parametrize("unusable", [_bad_tokenizer, _deleted_after_queueing, _hub_id_offline])
def test_a_round_on_a_base_no_attempt_can_load_fails_at_once(  # type: ignore[no-untyped-def]
    session_factory, worker_settings, tmp_path, monkeypatch, unusable
) -> None:
    from app.models import RoundSettings
    from app.rounds.schemas import RoundRead
    from tests.rounds.conftest import synthetic_project

    base, why, after_queueing = unusable(tmp_path, monkeypatch)
    project = synthetic_project(session_factory, "unusable-base")
    with session_scope(session_factory) as session:
        session.get(RoundSettings, project.id).base_model = base
        round_id = start_round(session, session.get(Project, project.id)).id
    after_queueing()
    assert run_round(session_factory, round_id, "w", worker_settings) == RoundStatus.failed
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert (round_.status, round_.attempts, round_.stage) == (RoundStatus.failed, 1, RoundStage.train)
        assert round_.message.startswith(f"failed: the base model cannot be used: {why}")
        # What the API answers: the failed attempt counted and its error kept, as a round that
        # failed on any other error has them; the message quotes the error, so pages show it once.
        read = RoundRead.model_validate(round_)
        assert read.error is not None and read.error.startswith(f"the base model cannot be used: {why}")
        assert read.message == f"failed: {read.error}"
        assert (read.failures, read.retry_at) == (1, None)
        assert session.scalar(select(func.count()).select_from(ModelVersion)) == 0
