"""Real MATH-500 problems on the labeler page: their LaTeX renders, and the page reads well
at laptop and narrow widths."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from app.demo.service import MATH500
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user

# Sentences end with a period and two spaces in MATH's solutions; paragraphs with a blank line.
STEP_BREAK = re.compile(r"(?<=\.)\s{2,}|\n\n")


def _math500(starts_with: str) -> dict:
    with MATH500.open() as lines:
        for line in lines:
            record = json.loads(line)
            if record["problem"].startswith(starts_with):
                return record
    raise LookupError(starts_with)


@pytest.mark.parametrize(
    ("starts_with", "size", "name"),
    [
        ("Define\n\\[p = \\sum", {"width": 1280, "height": 800}, "labeler_math500_sums.png"),
        ("The set of points $(x,y,z)$ that satisfy\n\\[2x", {"width": 760, "height": 1000}, "labeler_math500_narrow.png"),
    ],
)
def test_math500_problem_renders_cleanly(page: Page, session_factory, starts_with, size, name) -> None:  # type: ignore[no-untyped-def]
    record = _math500(starts_with)
    steps = [s.strip() for s in STEP_BREAK.split(record["solution"]) if s.strip()]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, steps, statement=record["problem"], answer=record["answer"])
    page.set_viewport_size(size)
    login(page, "lena", f"/label/{project.id}")

    expect(page.locator("#steps > .step")).to_have_count(len(steps))
    expect(page.locator("#answer .fbox")).to_have_count(1)
    assert page.locator("#problem-text .katex").count() >= 2
    expect(page.locator(".katex-error")).to_have_count(0)
    # No raw delimiters left over: every formula was found and rendered.
    for text in page.locator("#steps .step-text, #problem-text").all():
        visible = text.evaluate(
            "e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('')"
        )
        assert "$" not in visible and "\\[" not in visible and "\\begin" not in visible, visible
    page.keyboard.press("1")
    page.keyboard.press("1")
    screenshot(page, name)


def test_answer_section_shows_its_bare_latex_as_math(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # PRM800K writes the answer under "# Answer" without math delimiters.
    steps = [
        "The angles of a triangle sum to $180^\\circ$.",
        "# Answer\n\n106^\\circ",
        "# Answer\n\n\\frac{1}{2",
        "# Answer\n\n5 apples",
    ]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, steps, statement="Find the angle.", answer="106^\\circ")
    login(page, "lena", f"/label/{project.id}")

    answer_step = page.locator("#steps > .step").nth(1).locator(".step-text")
    expect(answer_step.locator(".answer-heading")).to_have_text("# Answer")
    expect(answer_step.locator(".answer-value .katex")).to_have_count(1)
    assert "\\circ" not in answer_step.inner_text()
    # An answer KaTeX cannot parse stays readable as text.
    broken = page.locator("#steps > .step").nth(2).locator(".step-text .answer-value")
    expect(broken).to_have_text("\\frac{1}{2")
    # Words are not math: italic letters run together would misquote them.
    prose = page.locator("#steps > .step").nth(3).locator(".step-text")
    expect(prose.locator(".answer-heading")).to_have_text("# Answer")
    expect(prose.locator(".answer-value")).to_have_text("5 apples")
    expect(prose.locator(".katex")).to_have_count(0)
    screenshot(page, "labeler_answer_section.png")
