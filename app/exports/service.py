"""Exports: a project's labels, filtered, streamed as PRM800K JSONL, TRL JSONL or Parquet."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any, BinaryIO

import orjson
from sqlalchemy import Select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.errors import BadInput
from app.exports.prm800k import render_generation, render_question, render_record
from app.exports.query import LabelRow, label_query, labeler_of, stream_rows
from app.exports.schemas import ExportFilters, ExportFormat
from app.exports.trajectory import alternatives
from app.exports.trl import trl_records
from app.models import Label, LabelSource, Project, StepsSource
from app.quality.agreement import agreeing_solutions
from app.quality.service import accurate_labelers

MEDIA_TYPES = {
    ExportFormat.prm800k: "application/x-ndjson",
    ExportFormat.trl: "application/x-ndjson",
    ExportFormat.parquet: "application/vnd.apache.parquet",
}
_FLUSH_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ExportCount:
    records: int
    labels: int
    solutions: int


class Export:
    """One export's byte chunks; `records` counts what was written so far."""

    def __init__(self, session: Session, project_id: int, fmt: str, filters: ExportFilters) -> None:
        self.session = session
        self.project_id = project_id
        self.format = export_format(fmt)
        self.filters = filters
        self.records = 0

    def chunks(self) -> Iterator[bytes]:
        if self.format == ExportFormat.parquet:
            yield from self._parquet()
        else:
            yield from self._jsonl()

    def is_empty(self) -> bool:
        """Whether no record would be written: the export form says so rather than hand over an
        empty file."""
        if self.filters.min_agreement is None and self.format != ExportFormat.trl:
            return self.session.scalar(self._query().with_only_columns(Label.solution_id).limit(1)) is None
        rows = self._rows()
        if self.format != ExportFormat.trl:
            return next(rows, None) is None
        # A TRL record needs a rated first step, so a label alone does not make one; the rows
        # stop streaming at the first record.
        return not any(next(self._records(row), None) is not None for row in rows)

    def count(self) -> ExportCount:
        """What the file would hold, read without writing it: the export form's count."""
        labels = records = 0
        solutions: set[int] = set()
        for row in self._rows():
            # A label that makes no record (TRL: a first step left unrated) is not exported.
            if made := self._record_count(row):
                records += made
                labels += 1
                solutions.add(row.solution_id)
        return ExportCount(records=records, labels=labels, solutions=len(solutions))

    def _record_count(self, row: LabelRow) -> int:
        if self.format == ExportFormat.trl:
            return sum(1 for _ in self._records(row))
        if self.format == ExportFormat.parquet and self.filters.completions == "all":
            # A row for the label and one for each rated alternative (app.exports.parquet).
            return 1 + sum(1 for _ in alternatives(orjson.loads(row.solution_steps), orjson.loads(row.label_steps)))
        return 1

    def _query(self) -> Select:
        threshold = self.filters.min_labeler_accuracy
        accurate = (
            accurate_labelers(self.session, self.project_id, threshold)
            if threshold is not None
            else None
        )
        return label_query(
            self.project_id,
            self.filters,
            finished_only=self.format == ExportFormat.trl,
            accurate=accurate,
        )

    def _rows(self) -> Iterator[LabelRow]:
        rows = stream_rows(self.session, self._query())
        if self.filters.min_agreement is None:
            return rows
        # Kept in Python, not as an IN list: a large project's agreeing solutions would pass
        # SQLite's limit on bound parameters.
        agreeing = agreeing_solutions(self.session, self.project_id, self.filters.min_agreement)
        return (row for row in rows if row.solution_id in agreeing)

    def _jsonl(self) -> Iterator[bytes]:
        buffer: list[bytes] = []
        size = 0
        for row in self._rows():
            for record in self._records(row):
                line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
                buffer.append(line)
                size += len(line)
                self.records += 1
            if size >= _FLUSH_BYTES:
                yield b"".join(buffer)
                buffer, size = [], 0
        if buffer:
            yield b"".join(buffer)

    def _records(self, row: LabelRow) -> Iterator[dict[str, Any]]:
        if self.format == ExportFormat.prm800k:
            yield prm800k_record(row)
        else:
            yield from trl_records(row, self.filters.neutral == "positive", self.filters.completions == "all")

    def _parquet(self) -> Iterator[bytes]:
        # Imported here: pyarrow takes a tenth of a second to load, which JSONL exports (and
        # every other command) need not pay.
        from app.exports.parquet import ROWS_PER_GROUP, ParquetStream

        stream = ParquetStream(every_completion=self.filters.completions == "all")
        closed = False
        try:
            for row in self._rows():
                self.records += stream.add(row)
                if stream.pending >= ROWS_PER_GROUP:
                    yield stream.flush()
            closed = True
            yield stream.close()
        finally:
            if not closed:
                stream.close()


def prm800k_record(row: LabelRow) -> dict[str, Any]:
    solution_steps = orjson.loads(row.solution_steps)
    label_steps = orjson.loads(row.label_steps)
    # A label made here that went through the solution's own steps rated the solution as given,
    # as PRM800K's phase 2 does (alternatives rated on the way included), also where the solution
    # is a phase-1 labeler's path: rendered as phase 1, the path it rated was lost, and its import
    # could not make the solution again (a -1 on the first step left no step at all). One that
    # went on with an alternative or a step of its own rated another path than the solution's,
    # which only phase 1's shape, whose steps are the path, describes: as phase 2's, the
    # solution's step it left would read as the step it went on with.
    if row.made_here:
        follows = _follows_the_solution(len(solution_steps), label_steps)
        steps_source = StepsSource.given if follows else StepsSource.label
    else:
        steps_source = row.steps_source
    record = render_record(
        labeler=labeler_of(row),
        created_at=row.created_at,
        # An imported label keeps the generation its file gave it, null included.
        generation=render_generation(row.generation, row.made_here, steps_source),
        is_quality_control=row.is_quality_control,
        is_initial_screening=row.is_initial_screening,
        question=render_question(
            row.statement,
            row.answer,
            row.reference_solution,
            solution_steps,
            steps_source,
            row.final_answer,
            row.verifier_score,
        ),
        solution_steps=solution_steps,
        label_steps=label_steps,
        total_time_ms=row.total_time_ms,
        finish_reason=row.finish_reason,
        finish_note=row.finish_note,
        extra=orjson.loads(row.extra) if row.extra else {},
    )
    if row.source != LabelSource.human:
        # Only machine records carry the keys PRM800K lacks: a human label reads as it always
        # did, so strict PRM800K readers see nothing new unless machine labels are exported.
        record["source"] = row.source.value
        if row.source_detail:
            record["source_detail"] = orjson.loads(row.source_detail)
        else:
            # An imported machine record brought its own, which `extra` gave back above.
            record.setdefault("source_detail", None)
    return record


def _follows_the_solution(n_solution_steps: int, label_steps: list[dict[str, Any]]) -> bool:
    """Whether the label went on with nothing but the solution's own steps: at each step the
    completion stored without text (see models.label) or none chosen, no step of the labeler's
    own, and no step past the solution's (PRM800K's phase 2 rates none)."""
    return len(label_steps) <= n_solution_steps and all(
        step.get("human_completion") is None
        and (step.get("chosen_completion") is None or "text" not in step["completions"][step["chosen_completion"]])
        for step in label_steps
    )


def export_format(fmt: str) -> ExportFormat:
    try:
        return ExportFormat(fmt)
    except ValueError:
        raise BadInput(f"unknown export format {fmt!r}; expected one of {', '.join(ExportFormat)}") from None


def write_export(session: Session, project: Project, fmt: str, filters: ExportFilters, sink: BinaryIO) -> int:
    """Write the export to a file; returns the number of records written."""
    export = Export(session, project.id, fmt, filters)
    for chunk in export.chunks():
        sink.write(chunk)
    return export.records


def stream_export(
    factory: sessionmaker[Session], project_id: int, fmt: str, filters: ExportFilters
) -> Generator[bytes, None, None]:
    """The export for an HTTP response, in a session of its own that reads only: the request's
    is closed by the time the body streams, and a download takes as long as its client reads."""
    with session_scope(factory, reads_only=True) as session:
        yield from Export(session, project_id, fmt, filters).chunks()


def export_filename(project: Project, fmt: str, today: date) -> str:
    suffix = "parquet" if export_format(fmt) == ExportFormat.parquet else "jsonl"
    return f"{project.name.replace(' ', '_')}-{fmt}-{today.isoformat()}.{suffix}"
