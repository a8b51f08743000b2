"""The selector mode, and the bar a selector must clear before rounds rank the pool, set on
the research page."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from app.db import session_scope
from app.rounds.service import round_settings
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user


def test_a_researcher_turns_ranking_on_with_a_bar_and_clears_it(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "bar")
    make_user(session_factory, "rita", "researcher")
    login(page, "rita", f"/research/projects/{project.id}")
    field = page.get_by_label("Rank from step AUROC")
    expect(page.locator("select[name=selector_mode]")).to_have_value("uniform")
    expect(field).to_have_value("0.9")
    expect(page.locator(".pool-guidance")).to_contain_text("so new projects start uniform")
    expect(page.locator("#payoff")).to_contain_text("draw their picks uniformly (selector mode uniform)")
    page.locator("select[name=selector_mode]").select_option("fixed")
    field.fill("1.5")
    page.get_by_role("button", name="Save round settings").click()
    expect(page.locator("#settings [role=alert]")).to_be_visible()
    expect(page.locator("#settings")).to_contain_text("be at most 1")
    with session_scope(session_factory) as session:
        saved = round_settings(session, project.id)
        assert (saved.selector_mode.value, saved.selector_min_step_auroc) == ("uniform", 0.9)
    expect(page.locator("select[name=selector_mode]")).to_have_value("fixed")
    page.get_by_label("Rank from step AUROC").fill("0.85")
    # Waited for from before the click: the page takes saved=1 out of its address as it loads.
    with page.expect_navigation(url="**saved=1**"):
        page.get_by_role("button", name="Save round settings").click()
    expect(page.get_by_label("Rank from step AUROC")).to_have_value("0.85")
    page.get_by_label("Rank from step AUROC").scroll_into_view_if_needed()
    screenshot(page, "research-selector-bar.png")
    page.get_by_label("Rank from step AUROC").fill("")
    # Waited for from before the click: the page takes saved=1 out of its address as it loads.
    with page.expect_navigation(url="**saved=1**"):
        page.get_by_role("button", name="Save round settings").click()
    expect(page.get_by_label("Rank from step AUROC")).to_have_value("")
    with session_scope(session_factory) as session:
        saved = round_settings(session, project.id)
        assert (saved.selector_mode.value, saved.selector_min_step_auroc) == ("fixed", None)
