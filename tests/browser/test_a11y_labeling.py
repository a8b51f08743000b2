"""The labeling page for a labeler who zooms, or who hears the page instead of seeing it."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import SCREENSHOTS, add_solution, login, screenshot
from tests.conftest import make_project, make_user

KEYS_OFF = "Single-key shortcuts"


def _open(page: Page, session_factory, steps: list[str], **solution) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, steps, **solution)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()


def _covered(page: Page) -> str | None:
    """What of the sticky top bar and finish bar covers the focused control, if anything."""
    return page.evaluate(
        """() => {
          const box = document.activeElement.getBoundingClientRect();
          const top = document.querySelector(".topbar").getBoundingClientRect();
          const finish = document.getElementById("finish");
          const foot = finish.hidden ? innerHeight : finish.getBoundingClientRect().top;
          if (box.top < top.bottom) return `under the top bar: ${box.top} < ${top.bottom}`;
          if (box.bottom > foot) return `under the finish bar: ${box.bottom} > ${foot}`;
          return null;
        }"""
    )


def test_at_200_percent_zoom_the_sticky_bars_cover_no_focused_control(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps = [f"Step {n}: since $x_{{{n}}} = {n}$, the sum of the first terms grows by {n} again." for n in range(1, 7)]
    _open(page, session_factory, steps)
    page.set_viewport_size({"width": 640, "height": 360})  # 1280x720 at 200%
    for _ in steps:
        page.keyboard.press("1")
    finish = page.locator("#finish")
    expect(finish).to_be_visible()
    # A slim bar on a short screen, not a third of it.
    assert finish.bounding_box()["height"] <= 72
    page.get_by_role("checkbox", name=KEYS_OFF).click()
    page.locator(".step").first.get_by_role("button", name="Go to step 1").focus()
    controls = page.locator("#steps button:not([disabled])")
    stops = controls.count()
    for _ in range(stops - 1):
        page.keyboard.press("Tab")
        assert _covered(page) is None
    screenshot(page, "a11y_zoomed_focus_above_finish.png")
    for _ in range(stops - 1):
        page.keyboard.press("Shift+Tab")
        assert _covered(page) is None


def test_formulas_are_said_as_words_not_as_latex(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    statement = "Define \\[p = \\sum_{k = 1}^\\infty \\frac{1}{k^2}.\\] Find $p$ and $x + 1$. " + "Then more words. " * 20
    _open(page, session_factory, ["So $x = \\frac{15}{3}$.", "# Answer\n\n\\frac{15}{3}"], statement=statement)
    announce = page.locator("#announce")
    expect(announce).to_have_text(re.compile(r"^New solution, 2 steps\. Problem: Define formula Find p and x \+ 1\. Then more words\. .*…$"))
    assert len(announce.text_content()) < 220
    page.keyboard.press("ArrowDown")
    expect(announce).to_have_text("Step 2 of 2, not rated: Answer: 15 over 3")
    page.keyboard.press("ArrowUp")
    expect(announce).to_have_text("Step 1 of 2, not rated: So x = 15 over 3.")
    assert "\\" not in announce.text_content() and "$" not in announce.text_content()


def test_an_empty_queue_is_said_and_so_is_checking_again(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Let $x = 2$.", "# Answer\n\n2"])
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#empty-view")).to_be_visible()
    announce = page.locator("#announce")
    expect(announce).to_have_text(re.compile(r"^Queue empty\. Every solution in this project has the labels it needs\."))
    # Heard: no hidden view holds the live region.
    assert announce.evaluate("e => !e.closest('[hidden]')")
    page.get_by_role("button", name="Check again").click()
    checked = page.locator("#empty-checked")
    expect(checked).to_be_visible()
    expect(checked).to_have_text(re.compile(r"^Still nothing to label — checked at \d\d:\d\d:\d\d\.$"))
    expect(announce).to_have_text(checked.text_content())
    screenshot(page, "a11y_queue_checked_again.png")
    # A second check within the minute reads differently, on the page and in the live region.
    first = checked.text_content()
    page.wait_for_timeout(1100)
    page.get_by_role("button", name="Check again").click()
    expect(checked).not_to_have_text(first)
    expect(announce).to_have_text(checked.text_content())


def test_the_notice_stays_a_live_region_while_it_is_empty(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Let $x = 2$.", "# Answer\n\n2"])
    status = page.locator("#labeler").get_by_role("status")
    # There before it has anything to say, so that what it says next is read out.
    expect(status).to_have_count(1)
    expect(status).to_have_text("")
    page.keyboard.press("u")
    expect(status).to_have_text("Nothing to undo here.")
    expect(status).to_be_visible()
    expect(status).to_have_text("", timeout=6000)
    expect(status).to_have_count(1)
    expect(status).to_be_hidden()


def test_without_single_keys_the_focus_follows_the_arrows(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Let $x = 2$.", "So $x + x = 4$.", "# Answer\n\n4"])
    page.get_by_role("checkbox", name=KEYS_OFF).click()
    steps = page.locator("#steps > .step")

    def rating(step: int, name: str):  # type: ignore[no-untyped-def]
        return steps.nth(step).get_by_role("button", name=name, exact=True)

    good = "+1: correct, advances"
    rating(0, good).focus()
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text("1 of 3 steps rated")
    page.keyboard.press("ArrowDown")
    expect(steps.nth(2)).to_have_attribute("aria-current", "step")
    expect(rating(2, good)).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    # Back on the rated step, at its rating.
    expect(rating(0, good)).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(rating(1, good)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text("2 of 3 steps rated")
    expect(rating(1, good)).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Control+z")
    expect(page.locator("#announce")).to_have_text("Undone: step 2's +1 removed. 2 steps left to rate.")


def test_the_keys_legend_scrolls_clear_of_the_notice(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Let $x = 2$.", "# Answer\n\n2"])
    page.set_viewport_size({"width": 1280, "height": 900})
    panel = page.locator(".task-side")
    assert panel.evaluate("e => e.scrollHeight > e.clientHeight"), "the panel fits: nothing to check"
    # Taller than the screen allows, the panel is a stop for Tab, to scroll it from the keys.
    expect(panel).to_have_attribute("tabindex", "0")
    page.keyboard.press("1")
    page.keyboard.press("s")  # a warning that stays until answered
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Skipping drops the ratings")
    panel.focus()
    page.keyboard.press("End")
    page.wait_for_function("() => { const e = document.querySelector('.task-side'); return e.scrollTop + e.clientHeight >= e.scrollHeight - 1 }")
    last = page.locator(".legend .keys-on > p").last
    expect(last).to_be_visible()
    last_box, notice_box, panel_box = last.bounding_box(), notice.bounding_box(), panel.bounding_box()
    assert last_box["y"] + last_box["height"] <= notice_box["y"], (last_box, notice_box)
    assert last_box["y"] + last_box["height"] <= panel_box["y"] + panel_box["height"]
    screenshot(page, "a11y_legend_clear_of_notice.png")


def test_at_200_percent_zoom_the_cursor_is_shown_clear_of_the_saved_notice(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)  # first error: step 1 is where a solution starts
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n2"], priority=2.0)
    add_solution(session_factory, project, ["Let $y = 3$.", "So $y + 1 = 4$.", "# Answer\n\n4"])
    page.set_viewport_size({"width": 640, "height": 360})  # 1280x720 at 200%
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#announce")).to_contain_text("New solution, 3 steps.")
    notice = page.locator("#notice")
    expect(notice).to_have_text("Saved.")
    # A slim line on a short screen, not a fifth of it.
    assert notice.bounding_box()["height"] <= 40
    # Step 1 starts below the screen: ↓, which cannot move past it yet, shows it, clear of the
    # notice that a fast labeler keeps up.
    page.keyboard.press("ArrowDown")
    step = page.locator("#steps > .step").first
    page.wait_for_function("() => { const b = document.querySelector('#steps > .step').getBoundingClientRect(); return b.top > 0 && b.bottom < innerHeight }")
    page.wait_for_timeout(300)  # the smooth scroll's end
    box, clear = step.bounding_box(), notice.bounding_box()
    assert box["y"] >= 53 and box["y"] + box["height"] <= clear["y"], (box, clear)
    # The screen as the labeler sees it: screenshot() would scroll back to the top.
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "a11y_zoomed_cursor_clear_of_notice.png"))
