"""Where the focus goes on the labeling page as a labeler on the keyboard rates: it follows the
cursor, and ends on Submit when Enter is what the page says submits."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user

GOOD = "+1: correct, advances"


def _open(page: Page, session_factory, steps: list[str]) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, steps)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()


def test_without_single_keys_the_last_rating_hands_enter_to_submit(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Let $x = 2$.", "So $2x = 4$.", "Then $x + 2 = 4$.", "# Answer\n\n4"])
    page.get_by_role("checkbox", name="Single-key shortcuts").click()
    steps = page.locator("#steps > .step")
    for step in range(4):
        steps.nth(step).get_by_role("button", name=GOOD, exact=True).focus()
        page.keyboard.press("Space")
    announce = page.locator("#announce")
    expect(announce).to_have_text("Step 4 rated +1. All 4 steps rated, no error. Press Enter to submit.")
    # What the page says is true: Enter submits, not the +1 of step 4 again.
    submit = page.locator("#finish-submit")
    expect(submit).to_be_focused()
    screenshot(page, "a11y_keys_off_submit_focused.png")

    # Going back to change a rating stays open: ↑ leads to a rating, and the change ends on
    # Submit again.
    page.keyboard.press("ArrowUp")
    okay = steps.nth(2).get_by_role("button", name="0: correct, no progress", exact=True)
    expect(steps.nth(2).get_by_role("button", name=GOOD, exact=True)).to_be_focused()
    page.keyboard.press("Tab")
    expect(okay).to_be_focused()
    page.keyboard.press("Space")
    expect(okay).to_have_attribute("aria-pressed", "true")
    expect(submit).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text("Saved.")


def test_with_single_keys_the_focus_follows_the_cursor(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps_text = [f"Step {n}: since $x_{{{n}}} = {n}$, the sum grows by {n} again and again." for n in range(1, 9)]
    _open(page, session_factory, [*steps_text, "# Answer\n\n36"])
    page.set_viewport_size({"width": 1280, "height": 720})
    steps = page.locator("#steps > .step")
    expect(steps.first).to_be_focused()
    for _ in steps_text:
        page.keyboard.press("1")
    current = steps.nth(8)
    expect(current).to_have_attribute("aria-current", "step")
    # On the step the keys act on, on screen, where Tab and a screen reader go on from.
    expect(current).to_be_focused()
    expect(current).to_be_in_viewport()
    page.keyboard.press("ArrowUp")
    expect(steps.nth(7)).to_be_focused()
    # A control the labeler is using keeps the focus.
    page.locator("#flag").focus()
    page.keyboard.press("1")
    expect(page.locator("#flag")).to_be_focused()
