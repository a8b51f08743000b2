"""The round page of a round that routed machine-labeled solutions: why each went to humans,
and how the machine labels compared with the labelers' on the same picks, wide and narrow."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.labeling.schemas import LabelSubmit
from app.labeling.service import next_task, submit_label
from app.rounds.config import WorkerSettings
from tests.browser.conftest import login, screenshot
from tests.conftest import make_user
from tests.rounds.conftest import routed_project, run_one_round, untrained_checkpoint

pytestmark = pytest.mark.slow


def test_the_round_page_says_why_and_compares_sources(
    page: Page, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    project, ids = routed_project(session_factory, untrained_checkpoint(tmp_path / "prm"))
    round_id = run_one_round(session_factory, project.id, WorkerSettings(models_dir=tmp_path / "models"))
    labeler = make_user(session_factory, "lena", "labeler")
    for ratings in ([1, 1, 1], [1, -1], [1, 1, 1]):
        with session_scope(session_factory) as session:
            task = next_task(session, project.id, labeler.id).task
            submit_label(session, labeler.id, task.assignment_id, LabelSubmit(
                idempotency_key=f"key-{task.assignment_id:06d}", ratings=[{"rating": r} for r in ratings],
                finish_reason="found_error" if -1 in ratings else "solution", total_time_ms=1000))
    make_user(session_factory, "rita", "researcher")

    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, "rita", f"/research/rounds/{round_id}")
    card = page.locator("#sources")
    expect(card.locator("[data-field=pick-labels]")).to_contain_text("3 human")
    expect(card.locator("tr[data-source=rollout]")).to_contain_text("67%")
    first = page.locator("li.pick").first
    expect(first.locator("[data-field=reason]")).to_have_text("machine disagreement")
    expect(first.locator("[data-field=detail]")).to_have_text("rollout and PRM disagree on step 1")
    screenshot(page, "research_round_sources_wide.png")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "research_round_sources_narrow.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
