"""A whole round, in process, on SQLite and PostgreSQL, with the tiny model on the CPU."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from active_learning import score as scoring
from active_learning.data import Solution as PrmSolution
from active_learning.model import load_checkpoint
from active_learning.select import Candidate
from active_learning.select import select as rule_picks
from app.db import session_scope
from app.labeling.service import next_task
from app.labeling.task_handles import assignment_of
from app.models import (
    Assignment,
    Label,
    ModelVersion,
    Problem,
    Project,
    Role,
    Round,
    RoundPick,
    RoundStage,
    RoundStatus,
    ScoreKind,
    Solution,
    SolutionScore,
)
from app.rounds import pool, stages
from app.rounds.picking import selection_rule
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import round_settings, served_version, start_round, update_round_settings
from tests.conftest import browser_login, make_user
from tests.rounds.conftest import run_one_round, synthetic_project

pytestmark = pytest.mark.slow


def start(factory: sessionmaker[Session], project_id: int) -> int:
    with session_scope(factory) as session:
        return start_round(session, session.get(Project, project_id)).id


def expected_picks(session: Session, project_id: int, round_: Round, version_id: int) -> list[tuple[int, str]]:
    """What the rule picks from the pool's stored scores, computed here from scratch."""
    rows = pool.pool_candidates(session, project_id, version_id)
    texts = pool.solution_texts(session, [r[0] for r in rows])
    candidates = [Candidate(sid, pid, score, grade, texts[sid], truncated) for sid, pid, grade, score, truncated in rows]
    rule = selection_rule(round_settings(session, project_id), seed=round_.id)
    return [(p.solution_id, p.reason) for p in rule_picks(candidates, rule)]


@pytest.fixture
def small_score_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages, chunks and saves of 7 over a pool of 40, the first chunk 3: the one scoring stream
    crosses pages and chunk boundaries fall inside saves, as with a real pool's 512 and 256."""
    monkeypatch.setattr(stages, "SCORE_CHUNK", 7)
    monkeypatch.setattr(scoring, "FIRST_CHUNK", 3)


def stored_scores_are_their_solutions(session: Session, project_id: int, version: ModelVersion) -> set[int]:
    """Checks each score the version stored against its solution scored here on its own; returns
    the solutions scored."""
    stored = {row.solution_id: row for row in session.scalars(
        select(SolutionScore).where(SolutionScore.model_version_id == version.id))}
    solutions = session.execute(select(Solution.id, Solution.problem_id, Solution.steps, Problem.statement)
                                .join(Problem, Problem.id == Solution.problem_id)
                                .where(Solution.id.in_(stored)).order_by(Solution.id)).all()
    model, tokenizer, _ = load_checkpoint(version.path, "cpu")
    settings = round_settings(session, project_id)
    direct = scoring.score_solutions(model, tokenizer, [PrmSolution(str(pid), text, steps) for _, pid, steps, text in solutions],
                                     max_length=settings.max_length, neutral_as_correct=settings.neutral_as_correct)
    for (sid, *_), score in zip(solutions, direct, strict=True):
        expected = score.product if settings.score_kind == ScoreKind.product else score.minimum
        assert stored[sid].score == pytest.approx(expected, abs=1e-5), sid
        assert stored[sid].step_scores == pytest.approx(score.step_scores, abs=1e-5), sid
    return set(stored)


def test_rounds_train_promote_score_select_and_enqueue(
    session_factory: sessionmaker[Session], worker_settings, backend: str, small_score_pages: None
) -> None:
    project = synthetic_project(session_factory)
    round_id = start(session_factory, project.id)

    assert stages.run_round(session_factory, round_id, "worker-a", worker_settings) == RoundStatus.done

    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.status == RoundStatus.done and round_.stage == RoundStage.done
        assert round_.percent == 100 and round_.lease_owner is None
        labels = session.scalar(select(func.count()).select_from(Label)) or 0
        assert round_.snapshot_labels == labels and round_.snapshot_hash
        version = served_version(session, project.id)
        assert version is not None and version.round_id == round_id and round_.promoted
        assert (Path(version.path) / "config.json").exists()
        assert round_.metrics["candidate"]["step_auroc"] is not None
        assert round_.metrics["heldout_labels"] > 0 and "best_of_n" in round_.metrics["candidate"]
        # What earlier stages recorded stays beside the evaluation (the autolabel stage's outcome,
        # a generator it could not open included, and what training left out).
        assert {"sources", "machine_labels", "training"} <= round_.metrics.keys()
        # The labels the version trained on are the trainer's count, none left out here.
        assert round_.metrics["training"] == {"labels": version.train_labels, "left_out": 0, "max_length": 256}

        pool_ids = {r[0] for r in pool.pool_candidates(session, project.id, None)}
        assert stored_scores_are_their_solutions(session, project.id, version) == pool_ids

        picks = list(session.scalars(select(RoundPick).where(RoundPick.round_id == round_id).order_by(RoundPick.rank)))
        assert [(p.solution_id, p.reason.value) for p in picks] == expected_picks(session, project.id, round_, version.id)
        reasons = Counter(p.reason.value for p in picks)
        assert reasons == {"convincing_wrong": 9, "top_scored": 2, "random_control": 1}
        assert all(p.answer_grade == "wrong" for p in picks if p.reason.value == "convincing_wrong")
        assert all(p.model_version_id == version.id and p.score is not None for p in picks)

        slots = Counter(session.scalars(select(Assignment.solution_id)))
        assert max(slots.values()) == 1, "a solution was queued twice"
        picked = {p.solution_id for p in picks}
        assert {a.generation for a in session.scalars(select(Assignment).where(Assignment.solution_id.in_(picked)))} == {1}

    # The queue now serves the picks first, in the rule's order.
    labeler = make_user(session_factory, "lab", Role.labeler)
    served_order = []
    for _ in range(3):
        with session_scope(session_factory) as session:
            task = next_task(session, project.id, labeler.id).task
            served_order.append(task.solution.id)
            session.get(Assignment, assignment_of(session, task.assignment_id)).status = "done"
    assert served_order == [p.solution_id for p in picks[:3]]

    # A second round is judged against the model the first one serves.
    first = round_id
    with session_scope(session_factory) as session:
        served_before = served_version(session, project.id).id
        # A rule no barely trained model can meet.
        update_round_settings(session, project.id, RoundSettingsUpdate(promote_min=1.0))

    second = start(session_factory, project.id)
    assert stages.run_round(session_factory, second, "worker-b", worker_settings) == RoundStatus.done

    with session_scope(session_factory) as session:
        round_ = session.get(Round, second)
        assert round_.promoted is False and "below the minimum" in round_.message
        assert round_.metrics["passed"] is False
        assert round_.metrics["served_version_id"] == served_before
        assert round_.metrics["served"]["step_auroc"] is not None
        assert served_version(session, project.id).id == served_before
        versions = session.scalars(select(ModelVersion).order_by(ModelVersion.id)).all()
        assert [(v.is_served, v.passed) for v in versions] == [(True, True), (False, False)]
        # Round 2 picked with the model still served, and outranks what round 1 queued.
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == second)).all()
        assert picks and {p.model_version_id for p in picks} == {served_before}
        assert min(p.priority for p in picks) > max(
            p.priority for p in session.scalars(select(RoundPick).where(RoundPick.round_id == first))
        )
        assert {s.generation for s in session.scalars(select(Solution).where(Solution.id.in_([p.solution_id for p in picks])))} == {2}


def test_a_checkpoints_card_publishes_the_metrics_its_round_judged_it_by(
    session_factory: sessionmaker[Session], worker_settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Training measures best-of-N on the held-out labeled solutions, the round on every graded
    # solution of those problems: on a real project the two differ. Whatever the round measured,
    # the card and stepwise.json say it, as the pages and the API do.
    measure = stages._metrics_of

    def round_measures(*args, **kwargs):  # type: ignore[no-untyped-def]
        metrics = measure(*args, **kwargs)
        metrics["best_of_n"] = {**metrics["best_of_n"], "problems": 321}
        return metrics

    monkeypatch.setattr(stages, "_metrics_of", round_measures)
    project = synthetic_project(session_factory, "card")
    with session_scope(session_factory) as session:
        round_settings(session, project.id).neutral_as_correct = False
    round_id = start(session_factory, project.id)
    assert stages.run_round(session_factory, round_id, "worker-a", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        version = session.scalar(select(ModelVersion).where(ModelVersion.round_id == round_id))
        candidate = session.get(Round, round_id).metrics["candidate"]
    checkpoint = Path(version.path)
    meta = json.loads((checkpoint / "stepwise.json").read_text())
    assert meta["metrics"] == version.metrics == candidate and candidate["best_of_n"]["problems"] == 321
    card = (checkpoint / "README.md").read_text()
    assert f"best-of-{candidate['best_of_n']['n']} accuracy over 321 problems" in card
    # Measured as the project counts a neutral step, which the card says: `prm eval` needs it.
    assert (candidate["neutral_as_correct"], candidate["max_length"]) == (False, meta["config"]["max_length"])
    assert "A neutral step (0) counted as wrong (`prm eval --neutral-as-wrong`)" in card


def test_scoring_that_fails_partway_keeps_what_it_scored_and_resumes(
    session_factory: sessionmaker[Session], worker_settings, backend: str, small_score_pages: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chunk that fails (here a record that cannot be tokenised; on a GPU, running out of
    memory) ends the attempt after the scores before it are saved, part of a save included; the
    next attempt scores the rest, each solution once."""
    project = synthetic_project(session_factory)
    round_id = start(session_factory, project.id)
    read_page, pages = pool.unscored_chunk, 0

    def second_page_spoilt_once(*args):
        nonlocal pages
        page, pages = read_page(*args), pages + 1
        if pages == 2:
            sid, pid, _, text = page[2]
            page[2] = (sid, pid, [None], text)
        return page

    monkeypatch.setattr(pool, "unscored_chunk", second_page_spoilt_once)
    assert stages.run_round(session_factory, round_id, "worker-a", worker_settings) == RoundStatus.queued
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.stage == RoundStage.score and "a step is NoneType, not text" in round_.error
        version = served_version(session, project.id)
        pool_ids = sorted(r[0] for r in pool.pool_candidates(session, project.id, None))
        # Chunks of 3 and 6 scored, the third (the spoilt record's) not: a save of 7 and one of 2.
        assert stored_scores_are_their_solutions(session, project.id, version) == set(pool_ids[:9])

    assert stages.run_round(session_factory, round_id, "worker-b", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        version = served_version(session, project.id)
        assert stored_scores_are_their_solutions(session, project.id, version) == set(pool_ids)


def test_without_enough_labels_a_round_picks_uniformly(
    session_factory: sessionmaker[Session], worker_settings, backend: str
) -> None:
    project = synthetic_project(session_factory, labeled_problems=2)
    round_id = start(session_factory, project.id)
    assert stages.run_round(session_factory, round_id, "worker-a", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert "fewer than the 10 needed" in round_.message and round_.promoted is False
        # No model was trained, so none was "not promoted".
        assert "not promoted" not in round_.message
        assert round_.status_text == "done, no model trained"
        assert served_version(session, project.id) is None
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == round_id)).all()
        assert len(picks) == 12 and {p.reason.value for p in picks} == {"no_model"}
        assert all(p.score is None and p.model_version_id is None for p in picks)
        # In the uniform mode the picks say so, model or not.
        update_round_settings(session, project.id, RoundSettingsUpdate(selector_mode="uniform"))
    again = start(session_factory, project.id)
    assert stages.run_round(session_factory, again, "worker-a", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        assert session.get(Round, again).metrics["selector"] == {
            "mode": "uniform", "version_id": None, "uniform_because": "the project's selector mode is uniform"}
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == again)).all()
        assert picks and {p.reason.value for p in picks} == {"uniform"}


def test_a_round_whose_pool_is_empty_says_why_it_picked_nothing(
    client, session_factory: sessionmaker[Session], worker_settings, backend: str  # type: ignore[no-untyped-def]
) -> None:
    # Every solution came with its labels (a PRM800K import), so no labeler has one left to see.
    project = synthetic_project(session_factory, labeled_problems=2, pool_problems=0)
    round_id = start(session_factory, project.id)
    assert stages.run_round(session_factory, round_id, "worker-a", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.metrics["selection"]["pool"] == 0
        assert round_.message.startswith("0 picks first in the queue (its pool was empty: no solution is left without a human label")
    make_user(session_factory, "rhea", Role.researcher)
    browser_login(client, "rhea")
    page = client.get(f"/research/rounds/{round_id}").text
    assert "This round picked nothing: its pool was empty: no solution is left without a human label" in page


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_uniform_mode_and_a_selector_below_the_bar_pick_uniformly_and_pin_nothing(
    client, session_factory: sessionmaker[Session], worker_settings, backend: str  # type: ignore[no-untyped-def]
) -> None:
    project = synthetic_project(session_factory)
    with session_scope(session_factory) as session:
        update_round_settings(session, project.id, RoundSettingsUpdate(selector_mode="uniform"))
    # The app's own worker may run a round before this test does: run_one_round waits for it.
    first = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        served = served_version(session, project.id)
        assert served is not None and session.get(Round, first).promoted
        # The round's own model scored the pool; the picks are uniform by the project's choice.
        assert session.get(Round, first).metrics["selector"] == {
            "mode": "uniform", "version_id": served.id, "uniform_because": "the project's selector mode is uniform"}
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == first)).all()
        assert len(picks) == 12 and {p.reason.value for p in picks} == {"uniform"}
        assert all(p.score is not None for p in picks)
        # A bar no model trained in seconds reaches.
        update_round_settings(session, project.id, RoundSettingsUpdate(selector_mode="fixed",
                                                                       selector_min_step_auroc=0.999))
    warmup = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        served = served_version(session, project.id)
        served_id = served.id
        assert round_settings(session, project.id).selector_version_id is None
        selector = session.get(Round, warmup).metrics["selector"]
        assert selector["version_id"] == served.id and selector["mode"] == "fixed"
        assert "its lower end is below the minimum 0.999" in selector["uniform_because"]
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == warmup)).all()
        assert len(picks) == 12 and {p.reason.value for p in picks} == {"selector_warmup"}
        # Drawn uniformly from a pool the served model scored (routing reads those scores).
        assert all(p.score is not None and p.model_version_id == served.id for p in picks)
        ranked = expected_picks(session, project.id, session.get(Round, warmup), served.id)
        assert {p.solution_id for p in picks} != {sid for sid, _ in ranked}
    make_user(session_factory, "rita", "researcher")
    browser_login(client, "rita")
    shown = client.get(f"/research/rounds/{warmup}").text
    assert "uniform picks" in shown and "its lower end is below the minimum 0.999" in shown
    assert f"pool scored by version {served_id}, fixed mode" in shown and "selector warmup" in shown
    with session_scope(session_factory) as session:
        update_round_settings(session, project.id, RoundSettingsUpdate(selector_min_step_auroc=0.0))
    second = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        # The model served when the second round ranked is the first to clear the bar: pinned.
        pinned = round_settings(session, project.id).selector_version_id
        assert pinned == served_version(session, project.id).id
        assert session.get(Round, second).metrics["selector"] == {"mode": "fixed", "version_id": pinned}
        reasons = {p.reason.value for p in session.scalars(select(RoundPick).where(RoundPick.round_id == second))}
        assert "convincing_wrong" in reasons and "selector_warmup" not in reasons


@pytest.mark.parametrize(("mode", "backend"), [("fixed", "postgresql"), ("retrain", "sqlite")], indirect=["backend"])
def test_a_fixed_selector_keeps_ranking_while_new_models_are_served(
    session_factory: sessionmaker[Session], worker_settings, backend: str, mode: str
) -> None:
    project = synthetic_project(session_factory)
    with session_scope(session_factory) as session:
        # Every trained model is promoted, so the served model changes between the rounds.
        update_round_settings(session, project.id, RoundSettingsUpdate(selector_mode=mode, promote_margin=1.0))
    first = start(session_factory, project.id)
    assert stages.run_round(session_factory, first, "worker-a", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        v1 = served_version(session, project.id).id
        pinned = round_settings(session, project.id).selector_version_id
        assert pinned == (v1 if mode == "fixed" else None)
    second = start(session_factory, project.id)
    assert stages.run_round(session_factory, second, "worker-b", worker_settings) == RoundStatus.done
    with session_scope(session_factory) as session:
        v2 = served_version(session, project.id).id
        assert v2 != v1
        ranked_by = v1 if mode == "fixed" else v2
        round_ = session.get(Round, second)
        assert round_.metrics["selector"] == {"mode": mode, "version_id": ranked_by}
        picks = session.scalars(select(RoundPick).where(RoundPick.round_id == second)).all()
        assert picks and {p.model_version_id for p in picks} == {ranked_by}
        # The fixed selector scored only what was new to it; nothing is scored twice.
        scored = session.scalars(select(SolutionScore.solution_id).where(SolutionScore.model_version_id == ranked_by)).all()
        assert len(scored) == len(set(scored))


def test_a_round_with_nothing_held_out_measures_nothing(tmp_path: Path) -> None:
    # Recording how metrics were measured must not make an empty measurement look like one: the
    # selector's readiness falls back to its own round's metrics only on an empty one.
    from types import SimpleNamespace

    from tests.rounds.conftest import untrained_checkpoint

    checkpoint = untrained_checkpoint(tmp_path / "model")
    run = SimpleNamespace(settings=SimpleNamespace(neutral_as_correct=True, max_length=256))
    assert stages._metrics_of(run, str(checkpoint), [], []) == {}  # type: ignore[arg-type]


def test_training_progress_reads_the_trainers_own_plan(session_factory: sessionmaker[Session], worker_settings) -> None:  # type: ignore[no-untyped-def]
    # Planned from the label count, the bar read "step 64 of 320" where the trainer, leaving out
    # labels with no rated step within max_length, took 200 steps, and jumped from there to done.
    from app.rounds.run import RoundRun

    project = synthetic_project(session_factory)
    round_id = start(session_factory, project.id)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        round_.status, round_.stage, round_.lease_owner, round_.attempts = RoundStatus.running, RoundStage.train, "w", 1
        settings = round_settings(session, project.id)
    run = RoundRun(session_factory, round_id, "w", worker_settings, project.id, 1, settings, total_steps=320)
    work = run.checkpoint_dir.with_name(run.checkpoint_dir.name + ".partial")
    work.mkdir(parents=True)
    (work / "progress.json").write_text(json.dumps({"step": 64}))
    (work / "plan.json").write_text(json.dumps({"steps": 200, "examples": 90, "left_out": 26}))
    with session_scope(session_factory) as session:
        stages._report_training(run, session)
    with session_scope(session_factory) as session:
        assert session.get(Round, round_id).message == "training: step 64 of 200"
