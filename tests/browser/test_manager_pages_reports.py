"""The Reports tab at a laptop's width: every row's actions in sight, no sideways scroll."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.labeling.queue import add_slots
from app.models import FinishReason, Problem, Project, Report, Solution, User
from app.reports import service
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.reports.builders import label_next

STATEMENT = ("Let $f(x) = \\frac{3x-2}{x-2}$ for every real $x \\neq 2$. What is the value of "
             "$f(-2) + f(-1) + f(0)$? Express your answer as a common fraction.")
REASON = "The answer key assumes $x$ is an integer, which the statement never says. " * 2


def _add_problem(factory, project: Project, problem_id: int, priority: float) -> None:  # type: ignore[no-untyped-def]
    """A problem of one long solution, numbered as deep in a real project, so that its ids and
    step numbers take the room they take there."""
    with session_scope(factory) as session:
        session.add(Problem(id=problem_id, project_id=project.id, statement=STATEMENT, answer="2",
                            content_hash=uuid.uuid4().hex))
        session.add(Solution(id=problem_id + 1000, project_id=project.id, problem_id=problem_id, priority=priority,
                             steps=[f"Step {j}: $a_{j}$." for j in range(14)], content_hash=uuid.uuid4().hex))
        session.flush()
        add_slots(session, project, [(problem_id + 1000, priority, None)])


def test_every_rows_actions_are_in_sight_at_1280(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    for problem_id, priority in ((4971, 9.0), (4972, 5.0), (4973, 1.0)):
        _add_problem(session_factory, project, problem_id, priority)
    # The longest rows: long names, a long reason, a dismissed report of a retired problem
    # (its manager's name under the status), an open one with two buttons, a step flagged late.
    labeler = make_user(session_factory, "konstantina-papadopoulou", "labeler")
    manager = make_user(session_factory, "maximilian-oberhausen", "manager")
    for _ in range(2):
        label_next(session_factory, project.id, labeler.id, FinishReason.bad_problem, ratings=[], note=REASON)
    label_next(session_factory, project.id, labeler.id, FinishReason.give_up, ratings=[(1, False)] * 11 + [(1, True)],
               note=REASON)
    with session_scope(session_factory) as session:
        by = session.get(User, manager.id)
        service.retire_problem(session, project.id, 4971, by)
        report = session.scalar(select(Report.id).where(Report.problem_id == 4971))
        service.dismiss_report(session, project.id, report, by)

    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, manager.username, f"/manage/projects/{project.id}/reports")
    buttons = page.locator("table.reports .row-actions button")
    expect(buttons).to_have_count(5)
    box = page.locator("table.reports").locator("xpath=..").bounding_box()
    assert box is not None
    assert page.evaluate("document.querySelector('table.reports').parentElement.scrollWidth") <= box["width"]
    for button in buttons.all():
        edge = button.bounding_box()
        assert edge is not None
        assert box["x"] <= edge["x"] and edge["x"] + edge["width"] <= min(box["x"] + box["width"], 1280), (
            f"{button.inner_text()} lies outside the table's box")
    screenshot(page, "manage_reports_actions_1280.png")
