"""Settings the project's data cannot meet are said on the overview: quality control with no
gold, a screening longer than its items, an overlap past the labelers who may label."""

from __future__ import annotations

from sqlalchemy import select

from app.db import session_scope
from app.models import Assignment, AssignmentStatus, FinishReason, Project, StandingDecision, User
from app.projects.checks import unmet_settings
from app.projects.members import add_member
from app.quality.gate import decide_about
from app.quality.gold import set_gold
from app.reports.service import retire_problem
from tests.conftest import browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.conftest import labeled_record
from tests.reports.builders import add_problem, label_next


def _unmet(factory, project_id: int) -> list[str]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return unmet_settings(session, session.get(Project, project_id))


def test_each_unmet_setting_is_said_until_the_data_meets_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2, qc_rate=0.2, screening_items=2, open_to_all=False)
    problem_id, _ = add_problem(session_factory, project, "1+1?", n_solutions=2)
    said = _unmet(session_factory, project.id)
    assert [line.split(",")[0] for line in said] == [
        "Quality control is on", "Screening asks for 2 items", "Overlap is 2"]
    assert "only 0 active members who are labelers may label here" in said[2]
    assert "the project has 0: new labelers are screened on those alone (none: screening is passed over)" in said[1]

    lena = make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "leo", "labeler")
    with session_scope(session_factory) as session:
        session.get(Project, project.id).open_to_all = True
    _, label_id = label_next(session_factory, project.id, lena.id, FinishReason.solution)
    mona = make_user(session_factory, "mona", "manager")
    with session_scope(session_factory) as session:
        set_gold(session, project.id, label_id, gold=True, screening=True)
    said = _unmet(session_factory, project.id)
    assert len(said) == 1 and said[0].startswith("Screening asks for 2 items, but the project has 1: new labelers are screened on that one alone.")

    browser_login(client, "mona")
    page = client.get(f"/manage/projects/{project.id}").text
    assert page.count('class="flash warning" role="status"') == 1 and "Screening asks for 2 items" in page

    # A retired problem's gold is served to nobody: it meets neither setting.
    with session_scope(session_factory) as session:
        retire_problem(session, project.id, problem_id, session.get(User, mona.id))
    said = _unmet(session_factory, project.id)
    assert [line.split(":")[0] for line in said] == [
        "Quality control is on, but the project has no gold items (1 more is of retired problems, served to nobody)",
        "Screening asks for 2 items, but the project has 0 (1 more is of retired problems, served to nobody)"]


def test_a_solution_no_labeler_here_will_be_served_is_said(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Two members at overlap 2: once lena reports the problem as bad on one solution and leo
    # labels both, the other's second slot waits for a labeler the queue will never serve it to.
    project = make_project(session_factory, overlap=2, open_to_all=False)
    add_problem(session_factory, project, "1/0?", n_solutions=2)
    lena, leo = (make_user(session_factory, name, "labeler") for name in ("lena", "leo"))
    with session_scope(session_factory) as session:
        for name in ("lena", "leo"):
            add_member(session, session.get(Project, project.id), name)
    assert _unmet(session_factory, project.id) == []
    label_next(session_factory, project.id, lena.id, FinishReason.bad_problem, note="no answer exists")
    assert _unmet(session_factory, project.id) == []
    # leo takes the other solution first (first slots go first): lena will not be served its second.
    label_next(session_factory, project.id, leo.id, FinishReason.solution)
    label_next(session_factory, project.id, leo.id, FinishReason.solution)
    (said,) = _unmet(session_factory, project.id)
    with session_scope(session_factory) as session:
        [unserved] = session.scalars(select(Assignment.solution_id).where(
            Assignment.project_id == project.id, Assignment.status == AssignmentStatus.waiting))
    assert said.startswith(f"1 solution (#{unserved}) waits for a label that the queue will serve to no one: every labeler who "
                           "may label here has labeled it, skipped it or reported its problem as bad.")
    # A third member who may take it clears it.
    make_user(session_factory, "lou", "labeler")
    with session_scope(session_factory) as session:
        add_member(session, session.get(Project, project.id), "lou")
    assert _unmet(session_factory, project.id) == []


def test_gold_that_says_nothing_about_the_steps_is_no_item(session_factory) -> None:  # type: ignore[no-untyped-def]
    # A gold label that gave up makes no item the queue can serve (app.quality.gate).
    project = make_project(session_factory, qc_rate=0.2)
    record = labeled_record("reference", "Problem G", ["g 0", "g 1"], [1, 1], qc=True, finish="give_up")
    import_bytes(session_factory, project, jsonl([record]))
    (said,) = _unmet(session_factory, project.id)
    assert said.startswith("Quality control is on, but the project has no gold items:")


def test_a_retired_labeler_is_not_counted_among_those_who_may_label(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_problem(session_factory, project, "1+1?", n_solutions=1)
    lena = make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "leo", "labeler")
    mona = make_user(session_factory, "mona", "manager")
    assert _unmet(session_factory, project.id) == []
    with session_scope(session_factory) as session:
        decide_about(session, session.get(Project, project.id), lena.id, StandingDecision.retired, mona.id)
    (said,) = _unmet(session_factory, project.id)
    assert said.startswith("Overlap is 2, but only 1 active labeler may label here")
