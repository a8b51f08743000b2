"""Gold made here: a manager takes a label they trust (their own, or an adjudicated labeler's) as
the reference for its solution, which then serves as a quality-control item, or a screening
item, like gold imported with PRM800K's flags (see app.quality.gate).

The label itself carries the mark, as an imported one does: exports say
`is_quality_control_question` of it, and labelers' earlier labels of the solution are graded
against it from then on. Only a person's current label about the steps can be gold; taking the
mark off leaves the label as an ordinary one.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import Conflict, NotFound
from app.models import Label, LabelSource, Project, User
from app.quality.service import NOT_ABOUT_STEPS


def set_gold(session: Session, project_id: int, label_id: int, *, gold: bool, screening: bool = False,
             by: User | None = None) -> Label:
    """Make the label gold (a screening item with `screening`) or an ordinary one again; `by` is
    the manager, None at the command line."""
    label = session.scalar(
        select(Label).where(Label.id == label_id, Label.project_id == project_id).with_for_update()
    )
    if label is None:
        raise NotFound(f"no label {label_id} in project {project_id}")
    if gold:
        _check_may_be_gold(session, label)
    was = (label.is_quality_control, label.is_initial_screening)
    label.is_quality_control = gold
    label.is_initial_screening = gold and screening
    if (label.is_quality_control, label.is_initial_screening) != was:
        labeler = session.scalar(select(User.username).where(User.id == label.user_id)) or label.foreign_labeler
        audit.record(session, by, "label.made_gold" if gold else "label.gold_removed",
                     f"label {label.id}" + (f" by {labeler}" if labeler else ""),
                     project=session.get_one(Project, project_id).name, screening=label.is_initial_screening)
    session.flush()
    return label


def _check_may_be_gold(session: Session, label: Label) -> None:
    if label.superseded_at is not None:
        newer = session.scalar(select(Label.id).where(Label.supersedes_id == label.id))
        raise Conflict(f"label {label.id} was corrected by label {newer}: make that one gold instead")
    if label.source != LabelSource.human:
        raise Conflict(f"label {label.id} is a {label.source.value} label: only a person's label can be gold")
    if label.finish_reason in NOT_ABOUT_STEPS:
        said = "gave up" if label.finish_reason.value == "give_up" else "reported a bad problem"
        raise Conflict(f"label {label.id} {said}: it says nothing about the steps to grade others by")
