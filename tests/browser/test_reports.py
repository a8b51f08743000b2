"""A bad-problem report in Chromium, from the labeler's dialog to the manager's Reports tab."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from app.models import FinishReason
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.reports.builders import add_problem, label_next


def test_a_bad_problem_report_reaches_the_manager(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Geometry pilot", overlap=2)
    _, broken_solutions = add_problem(session_factory, project, "Find $\\angle ABC$ in the figure.", n_solutions=2, priority=5.0)
    _, fine_solutions = add_problem(session_factory, project, "What is $\\frac{1}{2}+\\frac{1}{3}$?", n_solutions=1, priority=1.0)
    make_user(session_factory, "lena", "labeler")
    omar = make_user(session_factory, "omar", "labeler")
    make_user(session_factory, "maria", "manager")
    # Another labeler's give-up with a flagged step first, so the tab shows more than one kind.
    label_next(session_factory, project.id, omar.id, FinishReason.solution)
    label_next(session_factory, project.id, omar.id, FinishReason.give_up, ratings=[(1, True)], note="I cannot check the common denominator.")

    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator("#task-ids")).to_have_text(re.compile(rf"Solution ({broken_solutions[0]}|{broken_solutions[1]})$"))
    page.get_by_role("button", name="Bad problem").click()
    dialog = page.locator("#reason-dialog")
    dialog.get_by_label("Reason").fill("The figure is missing: the angle cannot be found.")
    dialog.get_by_role("button", name="Report bad problem").click()
    # The problem's other solution waits with a higher priority, but not for her.
    expect(page.locator("#task-ids")).to_have_text(f"Solution {fine_solutions[0]}")
    page.get_by_role("button", name="Log out").click()

    login(page, "maria", f"/manage/projects/{project.id}")
    page.get_by_role("link", name="Reports").click()
    rows = page.locator("table.reports tbody tr")
    expect(rows).to_have_count(3)
    first = rows.first
    expect(first).to_contain_text("lena")
    expect(first).to_contain_text("bad problem")
    expect(first).to_contain_text("The figure is missing: the angle cannot be found.")
    expect(first).to_contain_text("open")
    expect(first.locator(".statement .katex")).to_be_visible()
    page.set_viewport_size({"width": 1440, "height": 900})
    screenshot(page, "manage_reports.png")

    page.get_by_label("Kind").select_option("bad_problem")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    assert "The figure is missing" in Path(download.value.path()).read_text()

    first.get_by_role("link", name=re.compile("as labeled")).click()
    expect(page.get_by_role("heading", name=re.compile("Label \\d+"))).to_be_visible()
    expect(page.locator("[data-math=problem] .katex")).to_be_visible()
    expect(page.locator(".viewed-steps li")).to_have_count(3)
    expect(page.locator(".viewed-steps li.unrated")).to_have_count(3)
    screenshot(page, "manage_label_view.png")
    page.get_by_role("button", name="Retire problem").click()
    expect(page.get_by_text(re.compile("retired \\d{4}-"))).to_be_visible()

    page.get_by_role("link", name="← Reports").click()
    expect(rows.first.locator(".badge", has_text="retired")).to_be_visible()
    # Retiring the problem answered its bad-problem report.
    expect(rows.first).to_contain_text("dismissed by maria")
    expect(rows.first.get_by_role("button", name="Dismiss")).to_have_count(0)
    # Handled, the row's wider status and extra button kept the reason readable and the table in
    # its box at a laptop's width: the reason was squeezed to a letter a line, the actions cut.
    page.set_viewport_size({"width": 1360, "height": 900})
    box = page.locator("table.reports").evaluate("t => ({table: t.scrollWidth, box: t.parentElement.clientWidth})")
    assert box["table"] <= box["box"], box
    reason = rows.first.locator("td.reason").bounding_box()
    assert reason is not None and reason["width"] >= 150 and reason["height"] < 80, reason
    screenshot(page, "manage_reports_handled.png")

    flagged = rows.filter(has_text="flagged step")
    flagged.get_by_role("link", name=re.compile("as labeled")).click()
    step = page.locator("#step-1")
    expect(step).to_contain_text("+1")
    expect(step).to_contain_text("flagged")
    expect(page.locator(".reason")).to_have_text("I cannot check the common denominator.")
    screenshot(page, "manage_label_view_rated.png")


def test_the_actions_stay_in_sight_at_a_laptops_width(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_problem(session_factory, project, "Let $f(x) = \\frac{x^2 + 3x + 2}{x^2 - 1}$. Find every $a > 0$ with $f(a) = a$.", n_solutions=1)
    labeler = make_user(session_factory, "omar.haddad.night-shift.contractor", "labeler")
    make_user(session_factory, "maria", "manager")
    # A pasted link is one long word, and a long username another: kept whole, they pushed the
    # Actions column out of the table's box.
    label_next(session_factory, project.id, labeler.id, FinishReason.bad_problem,
               note="Copied wrong, see https://artofproblemsolving.com/wiki/index.php?title=2019_AMC_12B_Problems/Problem_17")
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, "maria", f"/manage/projects/{project.id}/reports")
    retire = page.get_by_role("button", name="Retire problem")
    expect(retire).to_be_visible()
    box = page.locator(".table-scroll").evaluate(
        "b => ({right: b.getBoundingClientRect().right, scrolls: b.scrollWidth > b.clientWidth})")
    button = retire.bounding_box()
    assert button is not None
    assert not box["scrolls"] and button["x"] + button["width"] <= min(box["right"], 1280), (box, button)
    screenshot(page, "manage_reports_1280.png")
