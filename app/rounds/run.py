"""One round as a worker runs it: its identity, settings, progress bar and ETA."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import PromoteMetric, Round, RoundSettings, RoundStage, ScoreKind, SelectorMode, utcnow
from app.rounds import lease
from app.rounds.config import WorkerSettings

# Where each stage starts on the round's progress bar; training dominates a round's time.
# Autolabel gets little because it is off unless a generator is named; while on, its message
# counts the solutions labeled.
STAGE_START = {
    RoundStage.autolabel: 0.0,
    RoundStage.snapshot: 1.0,
    RoundStage.train: 3.0,
    RoundStage.evaluate: 62.0,
    RoundStage.promote: 72.0,
    RoundStage.score: 73.0,
    RoundStage.select: 93.0,
    RoundStage.enqueue: 97.0,
    RoundStage.done: 100.0,
}


@dataclass
class RoundRun:
    """What every stage needs: where it writes, whose lease it holds, the frozen settings."""

    factory: sessionmaker[Session]
    round_id: int
    owner: str
    worker: WorkerSettings
    project_id: int
    number: int
    settings: RoundSettings
    total_steps: int = 0
    # Where this attempt took the round up: the ETA extrapolates this attempt's pace only, as
    # the time an earlier attempt spent before it failed or its worker died bought nothing.
    resumed_percent: float = 0.0
    resumed_at: datetime = field(default_factory=utcnow)
    # True once the lease keeper finds the round cancelled or taken over, so that training,
    # which records nothing until it ends, stops at its next step rather than run to the end.
    lease_lost: Callable[[], bool] = lambda: False
    # The stage the ETA last saw, when it first saw it and at what percent: the rest of a stage
    # goes at that stage's own pace, as stages run at paces that the bar's fixed shares only guess.
    stage_seen: tuple[RoundStage, datetime, float] | None = None

    def session(self):  # type: ignore[no-untyped-def]
        return session_scope(self.factory)

    def metrics(self, session: Session) -> dict[str, Any]:
        """What the round's stages have recorded so far; a stage adds to it, never replaces it."""
        return session.scalar(select(Round.metrics).where(Round.id == self.round_id)) or {}

    @property
    def checkpoint_dir(self) -> Path:
        return self.worker.models_dir / f"project-{self.project_id}" / f"round-{self.number}"

    def progress(self, session: Session, stage: RoundStage, within: float, message: str) -> None:
        start, end = STAGE_START[stage], _next_start(stage)
        percent = start + (end - start) * min(max(within, 0.0), 1.0)
        lease.report(session, self.round_id, self.owner, percent=percent, message=message,
                     eta_at=self.eta(percent))

    def eta(self, percent: float) -> datetime | None:
        """When the round should end: the rest of its current stage at that stage's pace so far,
        the later stages at this attempt's pace. None until the stage has moved: an estimate made
        at a stage's start (from the stage before, or the fraction of a second since it began)
        would be passed within seconds. None before training, whose pace the rest follows."""
        now = utcnow()
        stage = _stage_at(percent)
        if self.stage_seen is None or self.stage_seen[0] != stage:
            self.stage_seen = (stage, now, percent)
        _, since, start = self.stage_seen
        end = _next_start(stage)
        done = percent - self.resumed_percent
        if percent < STAGE_START[RoundStage.train] or not start < percent < end or done <= 0:
            return None
        stage_left = (now - since).total_seconds() * (end - percent) / (percent - start)
        pace = (now - self.resumed_at).total_seconds() / done
        return now + timedelta(seconds=stage_left + pace * (100 - end))


def _stage_at(percent: float) -> RoundStage:
    return [stage for stage, start in STAGE_START.items() if start <= percent][-1]


def _next_start(stage: RoundStage) -> float:
    stages = list(STAGE_START)
    return STAGE_START[stages[min(stages.index(stage) + 1, len(stages) - 1)]]


_SETTINGS_FIELDS = [
    c.key for c in RoundSettings.__table__.columns if c.key not in ("project_id", "updated_at")
]


def settings_dict(settings: RoundSettings) -> dict[str, Any]:
    return {k: getattr(settings, k) for k in _SETTINGS_FIELDS}


# Migrations 0009 and 0017 gave existing projects these values, not the new-project defaults.
BEFORE_THEY_EXISTED = {"selector_mode": "retrain", "selector_min_step_auroc": None}


def frozen_settings(saved: dict[str, Any] | None) -> RoundSettings | None:
    """The settings the round started with: editing them mid-round must not change the data
    or training settings of a resumed attempt."""
    if not saved:
        return None
    # A setting added after the round started takes its default, or what its project had before
    # the setting existed where new projects get something else.
    defaults = {c.key: c.default.arg for c in RoundSettings.__table__.columns
                if c.key in _SETTINGS_FIELDS and c.default is not None}
    values = {**defaults, **BEFORE_THEY_EXISTED, **saved}
    values |= {"score_kind": ScoreKind(values["score_kind"]),
               "promote_metric": PromoteMetric(values["promote_metric"]),
               "selector_mode": SelectorMode(values["selector_mode"])}
    return RoundSettings(**values)


def jsonable(value: Any) -> Any:
    """Metrics as plain JSON: numpy numbers become floats, NaN becomes null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    number = float(value)
    return None if math.isnan(number) else number
