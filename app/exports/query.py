"""The one query every export format reads: labels with their solution and problem, filtered.

JSON columns come back as text and are parsed with orjson by the formats; rows stream from a
server-side cursor, so memory stays flat however many labels there are.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time

from sqlalchemy import Row, Select, Text, cast, or_, select
from sqlalchemy.orm import Session

from app.exports.schemas import ExportFilters
from app.models import FinishReason, Label, Problem, Solution, User
from app.quality.service import AccurateLabelers

ROWS_PER_FETCH = 1000


def _start_of(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def label_query(
    project_id: int,
    filters: ExportFilters,
    *,
    finished_only: bool = False,
    accurate: AccurateLabelers | None = None,
) -> Select:
    """The labels `filters` keep; `accurate` is who passed `filters.min_labeler_accuracy`."""
    query = (
        select(
            Label.id.label("label_id"),
            Label.foreign_labeler,
            User.labeler_uuid,
            Label.created_at,
            Label.generation,
            Label.is_quality_control,
            Label.is_initial_screening,
            Label.finish_reason,
            Label.finish_note,
            Label.total_time_ms,
            cast(Label.steps, Text).label("label_steps"),
            cast(Label.extra, Text).label("extra"),
            Problem.id.label("problem_id"),
            Problem.statement,
            Problem.answer,
            Problem.reference_solution,
            Solution.id.label("solution_id"),
            cast(Solution.steps, Text).label("solution_steps"),
            Solution.steps_source,
            Solution.final_answer,
            Solution.answer_grade,
            Solution.verifier_score,
        )
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .outerjoin(User, User.id == Label.user_id)
        .where(Label.project_id == project_id)
        .order_by(Label.id)
    )
    if filters.since is not None:
        query = query.where(Label.created_at >= _start_of(filters.since))
    if filters.until is not None:
        query = query.where(Label.created_at < _start_of(filters.until))
    if filters.generations:
        query = query.where(Label.generation.in_(filters.generations))
    if filters.labelers:
        query = query.where(
            or_(
                Label.foreign_labeler.in_(filters.labelers),
                User.username.in_(filters.labelers),
                User.labeler_uuid.in_(filters.labelers),
            )
        )
    if accurate is not None:
        # Gold labels are the yardstick, not measured by it: the qc filter decides about them.
        query = query.where(
            or_(
                Label.is_quality_control.is_(True),
                Label.user_id.in_(accurate.user_ids),
                Label.foreign_labeler.in_(accurate.foreign_labelers),
            )
        )
    if filters.qc == "exclude":
        query = query.where(Label.is_quality_control.is_(False))
    elif filters.qc == "only":
        query = query.where(Label.is_quality_control.is_(True))
    if finished_only:
        # A labeler who gave up or reported the problem said nothing about the steps.
        query = query.where(
            or_(
                Label.finish_reason.is_(None),
                Label.finish_reason.not_in((FinishReason.give_up, FinishReason.bad_problem)),
            )
        )
    return query


def stream_rows(session: Session, query: Select) -> Iterator[Row]:
    result = session.execute(query.execution_options(yield_per=ROWS_PER_FETCH))
    try:
        yield from result
    finally:
        result.close()


def labeler_of(row: Row) -> str | None:
    """An imported label keeps its file's labeler id; one made here names the user's UUID."""
    return row.foreign_labeler if row.foreign_labeler is not None else row.labeler_uuid
