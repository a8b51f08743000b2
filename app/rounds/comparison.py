"""Compare two model versions of a project on the same held-out labels, as they stand now.

A round measures its candidate and the served model on the round's snapshot; versions made in
different rounds were measured on different snapshots, and their intervals overlap more often
than the models differ. Here both are scored on the project's current held-out labels, and each
metric's difference comes with a paired bootstrap interval (active_learning.evaluate). Measuring
loads both checkpoints and scores every held-out solution twice, so a worker does it, as it runs
rounds (app.rounds.worker), or the CLI in its own process; a request only queues it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from active_learning.config import BOOTSTRAP_SAMPLES
from active_learning.data import Solution as PrmSolution
from active_learning.data import load_examples
from app.db import session_scope
from app.errors import BadInput, NotFound
from app.models import ComparisonStatus, ModelComparison, ModelVersion, utcnow
from app.rounds import pool
from app.rounds.heldout import best_of_n_rows, heldout_records, heldout_texts
from app.rounds.lease import Heartbeat, LeaseLost, stale_claim, worker_name
from app.rounds.service import round_settings

log = logging.getLogger("stepwise.rounds")

MAX_ATTEMPTS = 3
MESSAGE_CHARS = 500


def project_version(session: Session, project_id: int, version_id: int) -> ModelVersion:
    version = session.get(ModelVersion, version_id)
    if version is None or version.project_id != project_id:
        raise NotFound(f"no model version {version_id} in this project")
    return version


def request_comparison(session: Session, project_id: int, a_id: int, b_id: int,
                       user_id: int | None = None) -> ModelComparison:
    """Queue a comparison of versions `a_id` and `b_id`; the one already waiting for the same
    pair if there is one, so that a second click does not measure twice."""
    if a_id == b_id:
        raise BadInput("compare two different model versions", field="version_b_id")
    for version_id in (a_id, b_id):
        project_version(session, project_id, version_id)
    waiting = session.scalar(select(ModelComparison).where(
        ModelComparison.project_id == project_id, ModelComparison.version_a_id == a_id,
        ModelComparison.version_b_id == b_id,
        ModelComparison.status.in_((ComparisonStatus.queued, ComparisonStatus.running)),
    ))
    if waiting is not None:
        return waiting
    comparison = ModelComparison(project_id=project_id, version_a_id=a_id, version_b_id=b_id, requested_by=user_id)
    session.add(comparison)
    session.flush()
    return comparison


def _claimable():  # type: ignore[no-untyped-def]
    return or_(
        ModelComparison.status == ComparisonStatus.queued,
        (ModelComparison.status == ComparisonStatus.running) & (ModelComparison.claimed_at < utcnow() - stale_claim()),
    )


def _held(comparison_id: int, owner: str):  # type: ignore[no-untyped-def]
    return ((ModelComparison.id == comparison_id) & (ModelComparison.status == ComparisonStatus.running)
            & (ModelComparison.claimed_by == owner))


def _renew_claim(comparison_id: int, owner: str) -> Callable[[Session], None]:
    def beat(session: Session) -> None:
        renewed = session.execute(
            update(ModelComparison).where(_held(comparison_id, owner)).values(claimed_at=utcnow())
        ).rowcount
        if not renewed:
            raise LeaseLost(f"comparison {comparison_id} is no longer ours")

    return beat


def runnable_comparisons(session: Session) -> list[int]:
    return list(session.scalars(select(ModelComparison.id).where(_claimable()).order_by(ModelComparison.id)))


def run_comparison(factory: sessionmaker[Session], comparison_id: int) -> ComparisonStatus | None:
    """Claim the comparison and measure it; None when another worker holds it or it is over,
    or took it while this one measured."""
    owner = worker_name()
    with session_scope(factory) as session:
        claimed = session.execute(
            update(ModelComparison).where(ModelComparison.id == comparison_id, _claimable())
            .values(status=ComparisonStatus.running, claimed_at=utcnow(), claimed_by=owner,
                    attempts=ModelComparison.attempts + 1)
        ).rowcount
        if not claimed:
            return None
        comparison = session.get(ModelComparison, comparison_id)
        assert comparison is not None
        if comparison.attempts > MAX_ATTEMPTS:
            return _finish(session, comparison, ComparisonStatus.failed,
                           f"its workers died {comparison.attempts - 1} times while measuring")
        project_id, ids = comparison.project_id, (comparison.version_a_id, comparison.version_b_id)
    try:
        with Heartbeat(factory, stale_claim().total_seconds() / 3, _renew_claim(comparison_id, owner),
                       f"claim-comparison-{comparison_id}"):
            snapshot, heldout, results = _measure_now(factory, project_id, *ids)
    except BadInput as exc:
        status, message = ComparisonStatus.failed, exc.message
    except Exception as exc:  # noqa: BLE001 - recorded with its cause, for the researcher to see
        log.exception("comparison %s failed", comparison_id)
        status, message = ComparisonStatus.failed, " ".join("".join(traceback.format_exception_only(exc)).split())
    except BaseException:
        # Interrupted (Ctrl-C on `rounds compare`, a worker told to stop): back in the queue, not
        # left "running" until its claim went stale, which a second `rounds compare` would wait out.
        with session_scope(factory) as session:
            session.execute(update(ModelComparison).where(_held(comparison_id, owner))
                            .values(status=ComparisonStatus.queued, claimed_at=None, claimed_by=None))
        raise
    else:
        status, message = ComparisonStatus.done, ""
    with session_scope(factory) as session:
        comparison = session.scalar(select(ModelComparison).where(_held(comparison_id, owner)).with_for_update())
        if comparison is None:
            # Another worker took it while this one measured (renewals held up past the claim),
            # or it ended meanwhile: the holder records its own results.
            log.info("comparison %s: no longer ours", comparison_id)
            return None
        if status == ComparisonStatus.done:
            comparison.snapshot_label_id, comparison.heldout_labels, comparison.results = snapshot, heldout, results
        return _finish(session, comparison, status, message)


def _finish(session: Session, comparison: ModelComparison, status: ComparisonStatus, message: str) -> ComparisonStatus:
    comparison.status = status
    comparison.message = message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS - 1] + "…"
    comparison.finished_at = utcnow()
    return status


def _measure_now(factory: sessionmaker[Session], project_id: int, a_id: int, b_id: int) -> tuple[int, int, dict]:
    """(newest label read, held-out labels, results) of versions `a_id` and `b_id` on the
    held-out labels as they stand; BadInput when there is nothing to measure or a checkpoint
    cannot be loaded."""
    with session_scope(factory) as session:
        paths = [project_version(session, project_id, v).path for v in (a_id, b_id)]
        settings = round_settings(session, project_id)
        options = {"neutral_as_correct": settings.neutral_as_correct, "max_length": settings.max_length}
        snapshot, _ = pool.label_snapshot(session, project_id)
        records = pool.label_records(session, project_id, snapshot or 0)
        held = heldout_texts({r["question"]["problem"] for r in records}, settings.heldout_share)
        heldout = heldout_records(records, held)
        bon_rows = best_of_n_rows(session, project_id, {r["question"]["problem"] for r in heldout})
    examples = load_examples(heldout)
    if not examples:
        raise BadInput(f"the project has no held-out labels yet (its held-out share is {settings.heldout_share:g} "
                       "of the problems): label solutions of more problems")
    return snapshot or 0, len(examples), _measure(paths, examples, bon_rows, options)


def _measure(paths: list[str], examples, bon_rows: list[tuple], options: dict) -> dict:
    # Imported here: torch and transformers cost seconds that listing comparisons never needs.
    from active_learning.evaluate import compare_best_of_n, compare_examples
    from active_learning.model import load_checkpoint, resolve_device
    from active_learning.score import iter_scores, within_positions

    device = resolve_device("auto")
    models = []
    for name, path in zip("ab", paths):
        try:
            models.append(load_checkpoint(path, device)[:2])
        except (OSError, ValueError) as exc:
            raise BadInput(f"version {name.upper()}'s checkpoint at {path} cannot be loaded: {exc}") from None
    # Both read the same windows: the shorter of the two models' positions.
    options = {**options, "max_length": min(within_positions(model, options["max_length"]) for model, _ in models)}
    results = compare_examples(models[0], models[1], examples, bootstrap=BOOTSTRAP_SAMPLES, **options)
    solutions = [PrmSolution(str(pid), text, steps, answer, truth) for pid, text, steps, answer, truth in bon_rows]
    if solutions:
        scores = [list(iter_scores(model, tokenizer, solutions, **options)) for model, tokenizer in models]
        results["best_of_n"] = compare_best_of_n(solutions, scores[0], scores[1], bootstrap=BOOTSTRAP_SAMPLES)
    # How they were measured, kept with them: the project's settings may change after.
    return results | options


def get_comparison(session: Session, comparison_id: int) -> ModelComparison:
    comparison = session.get(ModelComparison, comparison_id)
    if comparison is None:
        raise NotFound(f"no model comparison with id {comparison_id}")
    return comparison


def list_comparisons(session: Session, project_id: int, limit: int = 20) -> list[ModelComparison]:
    return list(session.scalars(
        select(ModelComparison).where(ModelComparison.project_id == project_id)
        .order_by(ModelComparison.id.desc()).limit(limit)
    ))


@dataclass(frozen=True)
class MetricDifference:
    metric: str
    a: float | None
    b: float | None
    difference: float | None
    ci95: list[float] | None

    @property
    def verdict(self) -> str:
        """Which version is better by this metric, when the difference's interval excludes 0."""
        if self.ci95 is None:
            return "no interval" if self.difference is not None else "undefined"
        low, high = self.ci95
        return "A better" if low > 0 else "B better" if high < 0 else "no clear difference"


SHOWN = (("step_auroc", "step AUROC"), ("step_f1", "step F1"), ("first_error_f1", "first-error F1"))


def metric_differences(results: dict) -> list[MetricDifference]:
    """A comparison's headline metrics, a row each, as the page and the CLI show them."""
    rows = [
        MetricDifference(label, results["a"].get(key), results["b"].get(key), results["difference"].get(key),
                         (results.get("difference_ci95") or {}).get(key))
        for key, label in SHOWN
    ]
    bon = results.get("best_of_n")
    if bon:
        rows.append(MetricDifference(f"best-of-{bon['n']} accuracy ({bon['problems']} problems)", bon["a"], bon["b"],
                                     bon["difference"], bon.get("difference_ci95")))
    return rows


@dataclass(frozen=True)
class ComparisonView:
    comparison: ModelComparison
    # The metrics, once measured.
    rows: list[MetricDifference]


def comparison_views(session: Session, project_id: int, limit: int) -> list[ComparisonView]:
    return [ComparisonView(c, metric_differences(c.results) if c.status == ComparisonStatus.done else [])
            for c in list_comparisons(session, project_id, limit)]
