"""In Chromium: the overview's chart counts reach a sighted keyboard user, not a mouse alone, and
names as the browser computes them (tests/test_control_names.py checks the markup over HTTP)."""

from __future__ import annotations

import os
import re

from playwright.sync_api import Page, expect

from app.db import session_scope
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from tests.browser.conftest import login
from tests.conftest import make_user

FOCUSED_ID = "document.activeElement && document.activeElement.id"


def _tab_to(page: Page, element_id: str, most: int = 80) -> None:
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate(FOCUSED_ID) == element_id:
            return
    raise AssertionError(f"Tab never reached #{element_id}")


def _shown(page: Page, selector: str) -> bool:
    """Drawn where it stands: a visually hidden table keeps its layout box, clipped to nothing."""
    return page.locator(selector).evaluate(
        "e => getComputedStyle(e).clipPath === 'none' && getComputedStyle(e).position === 'static'")


def test_tab_shows_each_charts_counts_and_the_demo_badge_stays_out_of_the_heading(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        project = create_project(session, ProjectCreate(name="MATH-500 demo"), is_demo=True)
    make_user(session_factory, "mona", "manager")
    login(page, "mona", f"/manage/projects/{project.id}")

    expect(page.get_by_role("heading", level=1)).to_have_accessible_name("MATH-500 demo")
    expect(page.locator(".page-header .badge", has_text="demo")).to_be_visible()

    hours = "#chart-hours-values"
    assert not _shown(page, hours), "hidden until the keyboard reaches it"
    _tab_to(page, "chart-days-values")
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED_ID) == "chart-hours-values", "the hourly table comes next"
    assert _shown(page, hours)
    box = page.locator(hours).bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 24 * 10, box
    expect(page.locator(hours).get_by_role("row")).to_have_count(25)
    expect(page.locator(hours).locator("caption")).to_have_text("Labels per hour, last 24 hours")
    if shot := os.environ.get("CONTROL_NAMES_SHOT"):
        page.locator("section.card", has=page.locator(hours)).screenshot(path=shot)
    page.keyboard.press("Tab")
    assert not _shown(page, hours), "and hidden again once focus moves on"
    expect(page.get_by_text(re.compile(r"or press Tab to reach a table of every hour's count"))).to_be_visible()
