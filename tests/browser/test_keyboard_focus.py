"""The labeling page as a keyboard-only labeler drives it: the focus is where the cursor is, in
sight, and never on a stop that offers nothing; the keys a dialog names work in all of it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import add_solution, login, watched_page
from tests.conftest import make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.test_gate import _gold

GOOD = "+1: correct, advances"
KEYS_OFF = "Single-key shortcuts"
GUIDELINES = "# Grading\n\n" + "\n\n".join(f"Rule {n}: rate each step on its own merits." for n in range(1, 60))


def _open(page: Page, session_factory, mode: str, steps: list[str], **project) -> None:  # type: ignore[no-untyped-def]
    made = make_project(session_factory, labeling_mode=mode, **project)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, made, steps)
    login(page, "lena", f"/label/{made.id}")
    expect(page.locator("#task-view")).to_be_visible()


@pytest.mark.parametrize("mode", ["full", "first_error"])
def test_a_rating_made_on_its_button_takes_the_focus_to_the_next_step_to_rate(page: Page, session_factory, mode: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, mode, ["Let $x = 2$.", "So $x + x = 4$.", "# Answer\n\n4"])
    page.get_by_role("checkbox", name=KEYS_OFF).click()
    steps = page.locator("#steps > .step")
    announce = page.locator("#announce")
    steps.nth(0).get_by_role("button", name=GOOD, exact=True).focus()
    page.keyboard.press("Enter")
    expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    # Where the cursor went: ↓ and ↑ go on from the step in focus, not from one left behind.
    expect(steps.nth(1).get_by_role("button", name=GOOD, exact=True)).to_be_focused()
    if mode == "full":
        page.keyboard.press("ArrowDown")
        expect(announce).to_have_text("Step 3 of 3, not rated: Answer: 4")
        page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(announce).to_have_text("Step 1 of 3, rated +1: Let x = 2.")
    expect(steps.nth(0).get_by_role("button", name=GOOD, exact=True)).to_be_focused()


def test_with_single_keys_a_rating_made_on_its_button_takes_the_focus_to_the_next_step(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, "full", ["Let $x = 2$.", "So $x + x = 4$.", "# Answer\n\n4"])
    steps = page.locator("#steps > .step")
    # Out of the Tab order with single keys on, the buttons are still a screen reader's to press.
    steps.nth(0).get_by_role("button", name=f"{GOOD} (key 1)", exact=True).focus()
    page.keyboard.press("Enter")
    expect(steps.nth(1)).to_be_focused()
    # A pointer's click too, without single keys: the focus leaves the button for the step, where
    # Enter submits.
    page.get_by_role("checkbox", name=KEYS_OFF).click()
    steps.nth(1).get_by_role("button", name=GOOD, exact=True).click()
    expect(steps.nth(2)).to_be_focused()
    steps.nth(2).get_by_role("button", name=GOOD, exact=True).click()
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text("Saved.")


def _step_in_sight(page: Page) -> dict[str, float]:
    return page.evaluate(
        """() => {
          const step = document.activeElement;
          const bar = document.querySelector(".topbar").getBoundingClientRect();
          return {top: step.getBoundingClientRect().top, bar: bar.bottom, height: innerHeight,
                  focused: step.matches("#steps > .step:first-child")};
        }"""
    )


def test_at_200_percent_zoom_a_new_solution_scrolls_its_focused_step_into_sight(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full", guidelines=GUIDELINES)
    make_user(session_factory, "lena", "labeler")
    statement = "A train leaves at noon and runs at $80$ km/h. " * 4 + "How far has it gone at $3$ pm?"
    for priority in (2.0, 1.0):
        steps = ["It runs for $3$ hours.", "# Answer\n\n240"]
        add_solution(session_factory, project, steps, statement=statement, priority=priority)
    with watched_page(browser, live_server, viewport={"width": 640, "height": 400}, device_scale_factor=2) as page:
        login(page, "lena", f"/label/{project.id}")
        expect(page.locator("#guidelines-dialog")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#steps > .step").first).to_be_focused()
        seen = _step_in_sight(page)
        assert seen["focused"] and seen["bar"] <= seen["top"] < seen["height"] - 40, seen
        first = page.locator("#task-ids").text_content() or ""
        page.keyboard.press("1")
        page.keyboard.press("1")
        page.keyboard.press("Enter")
        expect(page.locator("#notice")).to_have_text("Saved.")
        expect(page.locator("#task-ids")).not_to_have_text(first)
        expect(page.locator("#steps > .step").first).to_be_focused()
        seen = _step_in_sight(page)
        assert seen["focused"] and seen["bar"] <= seen["top"] < seen["height"] - 40, seen


def test_on_a_desktop_a_new_solution_keeps_its_problem_in_sight(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, "full", ["Let $x = 2$.", "# Answer\n\n2"])
    expect(page.locator("#steps > .step").first).to_be_focused()
    assert page.evaluate("scrollY") == 0


def test_on_a_phone_a_boxed_answer_is_no_tab_stop(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 390, "height": 844})
    _open(page, session_factory, "full", ["Let $x = 2$.", "# Answer\n\n\\frac{1}{2}"])
    answer = page.locator("#answer")
    expect(answer.locator(".katex")).to_have_count(1)
    # KaTeX's box hangs 2px past its formula: in a box that scrolls, it made the box scroll, and
    # Chromium gives a box that scrolls a Tab stop, one with no name.
    size = answer.evaluate("e => ({scroll: e.scrollWidth, client: e.clientWidth})")
    assert size["scroll"] <= size["client"], size
    page.locator("#steps > .step").first.focus()
    page.keyboard.press("Shift+Tab")
    expect(answer).not_to_be_focused()


def test_the_guidelines_scroll_from_the_keys(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, guidelines=GUIDELINES)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n2"])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#guidelines-dialog")).to_be_visible()
    expect(page.get_by_role("button", name="Got it")).to_be_focused()
    text = page.get_by_role("region", name="Guidelines text")
    expect(text).to_have_attribute("tabindex", "0")

    def top() -> float:
        return text.evaluate("e => e.scrollTop")

    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => document.getElementById('guidelines').scrollTop > 0")
    after_arrow = top()
    page.keyboard.press("PageDown")
    page.wait_for_function(f"() => document.getElementById('guidelines').scrollTop > {after_arrow}")
    page.keyboard.press("End")
    page.wait_for_function("() => { const e = document.getElementById('guidelines'); return e.scrollTop + e.clientHeight >= e.scrollHeight - 1 }")
    page.keyboard.press("Home")
    page.wait_for_function("() => document.getElementById('guidelines').scrollTop === 0")
    # The keys scroll the text, and nothing else: the dialog is still open, Got it in focus.
    expect(page.locator("#guidelines-dialog")).to_be_visible()
    expect(page.get_by_role("button", name="Got it")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#task-view")).to_be_visible()


def test_a_screening_questions_refused_skip_goes_with_the_next_rating(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, screening_items=1, screening_pass_mark=1.0)
    import_bytes(session_factory, project, jsonl([_gold("S1", [1, -1], screening=True)]))
    make_user(session_factory, "lena", "labeler")
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#problem-text")).to_contain_text("Problem S1")
    notice = page.locator("#notice")
    page.keyboard.press("s")
    expect(notice).to_contain_text("Not skipped: screening questions cannot be skipped")
    page.keyboard.press("1")
    expect(page.locator("#progress-text")).to_have_text("1 of 3 steps rated")
    expect(notice).to_have_text("")


def test_ctrl_enter_confirms_the_reason_anywhere_in_its_dialog(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, "full", ["Let $x = 2$.", "# Answer\n\n2"])
    dialog = page.locator("#reason-dialog")
    page.keyboard.press("g")
    expect(dialog).to_be_visible()
    expect(page.locator("#reason-confirm")).to_contain_text("Ctrl Enter")
    cancel = page.get_by_role("button", name="Cancel")
    # No reason yet: it is asked for, not sent, and Ctrl Enter does not cancel.
    cancel.focus()
    page.keyboard.press("Control+Enter")
    expect(dialog).to_be_visible()
    expect(page.locator("#reason-error")).to_be_visible()
    expect(page.locator("#reason-text")).to_be_focused()
    page.locator("#reason-text").fill("Beyond what I know.")
    cancel.focus()
    page.keyboard.press("Control+Enter")
    expect(dialog).to_be_hidden()
    expect(page.locator("#notice")).to_have_text("Saved (give up).")
