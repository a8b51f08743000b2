"""Reports raised by labels, dismissing them, retiring problems, and what the queue then serves."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import func, select

from app.db import session_scope
from app.errors import NotFound
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from app.labeling import review
from app.labeling import service as labeling
from app.labeling.schemas import LabelSubmit, StepRating
from app.models import Assignment, AssignmentStatus, FinishReason, Label, ReportKind, ReportStatus
from app.reports import service
from app.reports.schemas import ReportFilters
from tests.conftest import make_project, make_user
from tests.reports.builders import add_problem, label_next, next_task, submit


def _reports(factory, project_id: int, **filters: object):  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return service.list_reports(session, project_id, ReportFilters(**filters)).reports


def test_each_give_up_bad_problem_and_flagged_step_is_one_report(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    for n in range(3):
        add_problem(session_factory, project, f"Problem {n}", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    label_next(session_factory, project.id, ann.id, FinishReason.solution, ratings=[(1, False), (1, True), (0, True)])
    label_next(session_factory, project.id, ann.id, FinishReason.give_up, ratings=[(1, False)], note="Too hard for me.")
    _, bad_label = label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="The figure is missing.")

    reports = _reports(session_factory, project.id)
    assert [(r.kind, r.step, r.reason) for r in reports] == [
        (ReportKind.bad_problem, None, "The figure is missing."),
        (ReportKind.give_up, None, "Too hard for me."),
        (ReportKind.flagged_step, 3, None),
        (ReportKind.flagged_step, 2, None),
    ]
    assert {r.labeler for r in reports} == {"ann"}
    assert all(r.status == ReportStatus.open for r in reports)
    assert reports[0].label_id == bad_label
    assert [r.kind for r in _reports(session_factory, project.id, kind=ReportKind.flagged_step)] == [ReportKind.flagged_step] * 2
    assert _reports(session_factory, project.id, labeler="nobody") == []
    assert {r.labeler for r in _reports(session_factory, project.id, labeler="ANN")} == {"ann"}


def test_a_retried_submit_raises_no_second_report(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Problem", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    task = next_task(session_factory, project.id, ann.id)
    assert task is not None
    data = LabelSubmit(idempotency_key="retry-key-1", ratings=[], finish_reason=FinishReason.give_up,
                       finish_note="No idea.", total_time_ms=5)
    for _ in range(2):
        with session_scope(session_factory) as session:
            labeling.submit_label(session, ann.id, task.assignment_id, data)
    assert len(_reports(session_factory, project.id)) == 1


def test_dismiss_is_kept_once_and_filters_by_status(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Problem", n_solutions=2)
    ann = make_user(session_factory, "ann", "labeler")
    max_ = make_user(session_factory, "max", "manager")
    boss = make_user(session_factory, "boss", "admin")
    label_next(session_factory, project.id, ann.id, FinishReason.give_up, ratings=[], note="Hmm.")
    (report,) = _reports(session_factory, project.id)

    with session_scope(session_factory) as session:
        first = service.dismiss_report(session, project.id, report.id, max_)
    with session_scope(session_factory) as session:
        again = service.dismiss_report(session, project.id, report.id, boss)
    assert first.status == ReportStatus.dismissed and first.dismissed_by == "max"
    assert again == first
    assert _reports(session_factory, project.id, status=ReportStatus.open) == []
    assert [r.id for r in _reports(session_factory, project.id, status=ReportStatus.dismissed)] == [report.id]

    other = make_project(session_factory, "other")
    with session_scope(session_factory) as session, pytest.raises(NotFound):
        service.dismiss_report(session, other.id, report.id, max_)


def test_after_a_bad_problem_report_the_labeler_gets_no_other_solution_of_it(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    # The reported problem's two solutions outrank the other problem's, so only the filter
    # keeps the second one from being served next.
    bad, bad_solutions = add_problem(session_factory, project, "Broken", n_solutions=2, priority=5.0)
    fine, fine_solutions = add_problem(session_factory, project, "Fine", n_solutions=1, priority=1.0)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")

    task, _ = label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="Ambiguous.")
    assert task.problem.id == bad
    following = next_task(session_factory, project.id, ann.id)
    assert following is not None and following.solution.id == fine_solutions[0]
    submit(session_factory, ann.id, following, FinishReason.solution)
    assert next_task(session_factory, project.id, ann.id) is None

    # Another labeler still gets the problem's other solution.
    bobs = next_task(session_factory, project.id, bob.id)
    assert bobs is not None and bobs.problem.id == bad
    assert {task.solution.id, bobs.solution.id} == set(bad_solutions)


def test_retiring_takes_waiting_slots_out_keeps_labels_and_is_idempotent(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    bad, bad_solutions = add_problem(session_factory, project, "Broken", n_solutions=2, priority=5.0)
    add_problem(session_factory, project, "Fine", n_solutions=1, priority=1.0)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")
    cid = make_user(session_factory, "cid", "labeler")
    max_ = make_user(session_factory, "max", "manager")
    label_next(session_factory, project.id, ann.id, FinishReason.solution)
    held = next_task(session_factory, project.id, bob.id)
    assert held is not None and held.problem.id == bad

    with session_scope(session_factory) as session:
        first = service.retire_problem(session, project.id, bad, max_)
    # 4 slots: ann's is done, bob's is leased, the other two waited.
    assert first.slots_removed == 2
    with session_scope(session_factory) as session:
        again = service.retire_problem(session, project.id, bad, max_)
    assert again.retired_at == first.retired_at and again.slots_removed == 0

    with session_scope(session_factory) as session:
        statuses = session.scalars(select(Assignment.status).where(Assignment.solution_id.in_(bad_solutions)))
        assert sorted(statuses) == [AssignmentStatus.done, AssignmentStatus.leased]
    # The lease in hand can still be submitted; nobody is served the problem again.
    submit(session_factory, bob.id, held, FinishReason.solution)
    cids = next_task(session_factory, project.id, cid.id)
    assert cids is not None and cids.problem.id != bad
    with session_scope(session_factory) as session:
        written = write_export(session, project, "prm800k", ExportFilters(), io.BytesIO())
    assert written == 2


def test_retiring_dismisses_the_problems_open_bad_problem_reports_and_nothing_else(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    bad, _ = add_problem(session_factory, project, "Broken", n_solutions=3, priority=5.0)
    add_problem(session_factory, project, "Fine", n_solutions=1, priority=1.0)
    ann, bob, cid = (make_user(session_factory, name, "labeler") for name in ("ann", "bob", "cid"))
    max_ = make_user(session_factory, "max", "manager")
    boss = make_user(session_factory, "boss", "admin")
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="No answer.")
    label_next(session_factory, project.id, bob.id, FinishReason.give_up, ratings=[(1, True)], note="Lost.")
    held = next_task(session_factory, project.id, cid.id)
    assert held is not None and held.problem.id == bad
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="Also broken.")
    earlier = {r.kind: r for r in _reports(session_factory, project.id)}
    with session_scope(session_factory) as session:
        service.dismiss_report(session, project.id, earlier[ReportKind.give_up].id, boss)

    with session_scope(session_factory) as session:
        assert service.retire_problem(session, project.id, bad, max_).reports_dismissed == 1
    statuses = {(r.problem_id, r.kind): (r.status, r.dismissed_by) for r in _reports(session_factory, project.id)}
    assert statuses[(bad, ReportKind.bad_problem)] == (ReportStatus.dismissed, "max")
    # What speaks of a solution or a step stays as it was; so does another problem's report.
    assert statuses[(bad, ReportKind.give_up)] == (ReportStatus.dismissed, "boss")
    assert statuses[(bad, ReportKind.flagged_step)] == (ReportStatus.open, None)
    assert [s for (problem, _), s in statuses.items() if problem != bad] == [(ReportStatus.open, None)]

    with session_scope(session_factory) as session:
        assert service.bad_problem_reports_settled(session, project.id, bad)
    # A lease in hand still submits; what it raises is open until retiring again answers it.
    submit(session_factory, cid.id, held, FinishReason.bad_problem, ratings=[], note="Same.")
    with session_scope(session_factory) as session:
        assert not service.bad_problem_reports_settled(session, project.id, bad)
    with session_scope(session_factory) as session:
        assert service.retire_problem(session, project.id, bad, boss).reports_dismissed == 1
    assert _reports(session_factory, project.id, kind=ReportKind.bad_problem, status=ReportStatus.open) == [
        r for r in _reports(session_factory, project.id, kind=ReportKind.bad_problem) if r.problem_id != bad]


def test_retiring_a_problem_of_another_project_changes_nothing(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    other = make_project(session_factory, "other")
    problem, _ = add_problem(session_factory, project, "Problem", n_solutions=2)
    with session_scope(session_factory) as session, pytest.raises(NotFound):
        service.retire_problem(session, other.id, problem, make_user(session_factory, "max", "manager"))
    with session_scope(session_factory) as session:
        waiting = session.scalar(select(func.count()).select_from(Assignment))
    assert waiting == 2
    assert next_task(session_factory, project.id, make_user(session_factory, "ann", "labeler").id) is not None


def test_the_label_view_shows_the_steps_with_the_ratings_given(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    task, label_id = label_next(session_factory, project.id, ann.id, FinishReason.give_up, ratings=[(1, False), (0, True)], note="Unsure.")
    with session_scope(session_factory) as session:
        view = service.label_view(session, project.id, label_id)
    assert view.statement == "What is $1+1$?" and view.labeler == "ann" and view.finish_note == "Unsure."
    assert [(s.text, s.rating, s.flagged) for s in view.steps] == [
        (task.solution.steps[0], 1, False),
        (task.solution.steps[1], 0, True),
        (task.solution.steps[2], None, False),
    ]
    assert [r.kind for r in view.reports] == [ReportKind.give_up, ReportKind.flagged_step]


def test_the_label_view_lists_the_solutions_other_labels_and_which_disagree(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=4)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ids = {}
    for name, reason, ratings in (
        ("ann", FinishReason.solution, [(1, False), (1, False), (1, False)]),
        ("bob", FinishReason.found_error, [(1, False), (-1, False)]),
        ("cat", FinishReason.give_up, [(1, False)]),
        ("dan", FinishReason.solution, [(1, False), (0, False), (1, False)]),
    ):
        ids[name] = label_next(session_factory, project.id, make_user(session_factory, name, "labeler").id,
                               reason, ratings=ratings, note="Unsure." if reason == FinishReason.give_up else None)[1]
    with session_scope(session_factory) as session:
        anns = service.label_view(session, project.id, ids["ann"])
        cats = service.label_view(session, project.id, ids["cat"])
    assert [(o.labeler, o.finish_reason, o.disagrees) for o in anns.other_labels] == [
        ("bob", FinishReason.found_error, True),
        ("cat", FinishReason.give_up, None),  # a give-up says nothing about the steps
        ("dan", FinishReason.solution, True),  # a 0 where ann gave +1
    ]
    assert [o.disagrees for o in cats.other_labels] == [None, None, None]
    assert [o.labeler for o in cats.other_labels] == ["ann", "bob", "dan"]
    # Each other label's rating of each step, to read beside the label's own.
    assert [o.step_ratings for o in anns.other_labels] == [[1, -1], [1], [1, 0, 1]]
    assert all(step.solution_step for step in anns.steps)


def test_the_label_view_follows_a_phase1_label_through_its_chosen_alternatives(session_factory) -> None:  # type: ignore[no-untyped-def]
    """Not the first alternative of each step: the one the labeler continued with, and their own
    step where they wrote one; the solution's later steps are not theirs and are left out."""
    project = make_project(session_factory, labeling_mode="phase1")
    _, (solution_id, _) = add_problem(session_factory, project, "What is $1+1$?")
    steps = [
        {"completions": [{"text": "Guess 3.", "rating": -1, "flagged": False},
                         {"text": "Add: $1+1=2$.", "rating": 1, "flagged": False}], "chosen_completion": 1},
        {"completions": [{"text": "So 3.", "rating": -1, "flagged": False}], "chosen_completion": None,
         "human_completion": {"text": "So 2.", "rating": 1, "source": "human", "flagged": True, "corrected_rating": None}},
    ]
    with session_scope(session_factory) as session:
        label = Label(project_id=project.id, solution_id=solution_id, steps=steps,
                      finish_reason=FinishReason.solution, foreign_labeler="imported-7")
        session.add(label)
        session.flush()
        view = service.label_view(session, project.id, label.id)
    assert [(s.text, s.rating, s.flagged, s.human) for s in view.steps] == [
        ("Add: $1+1=2$.", 1, False, False),
        ("So 2.", 1, True, True),
    ]
    # Neither is the solution's own step: other labels' ratings of those do not line up with them.
    assert [s.solution_step for s in view.steps] == [False, False]


def _correct(factory, user_id: int, label_id: int, reason: FinishReason, ratings, note: str | None = None) -> int:  # type: ignore[no-untyped-def]
    data = LabelSubmit(idempotency_key=f"fix-{label_id:06d}", ratings=[StepRating(rating=r, flagged=f) for r, f in ratings],
                       finish_reason=reason, finish_note=note, total_time_ms=5)
    with session_scope(factory) as session:
        return review.correct_label(session, user_id, label_id, data).label_id


def test_a_correction_raises_what_it_says(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    bad, bad_solutions = add_problem(session_factory, project, "Broken", n_solutions=2, priority=5.0)
    add_problem(session_factory, project, "Fine", n_solutions=1, priority=1.0)
    ann = make_user(session_factory, "ann", "labeler")
    task, first = label_next(session_factory, project.id, ann.id, FinishReason.found_error, ratings=[(1, False), (-1, False)])
    assert task.problem.id == bad and _reports(session_factory, project.id) == []

    fixed = _correct(session_factory, ann.id, first, FinishReason.bad_problem, [(1, True)], note="Two answers fit.")
    reports = _reports(session_factory, project.id)
    assert [(r.kind, r.step, r.reason, r.label_id, r.status) for r in reports] == [
        (ReportKind.flagged_step, 1, None, fixed, ReportStatus.open),
        (ReportKind.bad_problem, None, "Two answers fit.", fixed, ReportStatus.open),
    ]
    # Like a bad-problem submit, the correction keeps the problem's other solution from the labeler.
    following = next_task(session_factory, project.id, ann.id)
    assert following is not None and following.problem.id != bad


def test_a_correction_withdraws_open_reports_it_no_longer_raises(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    bad, bad_solutions = add_problem(session_factory, project, "Broken", n_solutions=2)
    ann = make_user(session_factory, "ann", "labeler")
    _, first = label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[(1, True)], note="Typo?")
    assert next_task(session_factory, project.id, ann.id) is None

    fixed = _correct(session_factory, ann.id, first, FinishReason.solution, [(1, False)] * 3)
    assert _reports(session_factory, project.id) == []
    # The bad-problem rule follows the current label: the problem's other solution is served again.
    following = next_task(session_factory, project.id, ann.id)
    assert following is not None and following.problem.id == bad
    with session_scope(session_factory) as session:
        assert service.label_view(session, project.id, first).reports == []
        assert service.label_view(session, project.id, fixed).reports == []


def test_a_dismissed_bad_problem_report_no_longer_said_stops_holding_the_problem_back(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    bad, _ = add_problem(session_factory, project, "Broken?", n_solutions=2)
    ann = make_user(session_factory, "ann", "labeler")
    max_ = make_user(session_factory, "max", "manager")
    _, first = label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="Typo?")
    (report,) = _reports(session_factory, project.id)
    with session_scope(session_factory) as session:
        service.dismiss_report(session, project.id, report.id, max_)
    assert next_task(session_factory, project.id, ann.id) is None

    _correct(session_factory, ann.id, first, FinishReason.solution, [(1, False)] * 3)
    (kept,) = _reports(session_factory, project.id)
    assert (kept.id, kept.label_id, kept.status) == (report.id, first, ReportStatus.dismissed)
    following = next_task(session_factory, project.id, ann.id)
    assert following is not None and following.problem.id == bad


def test_a_correction_takes_over_the_reports_it_still_raises_and_leaves_dismissed_ones(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Hard", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    max_ = make_user(session_factory, "max", "manager")
    _, first = label_next(session_factory, project.id, ann.id, FinishReason.give_up,
                          ratings=[(1, True), (0, True)], note="Lost at step 2.")
    flag_2, flag_1, give_up = (r.id for r in _reports(session_factory, project.id))
    with session_scope(session_factory) as session:
        service.dismiss_report(session, project.id, flag_1, max_)
        service.dismiss_report(session, project.id, flag_2, max_)

    # Still a give-up, step 2 still flagged, step 1 no longer, step 3 newly.
    fixed = _correct(session_factory, ann.id, first, FinishReason.give_up,
                     [(1, False), (0, True), (1, True)], note="Lost at step 3.")
    reports = {r.id: r for r in _reports(session_factory, project.id)}
    (flag_3,) = set(reports) - {give_up, flag_2, flag_1}
    assert [(i, reports[i].label_id, reports[i].status, reports[i].step) for i in (give_up, flag_2, flag_3)] == [
        (give_up, fixed, ReportStatus.open, None),
        (flag_2, fixed, ReportStatus.dismissed, 2),
        (flag_3, fixed, ReportStatus.open, 3),
    ]
    assert reports[give_up].reason == "Lost at step 3."
    # A manager's decision on what the superseded label said stays with that label.
    assert (reports[flag_1].label_id, reports[flag_1].status, reports[flag_1].dismissed_by) == (first, ReportStatus.dismissed, "max")


def test_restoring_fills_the_slot_numbers_a_retirement_left_free(session_factory) -> None:  # type: ignore[no-untyped-def]
    # Overlap 2: ann's lease ran out and went back to waiting while bob's is held, so retiring
    # takes out a slot from below one that stays.
    project = make_project(session_factory, overlap=2)
    problem, (solution,) = add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann, bob = (make_user(session_factory, name, "labeler") for name in ("ann", "bob"))
    max_ = make_user(session_factory, "max", "manager")
    assert next_task(session_factory, project.id, ann.id) and next_task(session_factory, project.id, bob.id)
    with session_scope(session_factory) as session:
        lapsed = session.scalars(select(Assignment).where(Assignment.user_id == ann.id)).one()
        lapsed.status, lapsed.expires_at, lapsed_slot = AssignmentStatus.waiting, None, lapsed.slot
        service.retire_problem(session, project.id, problem, max_)
    with session_scope(session_factory) as session:
        assert service.restore_problem(session, project.id, problem).slots_added == 1
    with session_scope(session_factory) as session:
        slots = dict(session.execute(select(Assignment.slot, Assignment.status).where(Assignment.solution_id == solution)).all())
    assert slots[lapsed_slot] == AssignmentStatus.waiting and sorted(slots) == [0, 1]
