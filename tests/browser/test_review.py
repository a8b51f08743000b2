"""A labeler reviews their own labels in Chromium: the list, the read-only view, a correction;
and the labeling page's guards around a -1."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.sync_api import Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.models import FinishReason, Label
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user

STEPS = ["Let $x = 3$.", "Then $x^2 = 9$.", "So $x^2 + 1 = 11$.", "# Answer\n\n11"]


def _labels(factory) -> list[Label]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return list(session.scalars(select(Label).order_by(Label.id)))


def _rate_all_good(page: Page, project) -> None:  # type: ignore[no-untyped-def]
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    for _ in STEPS:
        page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()


def test_my_labels_list_read_only_view_and_a_correction(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1440, "height": 900})
    project = make_project(session_factory, "algebra")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, STEPS, statement="If $x = 3$, what is $x^2 + 1$?", answer="10")
    _rate_all_good(page, project)
    (first,) = _labels(session_factory)

    page.goto("/label/stats")
    rows = page.locator("#my-labels tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".snippet")).to_contain_text("what is")
    expect(rows.first.locator(".snippet .katex").first).to_be_visible()
    expect(rows.first).to_contain_text("+1 × 4")
    expect(rows.first).to_contain_text("no error")
    # Solutions of one problem read alike: the number tells them apart, as the labeling page gives it.
    expect(rows.first.locator(".project")).to_contain_text(f"solution {first.solution_id}")
    screenshot(page, "review_stats.png")

    rows.first.get_by_role("link", name="View").click()
    page.wait_for_url(f"**/label/labels/{first.id}")
    steps = page.locator("#steps > .step")
    expect(steps).to_have_count(4)
    expect(steps.nth(1).locator(".katex").first).to_be_visible()
    expect(steps.nth(2)).to_have_class(re.compile(r"\brated-good\b"))
    expect(page.locator("#correction-state")).to_contain_text("You can correct this label until")
    expect(page.locator(".rate")).to_have_count(0)
    screenshot(page, "review_label_view.png")

    # A device whose clock runs ten minutes ahead: the correction's start is the server's time.
    page.clock.install(time=datetime.now(UTC) + timedelta(minutes=10))
    page.clock.resume()
    page.get_by_role("link", name="Correct this label").click()
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator("#correcting")).to_contain_text(f"correcting label {first.id}")
    expect(page.locator("#steps .step.is-rated")).to_have_count(4)
    page.locator("#steps > .step").nth(2).locator(".step-text").click()
    page.keyboard.press("3")
    expect(page.locator("#status")).to_contain_text("Step 3 is the first error")
    page.keyboard.press("Enter")

    page.wait_for_url(re.compile(r"/label/labels/\d+\?corrected=1$"))
    expect(page.get_by_role("status")).to_contain_text(f"replaces label {first.id}")
    old, new = _labels(session_factory)
    assert old.superseded_at is not None and new.supersedes_id == old.id
    assert new.started_at <= datetime.now(UTC)
    assert [s["completions"][0]["rating"] for s in new.steps] == [1, 1, -1]
    assert new.finish_reason == FinishReason.found_error
    expect(page.locator("#steps > .step").nth(3)).to_contain_text("Not rated: it comes after the first error")

    page.goto(f"/label/labels/{old.id}")
    expect(page.locator("#correction-state")).to_contain_text("Correcting is closed")
    expect(page.get_by_role("link", name="Correct this label")).to_have_count(0)
    page.goto("/label/stats")
    expect(page.locator("#my-labels tbody tr")).to_have_count(1)
    expect(page.locator("#my-labels tbody tr").first).to_contain_text("corrected")


def test_arrow_down_after_the_first_error_says_why_nothing_follows(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, STEPS)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("ArrowDown")
    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Steps after the first error are not rated")
    expect(page.locator("#steps > .step").nth(1)).to_have_attribute("aria-current", "step")


def test_a_digit_on_a_minus_one_asks_to_be_pressed_again(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, STEPS)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    steps = page.locator("#steps > .step")
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("2")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Step 2 is rated −1. Press 2 again to change it to 0")
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-bad\b"))

    # Another key keeps the -1 and drops the prompt.
    page.keyboard.press("ArrowUp")
    expect(notice).to_be_hidden()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("2")
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-bad\b"))
    page.keyboard.press("2")
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-okay\b"))
    expect(notice).to_be_hidden()
    page.keyboard.press("u")
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-bad\b"))


def test_my_labels_table_fits_its_card_with_the_view_link_in_sight(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Competition algebra - second round")
    make_user(session_factory, "lena", "labeler")
    statement = (
        "Let\n\\[f(x) = x^3 - 6x^2 + 11x - 6,\\]\\begin{align*} g &= f + 1.\\end{align*}Find the sum of the squares of the roots of $f$, and then "
        "the product of those roots that are greater than $\\frac{3}{2}$, giving both as integers."
    )
    add_solution(session_factory, project, STEPS, statement=statement, answer="14")
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    for key in ("1", "1", "3", "Enter"):
        page.keyboard.press(key)
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()

    page.goto("/label/stats")
    box = page.locator("#my-labels .table-scroll")
    view = page.locator("#my-labels tbody tr").first.get_by_role("link", name="View")
    expect(page.locator("#my-labels .snippet .katex").first).to_be_visible()
    # A one-line preview: the displayed formula stays in the line.
    expect(page.locator("#my-labels .snippet .math-source")).to_have_count(0)
    lines = "e => { const r = document.createRange(); r.selectNodeContents(e); return r.getBoundingClientRect().height; }"
    assert page.locator("#my-labels .snippet").evaluate(lines) < 40
    for width in (1280, 1440, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        box_right = box.evaluate("e => e.getBoundingClientRect().right")
        view_right = view.evaluate("e => e.getBoundingClientRect().right")
        assert view_right <= box_right, f"at {width} px the View link ends at {view_right}, the box at {box_right}"
        assert box.evaluate("e => e.scrollWidth <= e.clientWidth"), f"the table scrolls sideways at {width} px"
        if width == 1280:
            screenshot(page, "review_stats_1280.png")

    # A phone scrolls the table inside its box, not the page, and still shows some problem.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("#my-labels .snippet").evaluate("e => e.getBoundingClientRect().width") >= 120
    screenshot(page, "review_stats_390.png")
    view.scroll_into_view_if_needed()
    expect(view).to_be_in_viewport()
