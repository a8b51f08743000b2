"""A round resumed after an upgrade runs with the settings it started with; a setting added
since takes what its project had before that setting existed."""

from __future__ import annotations

from app.models import RoundSettings, SelectorMode
from app.rounds.run import frozen_settings, settings_dict


def test_a_snapshot_from_before_the_selector_settings_keeps_the_old_behaviour() -> None:
    saved = {k: v for k, v in settings_dict(RoundSettings(
        picks_per_round=40, per_problem_cap=2, wrong_share=0.7, control_share=0.1, qc_share=0.0,
        duplicate_similarity=0.9, score_kind="product", neutral_as_correct=True, base_model="tiny",
        train_epochs=1.0, learning_rate=1e-3, max_length=256, min_train_labels=10, heldout_share=0.2,
        promote_metric="step_auroc", promote_min=0.5, promote_margin=0.0, promote_min_heldout=50,
    )).items() if k not in ("selector_mode", "selector_min_step_auroc", "selector_version_id")}
    frozen = frozen_settings(saved)
    assert frozen.picks_per_round == 40 and frozen.wrong_share == 0.7
    assert frozen.selector_mode == SelectorMode.retrain and frozen.selector_min_step_auroc is None
    later = frozen_settings({**saved, "selector_mode": "fixed", "selector_min_step_auroc": 0.9})
    assert later.selector_mode == SelectorMode.fixed and later.selector_min_step_auroc == 0.9
