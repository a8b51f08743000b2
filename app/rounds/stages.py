"""Run one active-learning round: the module that joins the PRM engine (active_learning) to the database.

autolabel → snapshot → train → evaluate → promote → score → select → enqueue, each stage ending in one
transaction that records its result and the next stage (see app.rounds.lease). What a stage
leaves outside the database is made safe to redo: a checkpoint is renamed into place only when
complete (active_learning.train) and is reused only when it was trained on the same data with
the same settings; scores are keyed by (model version, solution); picks by (round, solution);
rollout labels by (generator and its settings, solution), so a resumed autolabel goes on.
A worker killed anywhere therefore leaves the served model as it was, and the next worker
continues from the recorded stage without enqueuing anything twice.
"""

from __future__ import annotations

import contextlib
import json
import math
import logging
import os
import shutil
import time
import traceback
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from active_learning.bases import BaseOutOfReach, BaseUnusable
from active_learning.card import model_card
from active_learning.config import BOOTSTRAP_SAMPLES, TrainConfig
from active_learning.data import (
    DEFAULT_SOURCE_WEIGHTS, Example, format_source_weights, load_examples, snapshot_hash, source_mix, weigh_sources,
)
from active_learning.data import Solution as PrmSolution
from active_learning.evaluate import best_of_n, evaluate_examples
from active_learning.files import replace_whole
from active_learning.model import META_FILE, load_checkpoint, resolve_device
from active_learning.rollouts import RolloutSettings, open_generator
from active_learning.score import in_chunks, iter_scores, within_positions
from active_learning.train import PLAN_FILE, PROGRESS_FILE, TrainingDiverged, TrainingStopped, planned_steps, train
from app.db import session_scope
from app.machine_labels.rollouts import label_by_rollouts
from app.models import ModelVersion, Round, RoundSettings, RoundStage, RoundStatus, ScoreKind, SelectorMode, utcnow
from app.ops.metrics import ROUND_STAGE_FAILURES, ROUND_STAGE_SECONDS
from app.rounds import lease, pool, routing
from app.rounds.config import WorkerSettings
from app.rounds.failpoints import failpoint
from app.rounds.heldout import best_of_n_rows, heldout_records, heldout_texts
from app.rounds.picking import enqueue_stage, select_stage
from app.rounds.promotion import passes, selector_ready
from app.rounds.run import STAGE_START, RoundRun, frozen_settings, jsonable, settings_dict
from app.rounds.service import round_settings, selector_version, served_version

log = logging.getLogger("stepwise.rounds")

SCORE_CHUNK = 512


def run_round(
    factory: sessionmaker[Session], round_id: int, owner: str, worker: WorkerSettings
) -> RoundStatus | None:
    """Claim the round and run it to its end; None if another worker holds it."""
    with session_scope(factory) as session:
        if not lease.claim(session, round_id, owner, worker.round_lease_s):
            return None
        round_ = session.get(Round, round_id)
        assert round_ is not None
        if round_.attempts > worker.round_max_claims:
            # Its workers keep dying (killed for memory, say): stop feeding it new ones.
            lease.fail(session, round_id, owner, f"failed: its workers died {round_.attempts - 1} times")
            return RoundStatus.failed
        settings = frozen_settings(round_.metrics.get("settings"))
        if settings is None:
            settings = round_settings(session, round_.project_id)
            session.expunge(settings)
        run = RoundRun(factory, round_id, owner, worker, round_.project_id, round_.number, settings,
                       resumed_percent=round_.percent)
    log.info("round id %s: claimed by %s", round_id, owner)
    try:
        beat = lambda session: _report_training(run, session)  # noqa: E731
        with lease.lease_keeper(factory, round_id, owner, worker.round_lease_s, beat) as keeper:
            run.lease_lost = lambda: keeper.lost
            while (stage := _stage(run)) is not None:
                log.info("round id %s: %s", round_id, stage.value)
                _run_stage(run, stage)
        return RoundStatus.done
    except lease.LeaseLost as lost:
        log.info("round id %s: %s", round_id, lost)
        return None
    except (TrainingDiverged, BaseUnusable) as hopeless:
        # Another attempt with the same settings diverges, or finds the base as it is, the same
        # way: fail now and say why.
        log.warning("round id %s: %s", round_id, hopeless)
        why = f"the base model cannot be used: {hopeless}" if isinstance(hopeless, BaseUnusable) else str(hopeless)
        with session_scope(factory) as session:
            # The error is the message's own words, so a round's page quotes it once, not twice.
            lease.fail(session, round_id, owner, f"failed: {why}", error=why)
        return RoundStatus.failed
    except Exception as exc:
        if isinstance(exc, BaseOutOfReach):
            # Expected where the Hub is out of reach, and said in full by its message: a
            # traceback on every attempt would bury it.
            log.warning("round id %s failed: %s", round_id, exc)
        else:
            log.exception("round id %s failed", round_id)
        cause = " ".join("".join(traceback.format_exception_only(exc)).split())
        return lease.give_up_or_retry(factory, round_id, owner, cause, worker.round_max_attempts,
                                       worker.round_retry_after_s)


def _run_stage(run: RoundRun, stage: RoundStage) -> None:
    started = time.perf_counter()
    try:
        STAGES[stage](run)
    except lease.LeaseLost:
        # Another worker holds the round now: no failure of the stage.
        raise
    except Exception:
        ROUND_STAGE_FAILURES.labels(stage.value).inc()
        raise
    ROUND_STAGE_SECONDS.labels(stage.value).observe(time.perf_counter() - started)


def _stage(run: RoundRun) -> RoundStage | None:
    with run.session() as session:
        row = session.execute(
            select(Round.status, Round.stage, Round.lease_owner).where(Round.id == run.round_id)
        ).one()
    if row.status == RoundStatus.done:
        return None
    if row.status != RoundStatus.running or row.lease_owner != run.owner:
        raise lease.LeaseLost(f"round {run.round_id} is {row.status.value}")
    return row.stage


# -- autolabel --------------------------------------------------------------------------------

def _autolabel(run: RoundRun) -> None:
    """Rollout labels for up to `autolabel_limit` pool solutions, before the snapshot, so that
    routing and (when accepted) training see them this round; nothing without a generator."""
    outcome = _rollout_labels(run) if run.settings.autolabel_generator else None
    with run.session() as session:
        values = {} if outcome is None else {"metrics": {**run.metrics(session), "autolabel": outcome}}
        lease.advance(session, run.round_id, run.owner, RoundStage.autolabel, RoundStage.snapshot,
                      percent=STAGE_START[RoundStage.snapshot], **values)


def _rollout_labels(run: RoundRun) -> dict[str, Any]:
    s = run.settings
    assert s.autolabel_generator is not None
    settings = RolloutSettings(rollouts=s.autolabel_rollouts, method=s.autolabel_method)
    outcome: dict[str, Any] = {"generator": s.autolabel_generator, "rollouts": s.autolabel_rollouts,
                               "method": s.autolabel_method}
    try:
        # An endpoint's key comes from the worker's environment, as for `stepwise autolabel`.
        generator = open_generator(s.autolabel_generator, device=resolve_device("auto"), api_key=os.environ.get("OPENAI_API_KEY"))
    except (ValueError, OSError) as exc:
        # A generator that cannot be opened costs this round its machine labels, not its model:
        # the round goes on with the labels it has, and the round page says why.
        log.warning("round id %s: autolabel skipped: %s", run.round_id, exc)
        return {**outcome, "error": f"cannot open the generator: {exc}"}
    with run.session() as session:
        run.progress(session, RoundStage.autolabel, 0, f"autolabel: sampling from {s.autolabel_generator}")

    def progress(done: int, total: int) -> None:
        with run.session() as session:
            run.progress(session, RoundStage.autolabel, done / max(total, 1),
                         f"autolabel: {done} of {total} solutions")

    result = label_by_rollouts(run.factory, run.project_id, generator, s.autolabel_generator, settings,
                               limit=s.autolabel_limit, progress=progress)
    return {**outcome, "stored": result.stored, "skipped": result.skipped, "candidates": result.candidates}


# -- snapshot ---------------------------------------------------------------------------------

def _snapshot(run: RoundRun) -> None:
    with run.session() as session:
        run.progress(session, RoundStage.snapshot, 0, "taking the label snapshot")
        max_id, count = pool.label_snapshot(session, run.project_id)
        machine = _machine_labels_taken(run, session, max_id)
        records = pool.label_records(session, run.project_id, max_id, machine["ids"])
        examples = load_examples(weigh_sources(records, run.settings.source_weights))
        failpoint("snapshot.taken")
        earlier = run.metrics(session)
        lease.advance(
            session, run.round_id, run.owner, RoundStage.snapshot, RoundStage.train,
            snapshot_label_id=max_id, snapshot_labels=count,
            snapshot_hash=snapshot_hash(examples), percent=STAGE_START[RoundStage.train],
            metrics={**earlier, "settings": jsonable(settings_dict(run.settings)),
                     "sources": _source_record(run, records),
                     "machine_labels": {"accepted": len(machine["ids"]), "version_id": machine["version_id"]}},
        )


def _source_record(run: RoundRun, records: list[dict]) -> dict:
    """The snapshot's mix: labels per source, and the weight each source trains at (0: unused)."""
    weights = run.settings.source_weights or DEFAULT_SOURCE_WEIGHTS
    labels = source_mix(records)
    return {"labels": labels, "weights": {source: weights.get(source, 0.0) for source in labels}}


def _machine_labels_taken(run: RoundRun, session: Session, max_id: int) -> dict[str, Any]:
    """The machine labels this round trains on without a human (none unless the settings say
    so), judged against the model that ranks the pool now; its id is kept so that every stage
    of the round reads the same labels."""
    if not run.settings.accept_agreeing_machine_labels:
        return {"ids": [], "version_id": None}
    selector = selector_version(session, run.settings)
    version_id = selector.id if selector else None
    return {"ids": sorted(routing.accepted_label_ids(session, run.project_id, version_id, max_id)),
            "version_id": version_id}


def _split(run: RoundRun, session: Session, *, training: bool = True) -> tuple[list[dict], list[dict]]:
    """The snapshot's records, split into training and held-out problems: training records
    weighed by source (weigh_sources), held-out ones the labelers' alone, since a model is judged
    against people, never against another model's labels. Without `training`, the machine
    labels routing accepted are not looked up again: they weigh only in training."""
    max_id, metrics = session.execute(
        select(Round.snapshot_label_id, Round.metrics).where(Round.id == run.round_id)
    ).one()
    max_id = max_id or 0
    machine: list[int] = []
    if training and (metrics or {}).get("machine_labels", {}).get("accepted"):
        version_id = metrics["machine_labels"]["version_id"]
        machine = sorted(routing.accepted_label_ids(session, run.project_id, version_id, max_id))
    records = pool.label_records(session, run.project_id, max_id, machine)
    held = heldout_texts({r["question"]["problem"] for r in records}, run.settings.heldout_share)
    train_records = [r for r in records if r["question"]["problem"] not in held]
    return weigh_sources(train_records, run.settings.source_weights), heldout_records(records, held)


# -- train ------------------------------------------------------------------------------------

def _train_config(run: RoundRun, n_examples: int) -> TrainConfig:
    s = run.settings
    config = TrainConfig(
        output=str(run.checkpoint_dir), base=s.base_model, epochs=s.train_epochs,
        learning_rate=s.learning_rate, max_length=s.max_length, seed=run.number,
        source_weights=None if s.source_weights is None else format_source_weights(s.source_weights),
    )
    # About ten resumable snapshots a run: a killed worker loses a tenth of training at most,
    # and the snapshots double as the progress bar's ticks.
    config.save_every = max(1, _total_steps(config, n_examples) // 10)
    # About fifty points on the round page's loss chart, however long the run.
    config.log_every = max(1, _total_steps(config, n_examples) // 50)
    return config


def _total_steps(config: TrainConfig, n_examples: int) -> int:
    # An epoch's batches of batch_size, its last one partial: exact when every example has a
    # rated step, since rounds give train their held-out records and it holds none back;
    # otherwise a little over, which only the progress bar reads.
    return planned_steps(config, math.ceil(n_examples / config.batch_size))


def _report_training(run: RoundRun, session: Session) -> None:
    """Training progress from the trainer's last resumable snapshot, on the lease's beat, against
    the trainer's own plan: it leaves out the labels with no rated step within max_length, which
    the plan made from the label count could not know (a quarter of them overstated it 60%)."""
    work = run.checkpoint_dir.with_name(run.checkpoint_dir.name + ".partial")
    try:
        done = json.loads((work / PROGRESS_FILE).read_text())["step"]
    except (OSError, ValueError, KeyError):
        return
    try:
        run.total_steps = json.loads((work / PLAN_FILE).read_text())["steps"]
    except (OSError, ValueError, KeyError):
        pass
    if not run.total_steps:
        return
    start, end = STAGE_START[RoundStage.train], STAGE_START[RoundStage.evaluate]
    percent = start + (end - start) * min(done / run.total_steps, 1.0)
    session.execute(
        update(Round)
        .where(Round.id == run.round_id, Round.lease_owner == run.owner,
               Round.stage == RoundStage.train)
        .values(percent=percent, eta_at=run.eta(percent),
                message=f"training: step {done} of {run.total_steps}")
    )


def _train(run: RoundRun) -> None:
    with run.session() as session:
        train_records, heldout_records = _split(run, session)
        examples = load_examples(train_records)
        if len(examples) < run.settings.min_train_labels:
            message = (f"{len(examples)} training labels, fewer than the "
                       f"{run.settings.min_train_labels} needed: no model this round")
            metrics = run.metrics(session)
            lease.advance(session, run.round_id, run.owner, RoundStage.train, RoundStage.score,
                          message=message, promoted=False, metrics={**metrics, "rule": message},
                          percent=STAGE_START[RoundStage.score])
            return
        run.progress(session, RoundStage.train, 0, f"training on {len(examples)} labels")
    config = _train_config(run, len(examples))
    run.total_steps = _total_steps(config, len(examples))
    output = run.checkpoint_dir
    try:
        if not _reusable(output, config, examples):
            shutil.rmtree(output, ignore_errors=True)
            # The held-out labels evaluate the checkpoint, so its own metrics are honest ones.
            try:
                train(config, train_records, heldout_records or None, stop=run.lease_lost)
            except TrainingStopped as stopped:
                raise lease.LeaseLost(f"round {run.round_id} is no longer ours: {stopped}") from None
        failpoint("train.saved")
        meta = json.loads((output / META_FILE).read_text())
        trained = meta.get("train_examples", len(examples))
        with run.session() as session:
            version = ModelVersion(
                project_id=run.project_id, round_id=run.round_id, path=str(output.resolve()),
                base=run.settings.base_model, data_hash=meta["data_hash"],
                train_labels=trained, metrics=jsonable(meta.get("metrics") or {}),
            )
            session.add(version)
            session.flush()
            lease.advance(session, run.round_id, run.owner, RoundStage.train, RoundStage.evaluate,
                          percent=STAGE_START[RoundStage.evaluate], message="evaluating",
                          metrics={**run.metrics(session), "training": {
                              "labels": trained, "left_out": meta.get("train_examples_left_out", 0),
                              "max_length": (meta.get("config") or {}).get("max_length", config.max_length)}})
    except lease.LeaseLost:
        _drop_if_cancelled(run, output)
        raise


def _drop_if_cancelled(run: RoundRun, output: Path) -> None:
    """A cancelled round's checkpoint, whole or a snapshot, is disk no version points to. (A
    round whose lease lapsed is another worker's now, in the same folder: that one is kept.)"""
    with run.session() as session:
        status = session.scalar(select(Round.status).where(Round.id == run.round_id))
    if status == RoundStatus.cancelled:
        for folder in (output, output.with_name(output.name + ".partial")):
            shutil.rmtree(folder, ignore_errors=True)


def _reusable(output: Path, config: TrainConfig, examples: list[Example]) -> bool:
    """A complete checkpoint from an earlier attempt of this round, on the same data."""
    try:
        meta = json.loads((output / META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("data_hash") == snapshot_hash(examples) and meta.get("config") == config.published()


# -- evaluate and promote ---------------------------------------------------------------------

def _evaluate(run: RoundRun) -> None:
    with run.session() as session:
        _, heldout_records = _split(run, session, training=False)
        candidate = _round_version(session, run)
        served = served_version(session, run.project_id)
        machine_labels = run.metrics(session).get("machine_labels")
        bon_rows = best_of_n_rows(session, run.project_id, {r["question"]["problem"] for r in heldout_records})
    heldout = load_examples(heldout_records)
    metrics: dict[str, Any] = {"heldout_labels": len(heldout), "machine_labels": machine_labels}
    metrics["candidate"] = _metrics_of(run, candidate.path, heldout, bon_rows)
    if served is not None:
        metrics["served"] = _metrics_of(run, served.path, heldout, bon_rows)
        metrics["served_version_id"] = served.id
    failpoint("evaluate.measured")
    _card_from_round(Path(candidate.path), metrics["candidate"])
    with run.session() as session:
        session.execute(update(ModelVersion).where(ModelVersion.id == candidate.id)
                        .values(metrics=jsonable(metrics["candidate"])))
        # What the earlier stages recorded stays on the round's record: the autolabel stage's
        # outcome (a generator it could not open, said on the round page), the snapshot's
        # source mix, what training left out. Replaced, they were lost once a model was trained.
        # The frozen settings go, as they always did here: an attempt resumed after evaluation
        # reads the project's own, with the selector the first attempt pinned, which the frozen
        # copy predates.
        earlier = {key: value for key, value in run.metrics(session).items() if key != "settings"}
        lease.advance(session, run.round_id, run.owner, RoundStage.evaluate, RoundStage.promote,
                      metrics=jsonable({**earlier, **metrics}), percent=STAGE_START[RoundStage.promote])


def _card_from_round(checkpoint: Path, metrics: dict[str, Any]) -> None:
    """The checkpoint's card and stepwise.json take the metrics the round judged it by, which
    the pages and the API show: training measured best-of-N on the labeled held-out solutions
    only, so a card kept from training would publish other numbers than the ones it was
    promoted on. Before promotion, so that a served model's files never change."""
    meta = json.loads((checkpoint / META_FILE).read_text())
    meta["metrics"] = jsonable(metrics)
    replace_whole(checkpoint / META_FILE, json.dumps(meta, indent=2, default=str) + "\n")
    replace_whole(checkpoint / "README.md", model_card(meta, checkpoint.name))


def _metrics_of(run: RoundRun, path: str, heldout: list[Example], bon_rows: list[tuple]) -> dict:
    model, tokenizer, _ = load_checkpoint(path, resolve_device("auto"))
    options = {"neutral_as_correct": run.settings.neutral_as_correct,
               "max_length": within_positions(model, run.settings.max_length)}
    metrics = (evaluate_examples(model, tokenizer, heldout, bootstrap=BOOTSTRAP_SAMPLES, **options)
               if heldout else {})
    if metrics:
        # How they were measured, kept with them: `prm eval` reproduces them only with both. Not
        # alone: a round with no held-out labels measured nothing (see _latest_measurement).
        metrics |= options
    solutions = [PrmSolution(str(pid), text, steps, answer, truth) for pid, text, steps, answer, truth in bon_rows]
    if solutions:
        scores = list(iter_scores(model, tokenizer, solutions, **options))
        metrics["best_of_n"] = best_of_n(solutions, scores, bootstrap=BOOTSTRAP_SAMPLES)
    return metrics


def _promote(run: RoundRun) -> None:
    with run.session() as session:
        round_ = session.get(Round, run.round_id)
        assert round_ is not None
        candidate = _round_version(session, run)
        ok, why = passes(run.settings, round_.metrics.get("candidate"), round_.metrics.get("served"))
        now = utcnow()
        candidate.passed = ok
        if ok:
            # Both flips in one transaction: readers see the old model or the new one.
            session.execute(update(ModelVersion).where(
                ModelVersion.project_id == run.project_id, ModelVersion.is_served.is_(True)
            ).values(is_served=False))
            session.flush()
            candidate.is_served = True
            candidate.promoted_at = now
        session.flush()
        failpoint("promote.decided")
        lease.advance(session, run.round_id, run.owner, RoundStage.promote, RoundStage.score,
                      promoted=ok, message=("promoted: " if ok else "not promoted: ") + why,
                      metrics={**round_.metrics, "rule": why, "passed": ok},
                      percent=STAGE_START[RoundStage.score])


def _round_version(session: Session, run: RoundRun) -> ModelVersion:
    version = session.scalar(select(ModelVersion).where(ModelVersion.round_id == run.round_id))
    assert version is not None, "a trained round has a model version"
    return version


# -- score (select and enqueue: app.rounds.picking) -------------------------------------------

UNIFORM_MODE = "the project's selector mode is uniform"


def _latest_measurement(metrics: dict[str, Any], selector: ModelVersion) -> dict | None:
    """The selector's held-out metrics from this round when it measured that model (the served
    one, on this round's larger held-out set), else from the round that trained it."""
    if metrics.get("served_version_id") == selector.id and metrics.get("served"):
        return metrics["served"]
    return selector.metrics


def _record_selector(session: Session, run: RoundRun, metrics: dict[str, Any], recorded: dict[str, Any]) -> None:
    session.execute(update(Round).where(Round.id == run.round_id, Round.lease_owner == run.owner).values(
        metrics={**metrics, "selector": recorded}))


def _score(run: RoundRun) -> None:
    mode = run.settings.selector_mode
    with run.session() as session:
        selector = selector_version(session, run.settings)
        if selector is None:
            if mode == SelectorMode.uniform:
                _record_selector(session, run, run.metrics(session),
                                 {"mode": mode.value, "version_id": None, "uniform_because": UNIFORM_MODE})
            why = UNIFORM_MODE if mode == SelectorMode.uniform else "no model served yet"
            lease.advance(session, run.round_id, run.owner, RoundStage.score, RoundStage.select,
                          message=f"picking uniformly: {why}", percent=STAGE_START[RoundStage.select])
            return
        # The pool is scored even when the picks are drawn uniformly: routing compares machine
        # labels with these step scores, and the picks inspector shows how convincing each was.
        metrics = run.metrics(session)
        ready, why = (False, UNIFORM_MODE) if mode == SelectorMode.uniform else selector_ready(
            run.settings, _latest_measurement(metrics, selector))
        if ready and mode == SelectorMode.fixed and run.settings.selector_version_id is None:
            # The first served model that ranks well enough becomes the fixed selector, for this
            # round and the next.
            session.execute(update(RoundSettings).where(
                RoundSettings.project_id == run.project_id, RoundSettings.selector_version_id.is_(None)
            ).values(selector_version_id=selector.id))
        recorded = {"mode": mode.value, "version_id": selector.id} | ({} if ready else {"uniform_because": why})
        _record_selector(session, run, metrics, recorded)
        version_id, path = selector.id, selector.path
        total = pool.count_unscored(session, run.project_id, version_id)
        run.progress(session, RoundStage.score, 0, f"scoring {total} solutions")
    model, tokenizer, _ = load_checkpoint(path, resolve_device("auto"))
    s, done = run.settings, 0
    # One scoring stream over the whole pool, read from the database a page at a time, so that
    # the scorer tokenises the next solutions while the device computes (a call per page left the
    # device idle while each page was read, tokenised and saved). Its chunks are a page, not the
    # default 4,096 solutions, so that a kill, a cancel or a lost lease wastes at most about three
    # pages of scoring (one tokenising, one computing, one being read back).
    # Scores come back in input order, so the ids queue up beside the solutions.
    ids: deque[int] = deque()

    def unscored() -> Iterator[PrmSolution]:
        after = 0
        while True:
            with run.session() as session:
                page = pool.unscored_chunk(session, run.project_id, version_id, after, SCORE_CHUNK)
            if not page:
                return
            for sid, pid, steps, text in page:
                ids.append(sid)
                yield PrmSolution(str(pid), text, steps)
            after = page[-1][0]

    stream = iter_scores(model, tokenizer, unscored(), max_length=s.max_length, chunk_size=SCORE_CHUNK,
                         neutral_as_correct=s.neutral_as_correct)
    # Closed on the way out, so that the tokenising thread ends with the stage rather than when
    # the traceback holding the stream is dropped.
    with contextlib.closing(stream):
        for batch in in_chunks(stream, SCORE_CHUNK):
            rows = [(ids.popleft(), score.product if s.score_kind == ScoreKind.product else score.minimum,
                     score.step_scores) for score in batch]
            done += len(rows)
            with run.session() as session:
                # First, so that a worker whose lease has lapsed writes nothing.
                run.progress(session, RoundStage.score, done / max(total, 1), f"scored {done} of {total}")
                pool.save_scores(session, version_id, rows)
            failpoint("score.chunk")
    with run.session() as session:
        lease.advance(session, run.round_id, run.owner, RoundStage.score, RoundStage.select,
                      percent=STAGE_START[RoundStage.select],
                      message="selecting" if ready else f"picking uniformly: {why}")


STAGES = {
    RoundStage.autolabel: _autolabel,
    RoundStage.snapshot: _snapshot,
    RoundStage.train: _train,
    RoundStage.evaluate: _evaluate,
    RoundStage.promote: _promote,
    RoundStage.score: _score,
    RoundStage.select: select_stage,
    RoundStage.enqueue: enqueue_stage,
}
