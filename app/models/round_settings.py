from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, Enum, Float, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, JSONDocument, UTCDateTime, utcnow


# Tokens the PRM reads of a solution at once; the score endpoint's too for a project that has
# never saved its settings.
DEFAULT_MAX_LENGTH = 1024


class ScoreKind(enum.StrEnum):
    # The paper's choice: the probability that every step is correct.
    product = "product"
    minimum = "minimum"


class SelectorMode(enum.StrEnum):
    # No model ranks: rounds draw their picks uniformly. The default for new projects: no
    # condition our experiments measured made ranked picks teach the next PRM more than uniform
    # ones; with half the labels chosen by a selector that ranked well they were level, with
    # three quarters they hurt (docs/prm.md, "When choosing pays").
    uniform = "uniform"
    # The paper's protocol: one selector, trained once, ranks every round's pool. Retraining it
    # each round is the variant the paper's authors could not make work, and the one our
    # simulation measured at a quarter of uniform's efficiency (docs/prm.md).
    fixed = "fixed"
    retrain = "retrain"


class PromoteMetric(enum.StrEnum):
    step_auroc = "step_auroc"
    first_error_f1 = "first_error_f1"
    best_of_n = "best_of_n"


class RoundSettings(Base):
    """How a project's rounds train, judge, select and start. One row per project, made with
    the defaults on first use."""

    __tablename__ = "round_settings"
    __table_args__ = (
        CheckConstraint("picks_per_round >= 1 AND picks_per_round <= 100000", name="picks_range"),
        CheckConstraint("per_problem_cap >= 1", name="cap_range"),
        CheckConstraint("wrong_share >= 0 AND wrong_share <= 1", name="wrong_share_range"),
        CheckConstraint("control_share >= 0 AND control_share <= 1", name="control_share_range"),
        CheckConstraint("qc_share >= 0 AND qc_share <= 1", name="qc_share_range"),
        CheckConstraint("heldout_share > 0 AND heldout_share < 1", name="heldout_range"),
        CheckConstraint("selector_min_step_auroc IS NULL OR (selector_min_step_auroc >= 0 AND "
                        "selector_min_step_auroc <= 1)", name="selector_min_range"),
    )

    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    picks_per_round: Mapped[int] = mapped_column(Integer, default=100)
    per_problem_cap: Mapped[int] = mapped_column(Integer, default=4)
    wrong_share: Mapped[float] = mapped_column(Float, default=0.8)
    control_share: Mapped[float] = mapped_column(Float, default=0.1)
    qc_share: Mapped[float] = mapped_column(Float, default=0.0)
    duplicate_similarity: Mapped[float] = mapped_column(Float, default=0.9)
    score_kind: Mapped[ScoreKind] = mapped_column(
        Enum(ScoreKind, native_enum=False, length=16), default=ScoreKind.product
    )
    neutral_as_correct: Mapped[bool] = mapped_column(Boolean, default=True)
    base_model: Mapped[str] = mapped_column(String(255), default="tiny")
    train_epochs: Mapped[float] = mapped_column(Float, default=3.0)
    learning_rate: Mapped[float] = mapped_column(Float, default=1e-3)
    max_length: Mapped[int] = mapped_column(Integer, default=DEFAULT_MAX_LENGTH)
    min_train_labels: Mapped[int] = mapped_column(Integer, default=20)
    heldout_share: Mapped[float] = mapped_column(Float, default=0.2)
    promote_metric: Mapped[PromoteMetric] = mapped_column(
        Enum(PromoteMetric, native_enum=False, length=16), default=PromoteMetric.step_auroc
    )
    # Promote when the lower bound of the metric's 95% bootstrap interval reaches promote_min,
    # the metric is no more than promote_margin below the served model's on the same held-out
    # data, and it was judged on at least promote_min_heldout held-out labels (best-of-N:
    # problems); small held-out sets let a chance-level model through.
    promote_min: Mapped[float] = mapped_column(Float, default=0.5)
    promote_margin: Mapped[float] = mapped_column(Float, default=0.0)
    promote_min_heldout: Mapped[int] = mapped_column(Integer, default=50)
    # Which model ranks the pool: none in uniform mode, in fixed mode the pinned version (the
    # first served one that clears selector_min_step_auroc when none is pinned yet), in retrain
    # mode the served one. Rounds train and promote in every mode.
    selector_mode: Mapped[SelectorMode] = mapped_column(
        Enum(SelectorMode, native_enum=False, length=16), default=SelectorMode.uniform
    )
    selector_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("model_versions.id", ondelete="SET NULL"), index=True
    )
    # In fixed and retrain modes, rounds draw uniformly until the selector's held-out step AUROC
    # (the lower end of its 95% interval, on at least promote_min_heldout labels) reaches this;
    # null: any served model ranks. 0.9 is a judgement, not a measured threshold: with selectors
    # below it, every way of choosing lost to uniform, and the selectors that were level ranked
    # at 0.88-0.96 (docs/prm.md).
    selector_min_step_auroc: Mapped[float | None] = mapped_column(Float, default=0.9)
    # Solutions whose machine sources agree with each other and with the served PRM train the
    # next model on their machine labels, with no human label; off: only humans' labels train.
    accept_agreeing_machine_labels: Mapped[bool] = mapped_column(Boolean, default=False)
    # The round's first stage labels up to autolabel_limit pool solutions by rollouts from this
    # generator (a directory, hub id, vllm:MODEL or an OpenAI-compatible URL; null: off), as
    # `stepwise autolabel` does, so that routing and training see them the same round.
    autolabel_generator: Mapped[str | None] = mapped_column(String(500))
    autolabel_rollouts: Mapped[int] = mapped_column(Integer, default=8)
    autolabel_method: Mapped[str] = mapped_column(String(16), default="mc")
    autolabel_limit: Mapped[int] = mapped_column(Integer, default=200)
    every_new_labels: Mapped[int | None] = mapped_column(Integer)
    schedule_hours: Mapped[float | None] = mapped_column(Float)
    # Training weight per label source ({"human": 1, "rollout": 0.5}); a source left out weighs
    # 0, and null means human labels only (active_learning.data.DEFAULT_SOURCE_WEIGHTS).
    source_weights: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
