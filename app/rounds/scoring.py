"""Scoring candidate solutions with a stored model version, for reranking from other systems.

Loading a checkpoint costs seconds, so each process keeps the last few it loaded; a lock per
process keeps one request at a time on the CPU or GPU, where concurrent forward passes would
only compete for the same cores. The requests waiting for it are bounded (STEPWISE_SCORING_QUEUE,
`turns`): each holds a thread that pages and the API need too.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from active_learning.data import Solution
from active_learning.model import load_checkpoint, resolve_device
from active_learning.score import SolutionScore, score_solutions, within_positions
from app.db import end_reads
from app.errors import Busy, Conflict, NotFound
from app.models import ModelVersion, RoundSettings
from app.models.round_settings import DEFAULT_MAX_LENGTH
from app.rounds.schemas import CandidateScore, ScoreRequest, ScoreResponse

logger = logging.getLogger(__name__)

LOADED_MODELS = 2
# path -> (the checkpoint's files as they were when loaded, model, tokenizer)
_loaded: OrderedDict[str, tuple[tuple, Any, Any]] = OrderedDict()
_lock = threading.Lock()


def _files(path: str) -> tuple:
    """What tells one checkpoint from another written to the same directory: each file's size,
    modification time and inode. A `cp` over the weights keeps the inode but not the time; a
    round rewritten by `save_pretrained` makes new files."""
    stats = []
    try:
        files = sorted(Path(path).iterdir())
    except OSError:  # the directory gone since it was looked at: loading it says so
        return ()
    for file in files:
        try:
            stat = file.stat()
        except FileNotFoundError:  # removed while listed: the next request sees it gone
            continue
        stats.append((file.name, stat.st_size, stat.st_mtime_ns, stat.st_ino))
    return tuple(stats)


def _model(path: str, device: str) -> tuple[Any, Any]:
    # The cached model holds its weights in this process's memory (load_checkpoint copies them out
    # of the file), so a changed file cannot crash it; it would only answer for a checkpoint that
    # is no longer there. So a changed checkpoint is loaded again, or refused as it is now.
    files = _files(path)
    if path in _loaded:
        loaded_files, model, tokenizer = _loaded[path]
        if loaded_files == files:
            _loaded.move_to_end(path)
            return model, tokenizer
        del _loaded[path]
        logger.info("checkpoint %s changed since it was loaded: loading it again", path)
    model, tokenizer, _ = load_checkpoint(path, device)
    _loaded[path] = (files, model, tokenizer)
    while len(_loaded) > LOADED_MODELS:
        _loaded.popitem(last=False)
    return model, tokenizer


# Seconds a client told the scorer is busy waits before trying again.
BUSY_RETRY_AFTER_S = 5


def score_candidates(session: Session, version_id: int, request: ScoreRequest,
                     turns: threading.BoundedSemaphore) -> ScoreResponse:
    version = session.get(ModelVersion, version_id)
    if version is None:
        raise NotFound(f"model version {version_id} not found")
    if not (Path(version.path) / "config.json").is_file():
        raise Conflict(f"model version {version_id}'s checkpoint is no longer on this server")
    settings = session.get(RoundSettings, version.project_id)
    max_length = settings.max_length if settings is not None else DEFAULT_MAX_LENGTH
    # By default as the project's rounds score their pool, so that these scores are its picks'.
    neutral_as_correct = request.neutral_as_correct
    if neutral_as_correct is None:
        neutral_as_correct = settings.neutral_as_correct if settings is not None else True
    end_reads(session)
    solutions = [Solution("request", request.problem, candidate.steps) for candidate in request.solutions]
    if not turns.acquire(blocking=False):
        raise Busy("the scorer is busy: as many score requests as this server holds at once "
                   "(STEPWISE_SCORING_QUEUE) are being scored or waiting; retry in a few seconds",
                   BUSY_RETRY_AFTER_S)
    try:
        with _lock:
            try:
                model, tokenizer = _model(version.path, resolve_device("auto"))
            except ValueError as e:
                # What is wrong names files on the server: logged here, not told to the client.
                logger.error("model version %s: %s", version_id, e)
                raise Conflict(f"model version {version_id}'s checkpoint cannot be loaded; the server log says "
                               "why") from None
            max_length = within_positions(model, max_length)
            scores = score_solutions(model, tokenizer, solutions, max_length=max_length,
                                     neutral_as_correct=neutral_as_correct)
    finally:
        turns.release()
    return ScoreResponse(model_version_id=version_id, neutral_as_correct=neutral_as_correct, max_length=max_length,
                         solutions=[_candidate(s) for s in scores])


def _candidate(score: SolutionScore) -> CandidateScore:
    # No step read: the empty product, 1, would be the best score there is for a candidate the
    # model never saw.
    read = any(step is not None for step in score.step_scores)
    return CandidateScore(
        step_scores=score.step_scores,
        product=float(score.product) if read else None,
        minimum=score.minimum if read else None,
        truncated=score.truncated,
    )
