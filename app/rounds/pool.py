"""The queries a round runs: its label snapshot, the candidate pool, scores, picks, the queue.

The pool is every solution of the project that nobody has labeled, holds or has finished:
waiting queue slots stay in it, so that a round can move them up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, case, distinct, exists, func, insert, select, update
from sqlalchemy.orm import Session, aliased

from app.labeling.queue import add_slots
from app.machine_labels.service import is_human
from app.models import (
    AnswerGrade,
    Assignment,
    AssignmentStatus,
    Label,
    Problem,
    Project,
    RoundPick,
    Solution,
    SolutionScore,
)


def label_snapshot(session: Session, project_id: int) -> tuple[int, int]:
    """(highest label id, number of current human labels) of the project now: labelers' work
    is what the new-labels trigger counts."""
    max_id, count = session.execute(
        select(func.max(Label.id), func.count(case((Label.superseded_at.is_(None) & is_human(), 1)))).where(
            Label.project_id == project_id
        )
    ).one()
    return max_id or 0, count


def label_records(
    session: Session, project_id: int, max_label_id: int, accepted_ids: Collection[int] = ()
) -> list[dict[str, Any]]:
    """The snapshot's labels as PRM800K records, the format the PRM engine trains on, each
    with its `source` (human or a machine's), which the round's source weights read; the
    machine labels named in `accepted_ids` (app.rounds.routing accepted them in place of a
    labeler's) are marked `accepted`.

    A label corrected after the snapshot was taken is still the snapshot's: only corrections
    the snapshot holds replace what they correct, so a round reads what it counted.
    """
    correction = aliased(Label)
    corrected = exists().where(
        correction.supersedes_id == Label.id, correction.id <= max_label_id
    )
    accepted = set(accepted_ids)
    rows = session.execute(
        select(Label, Solution.steps, Solution.final_answer, Problem.statement, Problem.answer)
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(Label.project_id == project_id, Label.id <= max_label_id, ~corrected)
        .order_by(Label.id)
    )
    return [
        {
            "source": label.source.value,
            **({"accepted": True} if label.id in accepted else {}),
            "generation": label.generation,
            "is_quality_control_question": label.is_quality_control,
            "is_initial_screening_question": label.is_initial_screening,
            "question": {
                "problem": statement,
                "ground_truth_answer": answer,
                "pre_generated_steps": steps,
                "pre_generated_answer": final_answer,
            },
            "label": {
                "steps": [_with_text(step, steps, i) for i, step in enumerate(label.steps)],
                "finish_reason": label.finish_reason.value if label.finish_reason else None,
            },
        }
        for label, steps, final_answer, statement, answer in rows
    ]


def _with_text(step: dict[str, Any], solution_steps: list[str], index: int) -> dict[str, Any]:
    # A stored completion leaves out `text` when it is the solution's own step (models.label).
    own = solution_steps[index] if index < len(solution_steps) else ""
    completions = [{"text": own, **c} if "text" not in c else c for c in step["completions"]]
    return {**step, "completions": completions}


def _in_pool(project_id: int) -> Any:
    # A machine-labeled solution stays in the pool: labelers have not seen it yet.
    labeled = exists().where(Label.solution_id == Solution.id, is_human())
    taken = exists().where(
        Assignment.solution_id == Solution.id,
        Assignment.status.in_((AssignmentStatus.leased, AssignmentStatus.done)),
    )
    return and_(Solution.project_id == project_id, ~labeled, ~taken)


def in_pool_among(session: Session, project_id: int, solution_ids: Iterable[int]) -> set[int]:
    found: set[int] = set()
    ids = list(solution_ids)
    for start in range(0, len(ids), 5000):
        found.update(session.scalars(
            select(Solution.id).where(_in_pool(project_id), Solution.id.in_(ids[start:start + 5000]))
        ))
    return found


def _unscored(version_id: int) -> Any:
    return ~exists().where(
        SolutionScore.solution_id == Solution.id, SolutionScore.model_version_id == version_id
    )


def count_unscored(session: Session, project_id: int, version_id: int) -> int:
    return session.scalar(
        select(func.count()).select_from(Solution).where(_in_pool(project_id), _unscored(version_id))
    ) or 0


def unscored_chunk(
    session: Session, project_id: int, version_id: int, after_id: int, limit: int
) -> list[tuple[int, int, list[str], str]]:
    """(solution id, problem id, steps, problem statement) of pool solutions not yet scored
    by the version, in id order after `after_id`."""
    rows = session.execute(
        select(Solution.id, Solution.problem_id, Solution.steps, Problem.statement)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(_in_pool(project_id), _unscored(version_id), Solution.id > after_id)
        .order_by(Solution.id)
        .limit(limit)
    )
    return [tuple(row) for row in rows]  # type: ignore[misc]


def save_scores(
    session: Session, version_id: int, scores: Sequence[tuple[int, float, list[float | None]]]
) -> None:
    if scores:
        session.execute(
            insert(SolutionScore),
            [
                {"model_version_id": version_id, "solution_id": sid, "score": score, "step_scores": steps,
                 "truncated": None in steps}
                for sid, score, steps in scores
            ],
        )


def pool_candidates(
    session: Session, project_id: int, version_id: int | None
) -> list[tuple[int, int, str, float | None, bool]]:
    """(solution id, problem id, answer grade, score by the version or None, whether a step
    went unscored) over the pool."""
    columns = (Solution.id, Solution.problem_id, Solution.answer_grade)
    if version_id is None:
        rows = session.execute(select(*columns).where(_in_pool(project_id)).order_by(Solution.id))
        return [(sid, pid, grade.value, None, False) for sid, pid, grade in rows]
    rows = session.execute(
        select(*columns, SolutionScore.score, SolutionScore.truncated)
        .outerjoin(
            SolutionScore,
            (SolutionScore.solution_id == Solution.id)
            & (SolutionScore.model_version_id == version_id),
        )
        .where(_in_pool(project_id))
        .order_by(Solution.id)
    )
    return [(sid, pid, grade.value, score, bool(truncated)) for sid, pid, grade, score, truncated in rows]


def pool_shape(session: Session, project_id: int) -> dict[str, float]:
    """How much room the rule has to choose: pool solutions, their problems, and the ratio."""
    solutions, problems = session.execute(
        select(func.count(), func.count(distinct(Solution.problem_id))).where(_in_pool(project_id))
    ).one()
    return {"solutions": solutions, "problems": problems,
            "per_problem": solutions / problems if problems else 0.0}


def qc_candidates(session: Session, project_id: int, limit: int = 1000) -> list[tuple[int, int, str]]:
    """(solution id, problem id, grade) of solutions that carry a quality-control label."""
    gold = exists().where(Label.solution_id == Solution.id, Label.is_quality_control.is_(True), is_human())
    rows = session.execute(
        select(Solution.id, Solution.problem_id, Solution.answer_grade)
        .where(Solution.project_id == project_id, gold)
        .order_by(Solution.id)
        .limit(limit)
    )
    return [(sid, pid, grade.value) for sid, pid, grade in rows]


def solution_texts(session: Session, ids: Iterable[int]) -> dict[int, str]:
    texts: dict[int, str] = {}
    ids = list(ids)
    for start in range(0, len(ids), 5000):
        chunk = ids[start:start + 5000]
        for sid, steps in session.execute(select(Solution.id, Solution.steps).where(Solution.id.in_(chunk))):
            texts[sid] = "\n".join(steps)
    return texts


def graded_solutions_of(
    session: Session, problem_ids: Sequence[int], limit_per_problem: int
) -> list[tuple[int, str, list[str], str | None, str | None]]:
    """(problem id, statement, steps, final answer, ground truth) of graded solutions of the
    given problems, for best-of-N."""
    rank = func.row_number().over(partition_by=Solution.problem_id, order_by=Solution.id)
    inner = (
        select(Solution.id.label("sid"), rank.label("rank"))
        .where(
            Solution.problem_id.in_(problem_ids),
            Solution.answer_grade.in_((AnswerGrade.right, AnswerGrade.wrong)),
        )
        .subquery()
    )
    rows = session.execute(
        select(Problem.id, Problem.statement, Solution.steps, Solution.final_answer, Problem.answer)
        .join(Solution, Solution.problem_id == Problem.id)
        .join(inner, inner.c.sid == Solution.id)
        .where(inner.c.rank <= limit_per_problem)
        .order_by(Problem.id, Solution.id)
    )
    return [tuple(row) for row in rows]  # type: ignore[misc]


def pooled_with_answers(session: Session, project_id: int) -> list[tuple[int, str, list[str], str]]:
    """(solution id, problem statement, steps, ground truth) of the pool's solutions whose problem
    has an answer, in id order: what rollouts can label."""
    rows = session.execute(
        select(Solution.id, Problem.statement, Solution.steps, Problem.answer)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(_in_pool(project_id), Problem.answer.is_not(None), Problem.answer != "")
        .order_by(Solution.id)
    )
    return [tuple(row) for row in rows]  # type: ignore[misc]


def problems_of(session: Session, project_id: int) -> list[tuple[int, str]]:
    return [tuple(row) for row in session.execute(  # type: ignore[misc]
        select(Problem.id, Problem.statement).where(Problem.project_id == project_id)
    )]


def write_picks(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        session.execute(insert(RoundPick), list(rows))


def enqueue_picks(session: Session, project: Project, round_id: int, generation: int) -> int:
    """Move the round's picks up the labeling queue, with its generation; returns the number
    of new slots. Slots already waiting are re-prioritised rather than doubled."""
    picks = session.execute(
        select(RoundPick.solution_id, RoundPick.priority).where(RoundPick.round_id == round_id)
    ).all()
    if picks:
        session.execute(
            update(Solution),
            [{"id": sid, "priority": priority, "generation": generation} for sid, priority in picks],
        )
        session.connection().execute(
            update(Assignment)
            .where(
                Assignment.solution_id == bindparam("sid"),
                Assignment.status == AssignmentStatus.waiting,
            )
            .values(priority=bindparam("new_priority"), generation=generation),
            [{"sid": sid, "new_priority": priority} for sid, priority in picks],
        )
    return add_slots(session, project, [(sid, priority, generation) for sid, priority in picks])
