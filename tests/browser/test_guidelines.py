"""A project's guidelines on the labeling page: read before the first task, at hand with ?, and
shown again once a manager changes them; reading them is recorded on the server."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect
from sqlalchemy import func, select, update

from app.db import session_scope
from app.models import Assignment, AssignmentStatus, GuidelinesRead, Project
from app.projects.guidelines import guidelines_version
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user

GUIDELINES = """# Grading

Rate **+1** when the step is right: $\\frac{3}{4} + \\frac{1}{6} = \\frac{11}{12}$ is.

<script>window.hacked = true</script>
"""


def _leases(factory) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalar(
            select(func.count()).select_from(Assignment).where(Assignment.status == AssignmentStatus.leased)
        ) or 0


def _read_versions(factory) -> list[str]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return list(session.scalars(select(GuidelinesRead.version)))


def wait_for(condition, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not recorded in time"
        time.sleep(0.05)


def test_guidelines_open_before_the_first_task_and_again_when_changed(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, guidelines=GUIDELINES)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"])
    dialog = page.locator("#guidelines-dialog")

    login(page, "lena", f"/label/{project.id}")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".katex")).to_have_count(1)
    expect(dialog).to_contain_text("<script>window.hacked = true</script>")
    assert page.evaluate("window.hacked") is None
    # Reading is not time on task: nothing is leased while the guidelines are open.
    assert _leases(session_factory) == 0
    screenshot(page, "guidelines-first-visit.png")
    page.keyboard.press("Escape")
    expect(page.locator("#task-view")).to_be_visible()
    assert _leases(session_factory) == 1
    # Read is recorded on the server: managers see it, and another browser does not ask again.
    wait_for(lambda: _read_versions(session_factory) == [guidelines_version(GUIDELINES)])

    page.reload()
    expect(page.locator("#task-view")).to_be_visible()
    expect(dialog).to_be_hidden()
    phone = page.context.browser.new_context(base_url=page.url.split("/label")[0])
    other = phone.new_page()
    login(other, "lena", f"/label/{project.id}")
    expect(other.locator("#task-view")).to_be_visible()
    expect(other.locator("#guidelines-dialog")).to_be_hidden()
    phone.close()

    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    page.keyboard.press("1")
    expect(page.locator("#steps .rate[aria-pressed=true]")).to_have_count(0)
    page.get_by_role("button", name="Got it").click()
    expect(dialog).to_be_hidden()
    page.keyboard.press("1")
    expect(page.locator("#steps .rate[aria-pressed=true]")).to_have_count(1)
    page.get_by_role("button", name="Guidelines").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")

    with session_scope(session_factory) as session:
        session.execute(update(Project).values(guidelines=GUIDELINES + "\nAlso: flag what you doubt.\n"))
    page.reload()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("flag what you doubt")
    page.get_by_role("button", name="Got it").click()
    edited = guidelines_version(GUIDELINES + "\nAlso: flag what you doubt.\n")
    wait_for(lambda: _read_versions(session_factory) == [edited])


def test_guidelines_changed_while_the_tab_stays_open_open_before_the_next_task(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, guidelines=GUIDELINES)
    make_user(session_factory, "lena", "labeler")
    for n in (1, 2):
        add_solution(session_factory, project, [f"${n}+1={n + 1}$.", f"# Answer\n\n{n + 1}"])
    dialog = page.locator("#guidelines-dialog")
    login(page, "lena", f"/label/{project.id}")
    page.get_by_role("button", name="Got it").click()
    expect(page.locator("#task-view")).to_be_visible()
    wait_for(lambda: _read_versions(session_factory) == [guidelines_version(GUIDELINES)])

    edited = GUIDELINES + "\nAlso: flag what you doubt.\n"
    with session_scope(session_factory) as session:
        session.execute(update(Project).values(guidelines=edited))
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    # The label is saved; the next solution waits until the new guidelines are closed.
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("flag what you doubt")
    assert _leases(session_factory) == 0
    page.get_by_role("button", name="Got it").click()
    expect(page.locator("#task-view")).to_be_visible()
    assert _leases(session_factory) == 1
    wait_for(lambda: _read_versions(session_factory) == [guidelines_version(edited)])


def test_a_project_without_guidelines_starts_at_once(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"])
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator("#guidelines-dialog")).to_have_count(0)
    expect(page.get_by_role("button", name="Guidelines")).to_have_count(0)
    page.keyboard.press("?")
    page.keyboard.press("1")
    expect(page.locator("#steps .rate[aria-pressed=true]")).to_have_count(1)


def test_the_guidelines_page_renders_math_and_fits_a_phone(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, guidelines=GUIDELINES + "\n| Rating | Key |\n|---|---|\n| +1 | 1 |\n")
    make_user(session_factory, "lena", "labeler")
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "lena", f"/label/{project.id}/guidelines")
    expect(page.locator("#guidelines .katex")).to_have_count(1)
    expect(page.locator("#guidelines table")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "guidelines-page-phone.png")


def test_a_numbered_display_wider_than_a_phone_keeps_its_number_clear(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # KaTeX pins the number to the box's right edge: it was drawn over the formula.
    wide = ("$$\\sum_{k=1}^{100} \\left(\\frac{k^2 + 3k + 2}{k^3 + 6k^2 + 11k + 6}\\right) = "
            "\\frac{1}{2} + \\frac{1}{3} + \\cdots + \\frac{1}{101} \\tag{1}$$")
    project = make_project(session_factory, guidelines=f"Wide:\n\n{wide}\n\nNarrow:\n\n$$x = 1 \\tag{{2}}$$\n")
    make_user(session_factory, "lena", "labeler")
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "lena", f"/label/{project.id}/guidelines")
    displays = page.locator("#guidelines .katex-display")
    expect(displays).to_have_count(2)
    for i in range(2):
        formula_end = displays.nth(i).locator(".base").last.evaluate("e => e.getBoundingClientRect().right")
        number = displays.nth(i).locator(".tag").evaluate("e => e.getBoundingClientRect()")
        assert number["left"] >= formula_end, f"display {i + 1}: its number overlaps the formula"
    # A formula that fits keeps its number at the box's right edge, as KaTeX places it.
    box = displays.nth(1).evaluate("e => e.getBoundingClientRect().right")
    number = displays.nth(1).locator(".tag").evaluate("e => e.getBoundingClientRect().right")
    assert abs(box - number) < 2
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # The wide one scrolls in its own box, its hidden end faded as in steps.
    expect(displays.nth(0)).to_have_class(re.compile(r"\bscrolls\b"))
    expect(displays.nth(1)).not_to_have_class(re.compile(r"\bscrolls\b"))
    screenshot(page, "guidelines-numbered-phone.png")
