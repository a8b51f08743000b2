"""Screening and QC in Chromium: a labeler meets a screening item, is not shown its answers, is
told why no more tasks come; the manager sees the result and admits them. A QC item's gold is
shown after its submit."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import login, screenshot
from tests.conftest import add_solutions, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.test_gate import _gold


def _answer_all_correct(page: Page, project, statement: str) -> None:  # type: ignore[no-untyped-def]
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#problem-text")).to_contain_text(statement)
    for key in "111":
        page.keyboard.press(key)
    page.keyboard.press("Enter")


def test_screening_hides_its_answers_says_why_and_a_manager_admits(page: Page, browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, screening_items=1, screening_pass_mark=1.0, qc_feedback=True)
    import_bytes(session_factory, project, jsonl([_gold("S1", [1, -1], screening=True)]))
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "mona", "manager")

    _answer_all_correct(page, project, "Problem S1")
    # A screening item's answers are not shown, even with QC feedback on: they would reach the
    # next newcomer screened on it.
    expect(page.locator("#empty-view")).to_be_visible()
    expect(page.locator("#notice")).not_to_contain_text("the reference")
    expect(page.locator("#empty-text")).to_contain_text("screening answers did not agree")
    screenshot(page, "labeler_screening_failed.png")

    context = browser.new_context(base_url=live_server, viewport={"width": 1360, "height": 900})
    manager = context.new_page()
    login(manager, "mona", f"/manage/projects/{project.id}")
    card = manager.locator("#screening")
    expect(card).to_contain_text("failed screening")
    expect(card).to_contain_text("0 / 1")
    screenshot(manager, "manager_screening_card.png")
    card.get_by_role("button", name="Admit lena").click()
    expect(manager.locator("#screening")).to_contain_text("admitted")
    context.close()

    page.reload()
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator("#problem-text")).to_contain_text("What is 1+1?")


def test_a_qc_items_gold_is_shown_after_its_submit(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, qc_rate=1.0, qc_feedback=True)
    import_bytes(session_factory, project, jsonl([_gold("Q1", [1, -1])]))
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "lena", "labeler")
    _answer_all_correct(page, project, "Problem Q1")
    expect(page.locator("#notice")).to_contain_text("the reference rated the steps 1: +1, 2: −1")
