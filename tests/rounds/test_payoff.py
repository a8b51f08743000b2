"""The research page's comparison of the rule's picks with the uniform control, on real labels."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.models import Label, PickReason, Problem, PromoteMetric, Role, Round, RoundPick, Solution
from app.rounds.payoff import Arm, newcombe, selection_payoff, wilson
from tests.conftest import browser_login, make_project, make_user


def _step(rating: int) -> dict:
    return {"completions": [{"rating": rating, "flagged": False}], "human_completion": None,
            "chosen_completion": 0 if rating != -1 else None}


def _build(factory: sessionmaker[Session]) -> int:
    """Round 1 picks 4 with the rule (3 labeled: errors at steps 2 and 1, one clean) and 2 for
    control (both labeled clean, one also superseded by a correction that found an error at
    step 3); round 2 reports the next model's gain."""
    project = make_project(factory, "payoff")
    labeler = make_user(factory, "lena", Role.labeler)
    with session_scope(factory) as session:
        problem = Problem(project_id=project.id, statement="What is 2+2?", answer="4", content_hash="p")
        session.add(problem)
        session.flush()
        solutions = []
        for i in range(6):
            solution = Solution(project_id=project.id, problem_id=problem.id, steps=["a", "b", "c"],
                                priority=0.0, content_hash=f"s{i}")
            session.add(solution)
            solutions.append(solution)
        first = Round(project_id=project.id, number=1, metrics={}, status="done", stage="done")
        second = Round(project_id=project.id, number=2, status="done", stage="done", metrics={
            "candidate": {"step_auroc": 0.74}, "served": {"step_auroc": 0.70}})
        session.add_all([first, second])
        session.flush()
        reasons = [PickReason.convincing_wrong] * 3 + [PickReason.top_scored] + [PickReason.random_control] * 2
        scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.3]
        for rank, (solution, reason, score) in enumerate(zip(solutions, reasons, scores)):
            session.add(RoundPick(round_id=first.id, solution_id=solution.id, rank=rank, score=score,
                                  reason=reason, answer_grade="wrong", priority=1.0))
        ratings = {0: [1, -1], 1: [-1], 2: [1, 1, 1], 4: [1, 1, 1], 5: [1, 1, 1]}
        made = {}
        for index, steps in ratings.items():
            label = Label(project_id=project.id, solution_id=solutions[index].id, user_id=labeler.id,
                          steps=[_step(r) for r in steps], finish_reason="found_error" if -1 in steps else "solution")
            session.add(label)
            made[index] = label
        session.flush()
        made[5].superseded_at = made[5].created_at
        session.add(Label(project_id=project.id, solution_id=solutions[5].id, user_id=labeler.id,
                          steps=[_step(1), _step(1), _step(-1)], finish_reason="found_error",
                          supersedes_id=made[5].id))
    return project.id


def test_rule_against_control_on_labels(session_factory: sessionmaker[Session], backend: str) -> None:
    project_id = _build(session_factory)
    with session_scope(session_factory) as session:
        [first] = selection_payoff(session, project_id, PromoteMetric.step_auroc)  # round 2 picked nothing
    assert first.round_number == 1
    assert (first.active.picks, first.active.labeled, first.active.labels, first.active.with_error) == (4, 3, 3, 2)
    assert first.active.first_error_step == 1.5 and first.active.mean_score == pytest.approx(0.75)
    # The correction replaced the control's clean label: one error in two.
    assert (first.control.picks, first.control.labels, first.control.with_error) == (2, 2, 1)
    assert first.control.first_error_step == 3
    assert first.difference == pytest.approx(2 / 3 - 1 / 2)
    low, high = first.difference_ci
    assert -1 <= low < first.difference < high <= 1
    assert first.next_gain == pytest.approx(0.04)


def test_intervals() -> None:
    low, high = wilson(8, 10)
    assert 0.49 < low < 0.8 < high < 0.95  # Wilson: 0.490 to 0.943
    assert wilson(0, 0) is None
    difference, (low, high) = newcombe(Arm(10, 10, 100, 60, None, None), Arm(10, 10, 100, 30, None, None))
    assert difference == pytest.approx(0.3) and 0.16 < low < 0.3 < high < 0.43
    assert newcombe(Arm(1, 0, 0, 0, None, None), Arm(1, 1, 1, 0, None, None)) == (None, None)


def test_research_page_shows_the_comparison(client, session_factory: sessionmaker[Session], backend: str) -> None:  # type: ignore[no-untyped-def]
    project_id = _build(session_factory)
    make_user(session_factory, "rita", Role.researcher)
    browser_login(client, "rita")
    page = client.get(f"/research/projects/{project_id}")
    assert page.status_code == 200
    section = page.text.split('id="payoff"', 1)[1].split("</section>", 1)[0]
    assert "3 of 4" in section and "67%" in section and "+17 pts" in section and "+0.040" in section
