"""Machine labels are stored once per generator, and never count as a labeler's work."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db import session_scope
from app.labeling.queue import add_slots
from app.machine_labels.service import MachineLabel, labeled_by, store_machine_labels
from app.models import Assignment, FinishReason, Label, LabelSource, RoundSettings, utcnow
from app.projects.service import project_progress
from app.quality.agreement import project_agreement
from app.quality.service import labeler_accuracy
from app.rounds import pool
from app.rounds.triggers import due_trigger
from tests.conftest import add_solutions, make_project, make_user

GENERATOR = {"model": "tiny-lm", "backend": "transformers", "rollouts": 4, "temperature": 0.7}


def _steps(*ratings: int) -> list[dict]:  # type: ignore[type-arg]
    return [{"completions": [{"rating": r, "flagged": False}], "human_completion": None,
             "chosen_completion": None if r == -1 else 0} for r in ratings]


def _machine(solutions: list[int]) -> list[MachineLabel]:
    return [
        MachineLabel(solutions[0], [1, -1, None], {"shares": [1.0, 0.0, None]}),
        MachineLabel(solutions[1], [1, 0, 1], {"shares": [1.0, 0.5, 0.75]}),
        MachineLabel(solutions[2], [1, None, None], {"shares": [0.75, None, None]}),
    ]


def test_stored_once_per_generator(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "machine", overlap=1)
    solutions = add_solutions(session_factory, project, 3)
    with session_scope(session_factory) as session:
        assert store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, _machine(solutions)) == 3
        assert store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, _machine(solutions)) == 0
        other = {**GENERATOR, "temperature": 1.0}
        assert store_machine_labels(session, project.id, LabelSource.rollout, other, _machine(solutions)[:1]) == 1
        assert labeled_by(session, project.id, LabelSource.rollout, GENERATOR) == set(solutions)
        assert labeled_by(session, project.id, LabelSource.rollout, other) == {solutions[0]}
        assert labeled_by(session, project.id, LabelSource.judge, GENERATOR) == set()
        labels = session.scalars(select(Label).order_by(Label.id)).all()
        assert [label.source for label in labels] == [LabelSource.rollout] * 4

    first, second, third = labels[:3]
    assert all(label.user_id is None and label.source == LabelSource.rollout for label in labels)
    # Nothing is rated after the first −1 or past the first step left unestimated.
    assert [s["completions"][0]["rating"] for s in first.steps] == [1, -1]
    assert (first.finish_reason, second.finish_reason, third.finish_reason) == (
        FinishReason.found_error, FinishReason.solution, None)
    assert len(third.steps) == 1
    assert first.source_detail["model"] == "tiny-lm"
    assert first.source_detail["shares"] == [1.0, 0.0, None]


def _human_views(session, project) -> tuple:  # type: ignore[no-untyped-def, type-arg]
    """Everything that reads labelers' work: agreement, QC accuracy, progress, the round's
    label count, the pool of unlabeled solutions."""
    return (
        project_agreement(session, project),
        labeler_accuracy(session, project.id),
        project_progress(session, project).labels,
        pool.label_snapshot(session, project.id)[1],
        pool.pool_shape(session, project.id),
    )


def test_machine_labels_count_for_no_labeler(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "counts", overlap=2)
    solutions = add_solutions(session_factory, project, 3, steps=2)
    ann, bob = (make_user(session_factory, name, "labeler").id for name in ("ann", "bob"))
    now = utcnow()
    with session_scope(session_factory) as session:
        for user in (ann, bob):
            session.add(Label(project_id=project.id, solution_id=solutions[0], user_id=user, steps=_steps(1, 1),
                              finish_reason=FinishReason.solution, is_quality_control=user == ann, created_at=now))
        session.add(RoundSettings(project_id=project.id, every_new_labels=3))
    with session_scope(session_factory) as session:
        before = _human_views(session, project)
        labels = [MachineLabel(s, [1, -1], {}) for s in solutions]
        store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, labels)
        store_machine_labels(session, project.id, LabelSource.judge, GENERATOR, labels)
    with session_scope(session_factory) as session:
        assert _human_views(session, project) == before
        assert before[2] == 2 and before[4]["solutions"] == 2
        # Six machine labels would have passed the trigger's three new labels.
        settings = session.get(RoundSettings, project.id)
        assert due_trigger(session, settings, utcnow()) is None
        # Still two open slots on each unlabeled solution: a machine label fills none.
        session.execute(Assignment.__table__.delete())
        assert add_slots(session, project, [(s, 0.0, None) for s in solutions]) == 0 + 2 + 2
        assert session.scalar(select(func.count()).select_from(Label)) == 8
