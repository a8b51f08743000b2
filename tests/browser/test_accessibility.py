"""What a keyboard and screen-reader user of the labeling page and the forms gets."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user


def test_keys_on_the_labeling_page_are_read_out(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "So $x + x = 5$.", "# Answer\n\n5"])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    announce = page.locator("#announce")
    expect(page.get_by_role("heading", name="Problem")).to_be_attached()
    expect(page.get_by_role("heading", name="Solution")).to_be_attached()
    expect(page.get_by_role("button", name="Go to step 2")).to_be_attached()

    page.keyboard.press("1")
    expect(announce).to_have_text("Step 1 rated +1. 2 steps left to rate.")
    page.keyboard.press("3")
    expect(announce).to_have_text("Step 2 rated −1. 1 step left to rate.")
    page.keyboard.press("ArrowUp")
    # Formulas are read as words, not as their LaTeX source.
    expect(announce).to_have_text("Step 2 of 3, rated −1: So x + x = 5.")
    page.keyboard.press("ArrowUp")
    expect(announce).to_have_text("Step 1 of 3, rated +1: Let x = 2.")
    page.keyboard.press("f")
    expect(announce).to_have_text("Step 1 flagged as unsure.")
    page.keyboard.press("u")
    expect(announce).to_have_text("Undone: step 1's flag removed. 1 step left to rate.")

    # The reason a give-up needs is marked, and tied to its message, when it is missing.
    page.keyboard.press("g")
    reason = page.locator("#reason-text")
    expect(reason).to_be_focused()
    expect(reason).to_have_accessible_description("")
    page.locator("#reason-confirm").click()
    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_accessible_description("Please write a reason: it is required.")
    reason.fill("Not sure.")
    expect(reason).not_to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_accessible_description("")


def test_text_fields_show_their_focus_and_a_skip_link_leads_past_the_menu(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    page.goto("/login")
    username = page.locator("input[name=username]")
    # The page puts the cursor in it: compare it without.
    username.evaluate("e => e.blur()")
    blurred = username.evaluate("e => getComputedStyle(e).outlineStyle + ' ' + getComputedStyle(e).borderColor")
    username.focus()
    focused = username.evaluate("e => getComputedStyle(e).outlineStyle + ' ' + getComputedStyle(e).borderColor")
    assert focused != blurred and focused.startswith("solid"), (blurred, focused)

    make_user(session_factory, "lena", "labeler")
    login(page, "lena", "/label")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    screenshot(page, "skip_link.png")
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()


def test_a_button_used_from_the_keyboard_keeps_the_focus(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n2"])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    give_up = page.locator("#give-up")
    give_up.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#reason-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    # The dialog hands the focus back to the button that opened it.
    expect(give_up).to_be_focused()
    page.locator("#flag").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#flag")).to_be_focused()
    expect(page.locator("#flag")).to_have_attribute("aria-pressed", "true")
    # A click leaves the focus on the page, where Enter submits.
    page.locator("#flag").click()
    expect(page.locator("#flag")).not_to_be_focused()


def test_single_key_shortcuts_can_be_turned_off(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "So $x + x = 4$.", "# Answer\n\n4"])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    toggle = page.get_by_role("checkbox", name="Single-key shortcuts")
    expect(toggle).to_be_checked()
    toggle.click()
    progress = page.locator("#progress-text")
    # Dictated or stray letters and digits change nothing, the checkbox having the focus or not.
    for key in ("1", "f", "g"):
        page.keyboard.press(key)
    page.locator("#problem-text").click()
    page.keyboard.press("3")
    expect(progress).to_have_text("0 of 3 steps rated")
    expect(page.locator("#reason-dialog")).to_be_hidden()
    expect(page.locator("#flag-count")).to_have_text("")
    expect(page.locator("#flag kbd")).to_be_hidden()
    expect(page.locator(".keys-off")).to_be_visible()
    screenshot(page, "labeler_single_keys_off.png")

    # Each step's buttons are in the Tab order instead, named without their key.
    page.get_by_role("button", name="Go to step 1").focus()
    page.keyboard.press("Tab")
    good = page.locator(".step").nth(0).get_by_role("button", name="+1: correct, advances", exact=True)
    expect(good).to_be_focused()
    page.keyboard.press("Enter")
    expect(progress).to_have_text("1 of 3 steps rated")
    # Focus follows the cursor to the next step, so that the arrows move from where it is.
    expect(page.locator(".step").nth(1).get_by_role("button", name="+1: correct, advances", exact=True)).to_be_focused()
    # The arrows, Enter and Ctrl Z are no character keys: they still work.
    page.keyboard.press("Control+z")
    expect(progress).to_have_text("0 of 3 steps rated")

    # The choice outlasts a reload, and turned on again the keys rate.
    page.reload()
    expect(page.locator("#task-view")).to_be_visible()
    expect(toggle).not_to_be_checked()
    page.keyboard.press("1")
    expect(progress).to_have_text("0 of 3 steps rated")
    toggle.click()
    page.locator("#problem-text").click()
    page.keyboard.press("1")
    expect(progress).to_have_text("1 of 3 steps rated")
    expect(page.locator(".step").nth(1).get_by_role("button", name="+1: correct, advances (key 1)")).to_be_attached()
    expect(page.locator(".step .rate").first).to_have_attribute("tabindex", "-1")


def test_without_single_key_shortcuts_tab_passes_over_steps_that_cannot_be_rated(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)  # first error: steps wait for the ones above
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, [f"Step {n}: $x = {n}$." for n in range(1, 8)])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    page.get_by_role("checkbox", name="Single-key shortcuts").click()
    numbers = page.locator("#steps button.step-num")

    def stops() -> list[str]:
        return numbers.evaluate_all("nodes => nodes.map(n => n.tabIndex)")

    assert stops() == [0, -1, -1, -1, -1, -1, -1]
    page.locator(".step").nth(0).get_by_role("button", name="+1: correct, advances", exact=True).click()
    page.locator(".step").nth(1).get_by_role("button", name="−1: wrong or misleading", exact=True).click()
    # Two steps rated, the second the first error: the five after it are no stops.
    assert stops() == [0, 0, -1, -1, -1, -1, -1]
    page.get_by_role("checkbox", name="Single-key shortcuts").click()
    assert stops() == [-1] * 7


def test_the_next_solution_is_announced_and_takes_the_focus(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)  # first error: step 2 waits for step 1
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n4"], statement="What is $2 + 2$?", priority=2.0)
    add_solution(session_factory, project, ["So $y = 3$.", "# Answer\n\n3"], statement="What is $1 + 2$?", priority=1.0)
    login(page, "lena", f"/label/{project.id}")
    announce = page.locator("#announce")
    steps = page.locator("#steps > .step")
    expect(announce).to_have_text("New solution, 2 steps. Problem: What is 2 + 2?")
    expect(steps.first).to_be_focused()
    # Nowhere to go yet, the cursor stays on step 1, and says so as a move would.
    page.keyboard.press("ArrowDown")
    expect(announce).to_have_text("Step 1 of 2, not rated: Let x = 2.")
    page.keyboard.press("ArrowUp")
    expect(announce).to_have_text("Step 1 of 2, not rated: Let x = 2.\u00a0")

    # A labeler on Tab alone (single keys off) sends the label and lands on the next one's step 1.
    page.get_by_role("checkbox", name="Single-key shortcuts").click()
    for step in range(2):
        steps.nth(step).get_by_role("button", name="+1: correct, advances", exact=True).click()
    page.keyboard.press("Enter")
    expect(announce).to_have_text("New solution, 2 steps. Problem: What is 1 + 2?")
    expect(steps.first).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Go to step 1")).to_be_focused()
    page.keyboard.press("Tab")
    expect(steps.first.get_by_role("button", name="+1: correct, advances", exact=True)).to_be_focused()


def test_arrows_scroll_a_tall_problem_in_focus(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    tall = "\n\n".join(f"Condition {n}: $a_{{{n}}} = {n}$." for n in range(1, 30))
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n4"], statement=tall, priority=2.0)
    add_solution(session_factory, project, ["Let $x = 1$.", "# Answer\n\n1"], statement="What is $1 + 0$?")
    login(page, "lena", f"/label/{project.id}")
    panel = page.locator("#problem-text")
    steps = page.locator("#steps > .step")
    expect(steps.first).to_be_focused()
    # The panel is the Tab stop before the steps, named as a region of the page.
    page.keyboard.press("Shift+Tab")
    expect(panel).to_be_focused()
    expect(page.get_by_role("region", name="Problem statement")).to_have_attribute("tabindex", "0")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => document.querySelector('#problem-text').scrollTop > 0")
    expect(steps.first).to_have_attribute("aria-current", "step")
    screenshot(page, "labeler_problem_panel_focused.png")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    page.wait_for_function("() => document.querySelector('#problem-text').scrollTop === 0")
    # Out of the panel, the arrows move between steps again.
    page.keyboard.press("Tab")
    expect(panel).not_to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.locator("#submit").click()
    # A short problem does not scroll: no Tab stop, and no region.
    expect(panel).to_contain_text("What is")
    expect(panel).not_to_have_attribute("tabindex", "0")
    expect(page.get_by_role("region", name="Problem statement")).to_have_count(0)
