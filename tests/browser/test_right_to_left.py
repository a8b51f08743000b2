"""Problems and steps in Hebrew or Arabic: their words read right to left, their formulas left to
right, on the labeling page and on the pages that show a label."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.models import Label
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.imports.conftest import import_bytes, jsonl

PROBLEM = "מצא את $x$ אם $2x+3=7$."
STEPS = ["بما أن $x>0$ فإن $x=3$.", "$x=3$ ولذلك الجواب ٣.", "إذن\n\n# Answer\n\n2x+3"]

# A formula's glyphs in the order they stand on the screen, left to right.
READ_ACROSS = """
(formula) => [...formula.querySelectorAll(".katex-html *")]
  .filter((e) => !e.children.length && e.textContent.trim())
  .sort((a, b) => a.getBoundingClientRect().left - b.getBoundingClientRect().left)
  .map((e) => e.textContent).join("")
"""


def _assert_right_to_left_with_math_left_to_right(text: Locator, formula: str) -> None:
    expect(text).to_have_attribute("dir", "auto")
    assert text.evaluate("e => getComputedStyle(e).direction") == "rtl"
    shown = text.locator(".katex").filter(has_text=formula).first
    assert shown.evaluate("e => getComputedStyle(e).direction") == "ltr"
    assert shown.evaluate(READ_ACROSS) == formula


def test_right_to_left_text_keeps_its_formulas_in_order(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    import_bytes(session_factory, project, jsonl([{"problem": PROBLEM, "answer": "2"}]), "math")
    import_bytes(session_factory, project, jsonl([{"problem": PROBLEM, "steps": STEPS}]), "solutions")
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "maria", "manager")
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    steps = page.locator("#steps .step-text")
    _assert_right_to_left_with_math_left_to_right(page.locator("#problem-text"), "2x+3=7")
    _assert_right_to_left_with_math_left_to_right(steps.nth(0), "x>0")
    # A step that opens with a formula takes its direction from its words all the same.
    _assert_right_to_left_with_math_left_to_right(steps.nth(1), "x=3")
    # An answer under "# Answer" is drawn apart from the step's words, and its heading is English.
    _assert_right_to_left_with_math_left_to_right(steps.nth(2), "2x+3")
    assert steps.nth(2).locator(".answer-heading > *").evaluate("e => getComputedStyle(e).direction") == "ltr"
    screenshot(page, "labeler_right_to_left.png")

    for _ in STEPS:
        page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    with session_scope(session_factory) as session:
        label_id = session.scalars(select(Label.id)).one()
    page.goto(f"/label/labels/{label_id}")
    _assert_right_to_left_with_math_left_to_right(page.locator("[data-math=problem]"), "2x+3=7")
    _assert_right_to_left_with_math_left_to_right(page.locator("[data-math=step]").first, "x>0")
    screenshot(page, "label_right_to_left.png")

    page.get_by_role("button", name="Log out").click()
    login(page, "maria", f"/manage/projects/{project.id}/labels/{label_id}")
    _assert_right_to_left_with_math_left_to_right(page.locator("[data-math=problem]"), "2x+3=7")
    _assert_right_to_left_with_math_left_to_right(page.locator("[data-math=step]").first, "x>0")
    screenshot(page, "manage_label_right_to_left.png")
