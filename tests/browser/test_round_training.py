"""A round's page shows its model's training loss, read from the checkpoint's training log."""

from __future__ import annotations

import json
import math
from pathlib import Path

from playwright.sync_api import Page, expect

from app.db import session_scope
from app.models import ModelVersion, Round, RoundStage, RoundStatus
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user

LAPTOP = {"width": 1440, "height": 900}


def test_round_page_draws_the_training_loss(page: Page, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    steps = list(range(4, 201, 4))
    (tmp_path / "training_log.json").write_text(json.dumps({
        "format": 1, "total_steps": 200,
        "train": [{"step": s, "epoch": s / 50, "loss": 0.4 + 3 * math.exp(-s / 40), "lr": 1e-3} for s in steps],
        "eval": [{"step": 200, "metrics": {"step_auroc": 0.81}}],
    }))
    with session_scope(session_factory) as session:
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.done, stage=RoundStage.done,
                       percent=100.0, metrics={"candidate": {"step_auroc": 0.81}})
        session.add(round_)
        session.flush()
        session.add(ModelVersion(project_id=project.id, round_id=round_.id, path=str(tmp_path),
                                 base="tiny", data_hash="x", train_labels=400, metrics={}))
        round_id = round_.id
    page.set_viewport_size(LAPTOP)
    login(page, "rita", f"/research/rounds/{round_id}")

    chart = page.get_by_role("img", name="Training loss by step")
    expect(chart).to_be_visible()
    expect(chart.locator(".series.loss circle")).to_have_count(len(steps))
    box = chart.bounding_box()
    assert box is not None and box["height"] <= 200, box  # a small chart, not a poster
    expect(page.locator("#training figcaption")).to_contain_text("last: loss 0.4")
    screenshot(page, "research_round_training.png")
