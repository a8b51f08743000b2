"""The labeling page in forced colours (Windows high contrast), where the browser replaces every
colour and drops backgrounds: what a fill alone showed must show otherwise."""

from __future__ import annotations

from playwright.sync_api import Browser, Locator, expect

from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user


def edge(element: Locator) -> str:
    """What draws the element's edge and fill, as the browser resolves them in forced colours."""
    return element.evaluate("""(e) => {
      const s = getComputedStyle(e);
      return [s.outlineStyle, s.outlineColor, s.borderTopColor, s.backgroundColor].join(" ");
    }""")


def test_the_chosen_rating_the_flag_and_the_current_step_stay_visible(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "So $x + x = 4$.", "# Answer\n\n4"])
    # Reduced motion: the buttons' colours change at once, not in a transition read halfway.
    context = browser.new_context(base_url=live_server, viewport={"width": 1360, "height": 900},
                                  forced_colors="active", reduced_motion="reduce")
    page = context.new_page()
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    page.keyboard.press("1")  # step 1 rated +1; the cursor moves on to step 2
    page.keyboard.press("f")  # step 2 flagged
    page.mouse.move(0, 0)  # off the steps: a hovered button is drawn apart too
    steps = page.locator("#steps > .step")
    first, second = steps.nth(0), steps.nth(1)
    expect(first.locator(".rate.good")).to_have_attribute("aria-pressed", "true")
    assert edge(first.locator(".rate.good")) != edge(first.locator(".rate.okay"))
    assert edge(second.locator(".flag-toggle")) != edge(first.locator(".flag-toggle"))
    expect(page.locator("#flag")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("ArrowUp")  # on step 1, which is not flagged
    expect(page.locator("#flag")).to_have_attribute("aria-pressed", "false")
    unpressed_flag = edge(page.locator("#flag"))
    page.keyboard.press("ArrowDown")
    expect(page.locator("#flag")).to_have_attribute("aria-pressed", "true")
    assert edge(page.locator("#flag")) != unpressed_flag
    expect(second).to_have_attribute("aria-current", "step")
    assert edge(second) != edge(steps.nth(2))
    screenshot(page, "labeler_forced_colors.png")
    context.close()
