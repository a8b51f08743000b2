"""Removing an imported file: the problems, solutions and labels it added go, as long as no
work was done on them since (a wrong file or a wrong step separator, caught early, is the case
it serves); once labelers or rounds have used them, deleting the project is the only undo."""

from __future__ import annotations

from sqlalchemy import Delete, delete, exists, func, select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import Conflict, NotFound
from app.imports.schemas import ImportRemoval
from app.labeling.queue import add_slots
from app.models import (
    Assignment,
    AssignmentStatus,
    ImportBatch,
    Label,
    Problem,
    Project,
    Round,
    RoundPick,
    Solution,
    User,
    utcnow,
)
from app.projects.service import refuse_during_live_work


def batch_contents(session: Session, project_id: int) -> dict[int, dict[str, int]]:
    """Per import batch of the project, the problems, solutions and labels of it still there that
    removing it would delete (a batch's `added` counted them on import), and `shared_problems`:
    those of its problems that stay, as other files' solutions (or solutions made since) use them."""
    contents: dict[int, dict[str, int]] = {}
    shared = exists().where(
        Solution.problem_id == Problem.id, Solution.import_batch_id.is_distinct_from(Problem.import_batch_id)
    )
    counted = (
        ("problems", Problem, [~shared]),
        ("shared_problems", Problem, [shared]),
        ("solutions", Solution, []),
        ("labels", Label, []),
    )
    for kind, model, conditions in counted:
        rows = session.execute(
            select(model.import_batch_id, func.count())
            .where(model.project_id == project_id, model.import_batch_id.is_not(None), *conditions)
            .group_by(model.import_batch_id)
        )
        for batch_id, count in rows:
            contents.setdefault(batch_id, dict.fromkeys(("problems", "shared_problems", "solutions", "labels"), 0))[
                kind] = count
    return contents


def labeled_earlier_solutions(session: Session, batch_id: int) -> list[int]:
    """The solutions of earlier files, or made here, to which the batch brought labels."""
    return list(session.scalars(
        select(Label.solution_id).distinct()
        .join(Solution, Solution.id == Label.solution_id)
        .where(Label.import_batch_id == batch_id, Solution.import_batch_id.is_distinct_from(batch_id))
    ))


def remove_import(session: Session, project: Project, batch_id: int, *, by: User | None = None) -> ImportRemoval:
    """Delete the batch with the labels, solutions and problems it added; problems that solutions
    of other files have come to share stay. Its labels on earlier files' solutions go whatever
    was made of them since (gold, a round's training data), and those solutions get back the
    queue slots the labels had filled (see drop_filled_slots). Refused (Conflict),
    changing nothing, while its solutions carry labels that did not come with it, are in a
    labeler's hands, or were picked by a round (held_back), and during a worker's live work on the
    project.

    The file may be imported again afterwards: its record, which told a second upload apart,
    is gone too.
    """
    # Taking turns with imports into the project (app.imports.service.import_file), so that
    # none adds labels to its solutions between the checks and the deletes.
    session.execute(select(Project.id).where(Project.id == project.id).with_for_update(key_share=True))
    batch = session.scalar(
        select(ImportBatch).where(ImportBatch.id == batch_id, ImportBatch.project_id == project.id).with_for_update()
    )
    if batch is None:
        raise NotFound(f"no imported file {batch_id} in project {project.name}")
    refuse_during_live_work(session, project)
    own_solutions = select(Solution.id).where(Solution.import_batch_id == batch.id)
    # On PostgreSQL, labelers go on while this runs: locked, the file's queue slots are passed
    # over by leasing (SKIP LOCKED) and wait out a submit in progress, and its solutions take
    # no new label or slot, so that what the checks below find is what the deletes remove.
    # Slots first, as a submit locks its slot before its label names the solution.
    session.execute(select(Assignment.id).where(Assignment.solution_id.in_(own_solutions)).with_for_update())
    session.execute(own_solutions.with_for_update())
    reason = held_back(session, batch.id)
    if reason:
        raise Conflict(f"{batch.filename} cannot be removed: {reason}")

    labeled_earlier = labeled_earlier_solutions(session, batch.id)
    labels = _deleted(session, delete(Label).where(Label.import_batch_id == batch.id))
    requeued = 0
    for start in range(0, len(labeled_earlier), 5000):
        chunk = labeled_earlier[start:start + 5000]
        # A retired problem's solutions are served to nobody: slots for them would only wait.
        requeued += add_slots(session, project, list(session.execute(
            select(Solution.id, Solution.priority, Solution.generation)
            .join(Problem, Problem.id == Solution.problem_id)
            .where(Solution.id.in_(chunk), Problem.retired_at.is_(None))
        ).all()))
    # The database's cascade takes the solutions' queue slots, scores and reports with them.
    solutions = _deleted(session, delete(Solution).where(Solution.import_batch_id == batch.id))
    problems = _deleted(
        session,
        delete(Problem).where(
            Problem.import_batch_id == batch.id, ~exists().where(Solution.problem_id == Problem.id)
        ),
    )
    removal = ImportRemoval(
        batch_id=batch.id, filename=batch.filename, problems=problems, solutions=solutions, labels=labels,
        requeued=requeued,
    )
    audit.record(session, by, "import.removed", f"imported file {batch.filename} (import {batch.id})",
                 project=project.name, summary=f"{problems:,} problems, {solutions:,} solutions and {labels:,} labels "
                 "deleted")
    session.delete(batch)
    session.flush()
    return removal


def refusals(session: Session, project_id: int) -> dict[int, str]:
    """Per import batch of the project that remove_import would refuse now, why: the project
    page says so before a manager asks (a refusal for live work on the project aside, which
    ends by itself)."""
    batch_ids = session.scalars(select(ImportBatch.id).where(ImportBatch.project_id == project_id)).all()
    return {batch_id: reason for batch_id in batch_ids if (reason := held_back(session, batch_id))}


def held_back(session: Session, batch_id: int) -> str | None:
    """Why work done since keeps the batch, or None."""
    own_solutions = select(Solution.id).where(Solution.import_batch_id == batch_id)
    foreign = session.scalar(
        select(func.count()).select_from(Label).where(
            Label.solution_id.in_(own_solutions), Label.import_batch_id.is_distinct_from(batch_id),
            # A corrected label and its correction are one label to whoever counts them.
            Label.superseded_at.is_(None),
        )
    )
    if foreign:
        return (f"its solutions carry {_count(foreign, 'label')} that did not come with it (made here, or "
                "imported with another file), which would go with them; only deleting the project undoes it now")
    held = session.scalar(
        select(func.count()).select_from(Assignment).where(
            Assignment.solution_id.in_(own_solutions),
            Assignment.status == AssignmentStatus.leased,
            Assignment.expires_at > utcnow(),
        )
    )
    if held:
        # A submitted label keeps the file for good (above): only a lease given back frees it.
        return (f"labelers hold {held:,} of its solutions right now: try again once their leases end or are given "
                "back; once they submit, their labels keep the file")
    picked = session.scalar(
        select(func.min(Round.number)).join(RoundPick, RoundPick.round_id == Round.id).where(
            RoundPick.solution_id.in_(own_solutions)
        )
    )
    if picked is not None:
        return f"round {picked} picked some of its solutions for labeling; only deleting the project undoes it now"
    return None


def _count(n: int, one: str) -> str:
    return f"{n:,} {one if n == 1 else one + 's'}"


def _deleted(session: Session, statement: Delete) -> int:
    return session.execute(
        statement.execution_options(synchronize_session=False, preserve_rowcount=True)
    ).rowcount or 0
