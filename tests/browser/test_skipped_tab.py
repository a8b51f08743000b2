"""The Skipped tab in Chromium: a problem's one-line preview draws its displays in the line,
apart from the words around them."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from sqlalchemy import update

from app.db import session_scope
from app.models import Problem, Skip
from tests.browser.conftest import login, screenshot
from tests.conftest import add_solutions, make_project, make_user

# As MATH-500 writes it: the display runs straight into the next word.
STATEMENT = ("The expression $$1 + 2 + 3 - 4 + 5 + 6$$is equivalent to 13. Simplify the "
             "following:$$\\frac{3}{\\sqrt{27}}$$.")


def test_a_preview_keeps_a_space_between_a_display_and_the_words_beside_it(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    [solution_id] = add_solutions(session_factory, project, 1)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "maria", "manager")
    with session_scope(session_factory) as session:
        session.execute(update(Problem).where(Problem.project_id == project.id).values(statement=STATEMENT))
        session.add(Skip(user_id=ann.id, solution_id=solution_id, project_id=project.id))
    login(page, "maria", f"/manage/projects/{project.id}/skips")
    preview = page.locator(".statement").first
    expect(preview.locator(".katex")).to_have_count(2)
    # The text the formulas leave between them, as drawn: each display stands apart from a word,
    # and punctuation keeps to the formula it follows.
    around = preview.evaluate("""(line) => [...line.childNodes]
        .filter((node) => node.nodeType === Node.TEXT_NODE).map((node) => node.textContent)""")
    assert around == ["The expression ", " is equivalent to 13. Simplify the following: ", "."]
    screenshot(page, "manage_skips.png")
