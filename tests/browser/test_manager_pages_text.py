"""Words on the project lists and the Problems tab, as a person reads them."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from app.models import FinishReason
from tests.browser.conftest import add_solution, login
from tests.conftest import make_project, make_user
from tests.reports.builders import label_next


def test_the_labelers_list_counts_skipped_solutions_among_those_that_wait(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, open_to_all=True, overlap=2)
    add_solution(session_factory, project, ["One and one.", "# Answer\n\n2"])
    lena = make_user(session_factory, "lena", "labeler")
    label_next(session_factory, project.id, lena.id, FinishReason.solution)
    login(page, "lena", "/label")
    expect(page.get_by_text("None for you now")).to_be_visible()
    # The labeling page says "labeled or skipped": a skip keeps the solution from her as well.
    expect(page.get_by_text(
        "1 label waits for other labelers, on solutions you labeled or skipped, or whose problem you reported."
    )).to_be_visible()


def test_the_projects_legend_names_the_columns_words(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solution(session_factory, project, ["One and one.", "# Answer\n\n2"])
    make_user(session_factory, "maria", "manager")
    login(page, "maria", "/manage/projects")
    expect(page.get_by_role("columnheader", name="Not started")).to_be_visible()
    expect(page.locator(".legend")).to_have_text("done in progress not started")


def test_a_problems_preview_keeps_words_apart_from_display_math(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solution(session_factory, project, ["Compare.", "# Answer\n\n90"],
                 statement="The set of points $(x,y,z)$ that satisfy\n\\[2x = 3y = -z\\]is a line. Find it.")
    make_user(session_factory, "maria", "manager")
    login(page, "maria", f"/manage/projects/{project.id}/problems")
    statement = page.locator("table.problems .statement")
    expect(statement.locator(".katex")).to_have_count(2)
    # KaTeX draws each formula twice, as MathML and as HTML: the words follow the HTML one.
    assert "=−z is a line." in statement.inner_text()
