"""The selection rule on hand-made score tables."""

from __future__ import annotations

from collections import Counter

import pytest

from active_learning.select import (
    CONVINCING_WRONG,
    NO_MODEL,
    QC,
    RANDOM_CONTROL,
    TOP_SCORED,
    Candidate,
    SelectionRule,
    select,
    select_uniform,
    shingles,
    similarity,
)


def table(rows: list[tuple[int, str, float, str]]) -> list[Candidate]:
    """(solution id, problem, score, grade) rows; each solution gets its own distinct text."""
    return [Candidate(sid, pid, score, grade, f"solution {sid} of {pid} step x{sid}") for sid, pid, score, grade in rows]


SCORES = table([
    # problem A: two convincing wrong answers, one weak wrong one, two right ones
    (1, "A", 0.95, "wrong"),
    (2, "A", 0.90, "wrong"),
    (3, "A", 0.10, "wrong"),
    (4, "A", 0.99, "right"),
    (5, "A", 0.50, "right"),
    # problem B: one convincing wrong answer, an unparseable one, a right one
    (6, "B", 0.80, "wrong"),
    (7, "B", 0.97, "no_answer"),
    (8, "B", 0.20, "right"),
])


def reasons(picks) -> dict[int, str]:
    return {p.solution_id: p.reason for p in picks}


def test_top_scored_wrong_answers_then_top_scored_of_the_rest() -> None:
    rule = SelectionRule(budget=6, wrong_share=0.8, control_share=0.0)
    picks = reasons(select(SCORES, rule))
    # 5 wrong-answer picks asked for, 4 there: all of them.
    assert {s for s, r in picks.items() if r == CONVINCING_WRONG} == {1, 2, 6, 3}
    # 2 of the rest: each problem's highest score of what is left, whatever its answer.
    assert {s for s, r in picks.items() if r == TOP_SCORED} == {4, 7}


def test_each_problem_gives_its_best_before_any_gives_its_second() -> None:
    rows = table([(i, f"P{i // 3}", 0.9 - (i % 3) * 0.1 - (i // 3) * 0.01, "wrong") for i in range(30)])
    picks = select(rows, SelectionRule(budget=10, wrong_share=1.0, control_share=0.0, seed=5))
    # 10 problems, 10 picks: one each, and each problem's best (its first solution).
    assert sorted(p.solution_id for p in picks) == list(range(0, 30, 3))
    fewer = select(rows, SelectionRule(budget=4, wrong_share=1.0, control_share=0.0, seed=6))
    # Fewer picks than problems: randomly chosen problems, not the four best-scored ones.
    assert len({p.problem_id for p in fewer}) == 4
    assert {p.problem_id for p in fewer} != {"P0", "P1", "P2", "P3"}
    assert {p.solution_id % 3 for p in fewer} == {0}
    other = select(rows, SelectionRule(budget=4, wrong_share=1.0, control_share=0.0, seed=7))
    assert {p.problem_id for p in other} != {p.problem_id for p in fewer}


def test_a_solution_with_an_unscored_step_ranks_below_those_read_whole() -> None:
    # Its product lacks the long step's factor: 0.99 could be any score at all.
    rows = [Candidate(1, "A", 0.99, "wrong", "a long one", truncated=True),
            Candidate(2, "A", 0.60, "wrong", "read whole"),
            Candidate(3, "A", 0.20, "wrong", "read whole, doubted")]
    picks = select(rows, SelectionRule(budget=2, wrong_share=1.0, control_share=0.0))
    assert [p.solution_id for p in picks] == [2, 3]
    assert [p.solution_id for p in select(rows, SelectionRule(budget=3, wrong_share=1.0, control_share=0.0))] == [2, 3, 1]


def test_wrong_share_splits_the_budget() -> None:
    rule = SelectionRule(budget=5, wrong_share=0.6, control_share=0.0)
    picks = reasons(select(SCORES, rule))
    assert Counter(picks.values()) == {CONVINCING_WRONG: 3, TOP_SCORED: 2}
    assert {s for s, r in picks.items() if r == CONVINCING_WRONG} == {1, 2, 6}
    assert {s for s, r in picks.items() if r == TOP_SCORED} == {4, 7}


def test_shortfall_of_wrong_answers_goes_to_the_top_scored() -> None:
    rows = table([(1, "A", 0.9, "wrong"), (2, "A", 0.8, "right"), (3, "B", 0.7, "right"), (4, "B", 0.6, "right")])
    picks = reasons(select(rows, SelectionRule(budget=4, wrong_share=1.0, control_share=0.0)))
    assert picks == {1: CONVINCING_WRONG, 2: TOP_SCORED, 3: TOP_SCORED, 4: TOP_SCORED}


def test_per_problem_cap_spreads_picks() -> None:
    rule = SelectionRule(budget=8, wrong_share=1.0, control_share=0.0, per_problem_cap=2)
    picks = select(SCORES, rule)
    per_problem = Counter(p.problem_id for p in picks)
    assert per_problem == {"A": 2, "B": 2}
    assert reasons(picks) == {1: CONVINCING_WRONG, 2: CONVINCING_WRONG, 6: CONVINCING_WRONG, 7: TOP_SCORED}


def test_per_round_cap_is_the_budget() -> None:
    assert len(select(SCORES, SelectionRule(budget=3, control_share=0.0))) == 3
    assert len(select(SCORES, SelectionRule(budget=100, control_share=0.0, per_problem_cap=9))) == len(SCORES)
    assert select(SCORES, SelectionRule(budget=0)) == []


def test_near_duplicates_of_the_same_problem_are_skipped() -> None:
    text = "We compute $3 \\times 4 = 12$. Then $12 + 5 = 17$. # Answer 17"
    rows = [
        Candidate(1, "A", 0.9, "wrong", text),
        Candidate(2, "A", 0.8, "wrong", text.replace("  ", " ") + " "),
        Candidate(3, "A", 0.7, "wrong", "We compute $3 \\times 4 = 13$. Then $13 + 5 = 18$. # Answer 18"),
        Candidate(4, "B", 0.6, "wrong", text),
    ]
    picks = reasons(select(rows, SelectionRule(budget=4, wrong_share=1.0, control_share=0.0)))
    # 2 repeats 1; 3 differs in its numbers, which is a different solution; 4 is another problem.
    assert set(picks) == {1, 3, 4}
    off = SelectionRule(budget=4, wrong_share=1.0, control_share=0.0, duplicate_similarity=1.01)
    assert set(reasons(select(rows, off))) == {1, 2, 3, 4}


def test_similarity_of_shingles() -> None:
    a = shingles("the answer is 12 because 3 times 4 is 12")
    assert similarity(a, a) == 1.0
    assert similarity(a, shingles("something else entirely, nothing shared here")) == 0.0


def test_control_slice_is_uniform_and_reproducible() -> None:
    rows = table([(i, f"P{i % 50}", i / 1000, "wrong" if i % 3 else "right") for i in range(1000)])
    rule = SelectionRule(budget=100, control_share=0.1, seed=7)
    picks = select(rows, rule)
    control = [p for p in picks if p.reason == RANDOM_CONTROL]
    assert len(control) == 10
    assert [p.solution_id for p in select(rows, rule) if p.reason == RANDOM_CONTROL] == [
        p.solution_id for p in control
    ]
    other_seed = select(rows, SelectionRule(budget=100, control_share=0.1, seed=8))
    assert {p.solution_id for p in other_seed if p.reason == RANDOM_CONTROL} != {
        p.solution_id for p in control
    }
    # Uniform, not ranked: the control reaches well below the ranked picks' scores.
    ranked_floor = min(p.score for p in picks if p.reason == CONVINCING_WRONG)
    assert any(p.score < ranked_floor for p in control)
    assert Counter(p.reason for p in picks) == {CONVINCING_WRONG: 72, TOP_SCORED: 18, RANDOM_CONTROL: 10}


def test_qc_items_are_mixed_in() -> None:
    qc_items = [Candidate(100 + i, f"Q{i}", 1.0, "right", f"gold {i}") for i in range(5)]
    picks = select(SCORES, SelectionRule(budget=5, control_share=0.0, qc_share=0.4), qc_items)
    assert Counter(p.reason for p in picks)[QC] == 2
    assert {p.solution_id for p in picks if p.reason == QC} <= {q.solution_id for q in qc_items}


def test_every_prefix_mixes_the_slices() -> None:
    rows = table([(i, f"P{i % 40}", (i * 37 % 100) / 100, "wrong" if i % 2 else "right") for i in range(400)])
    picks = select(rows, SelectionRule(budget=50, wrong_share=0.8, control_share=0.2))
    assert [p.rank for p in picks] == list(range(len(picks)))
    first_ten = Counter(p.reason for p in picks[:10])
    assert first_ten[CONVINCING_WRONG] >= 5 and first_ten[RANDOM_CONTROL] >= 1
    # Within a slice the ranked order is by score.
    wrong_scores = [p.score for p in picks if p.reason == CONVINCING_WRONG]
    assert wrong_scores == sorted(wrong_scores, reverse=True)


def test_uniform_selection_needs_no_scores() -> None:
    rows = [Candidate(i, f"P{i % 5}", None, "ungraded", f"text {i}") for i in range(30)]
    picks = select_uniform(rows, SelectionRule(budget=10, per_problem_cap=3, seed=1))
    assert len(picks) == 10 and all(p.reason == NO_MODEL for p in picks)
    assert max(Counter(p.problem_id for p in picks).values()) <= 3
    with pytest.raises(ValueError):
        select(rows, SelectionRule(budget=10))


def test_uniform_selection_keeps_the_qc_share() -> None:
    rows = [Candidate(i, f"P{i % 5}", None, "ungraded", f"text {i}") for i in range(30)]
    qc_items = [Candidate(100 + i, f"Q{i}", None, "right", f"gold {i}") for i in range(5)]
    picks = select_uniform(rows, SelectionRule(budget=10, qc_share=0.2, seed=1), "uniform", qc_items)
    assert len(picks) == 10 and Counter(p.reason for p in picks) == {"uniform": 8, QC: 2}
    # Fewer QC items than the share asks for: the uniform draw fills the budget.
    picks = select_uniform(rows, SelectionRule(budget=10, qc_share=0.5, seed=1), "uniform", qc_items[:1])
    assert Counter(p.reason for p in picks) == {"uniform": 9, QC: 1}


@pytest.mark.parametrize(
    "bad",
    [dict(budget=-1), dict(budget=1, per_problem_cap=0), dict(budget=1, wrong_share=1.5),
     dict(budget=1, control_share=0.7, qc_share=0.5)],
)
def test_bad_rules_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        SelectionRule(**bad)
