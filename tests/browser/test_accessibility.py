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
    expect(announce).to_have_text("Step 2 of 3, rated −1: So $x + x = 5$.")
    page.keyboard.press("ArrowUp")
    expect(announce).to_have_text("Step 1 of 3, rated +1: Let $x = 2$.")
    page.keyboard.press("f")
    expect(announce).to_have_text("Step 1 flagged as unsure.")
    page.keyboard.press("u")
    expect(announce).to_have_text("Undone. 1 step left to rate.")

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
