"""Importing a JSONL file into a project: all of it, or nothing.

The file streams through in chunks, all in the caller's one transaction. Every line is checked;
after the first bad one nothing more is written, the rest is only checked, and BadInput with
every bad line makes the caller roll the whole file back.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import PurePath
from typing import Any, BinaryIO

from sqlalchemy import or_, select, true
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.errors import BadInput, BadLines, ServiceError
from app.imports.candidates import MAX_SEPARATOR_LENGTH, parse_candidate, separator_from
from app.imports.chunks import write_candidates, write_prm800k, write_problems
from app.imports.fields import Invalid
from app.imports.line_errors import LineErrors
from app.imports.prm800k import parse_prm800k
from app.imports.problems import parse_problem
from app.imports.reader import Line, hashed_and_rewound, json_object, not_jsonl, read_lines
from app.imports.removal import labeled_earlier_solutions
from app.imports.schemas import ImportBatchRead, ImportResult
from app.imports.writer import BatchWriter
from app.labeling.queue import add_batch_slots, drop_filled_slots
from app.models import ImportBatch, ImportFormat, Project, User, utcnow

CHUNK_LINES = 1000
CHUNK_BYTES = 32 * 1024 * 1024


class UploadTooLarge(ServiceError):
    status_code = 413


def check_upload_size(size: int | None, limit_mb: int) -> None:
    """Refuse an upload over STEPWISE_MAX_UPLOAD_MB before reading it (its size is known once
    the multipart body is spooled)."""
    if size is not None and size > limit_mb * 1024 * 1024:
        raise UploadTooLarge(f"the file is larger than the {limit_mb} MB upload limit")


def import_file(
    session: Session,
    project: Project,
    stream: BinaryIO,
    *,
    filename: str,
    fmt: str,
    separator: str | None,
    user: User | None,
) -> ImportResult:
    try:
        format_ = ImportFormat(fmt)
    except ValueError:
        raise BadInput(f"unknown import format {fmt!r}; expected one of {', '.join(ImportFormat)}") from None
    # The name's last part, no directory: ".." names none either (PurePath keeps it as a name).
    filename = PurePath(filename.replace("\\", "/")).name.strip()[:255]
    if filename in ("", ".", ".."):
        filename = "upload.jsonl"
    step_separator = separator_from(separator)
    if not step_separator:
        raise BadInput("the step separator must not be empty")
    if len(step_separator) > MAX_SEPARATOR_LENGTH:
        raise BadInput(f"the step separator must be at most {MAX_SEPARATOR_LENGTH} characters long")
    # Only a solutions file's text is cut at it.
    kept_separator = step_separator if format_ == ImportFormat.solutions else None
    digest, stream = hashed_and_rewound(stream)
    if (instead := not_jsonl(stream)) is not None:
        # Bad data, as a bad line is (the CLI exits 2).
        raise BadLines(f"nothing was imported: {filename} is {instead}")
    # Imports into one project take turns, so that two uploads of one file cannot both pass the
    # check below. NO KEY UPDATE: labelers' inserts, which share-lock the project row through
    # their foreign keys, are not held up.
    session.execute(select(Project.id).where(Project.id == project.id).with_for_update(key_share=True))
    # The same bytes read as another format, or cut at another separator, are another import.
    # A batch from before separators were kept (null) matches any.
    earlier = session.scalar(
        select(ImportBatch)
        .where(
            ImportBatch.project_id == project.id,
            ImportBatch.file_sha256 == digest,
            ImportBatch.format == format_,
            or_(ImportBatch.separator.is_(None), ImportBatch.separator == kept_separator)
            if kept_separator is not None
            else true(),
        )
        .order_by(ImportBatch.id)
        .limit(1)
    )
    if earlier is not None:
        return ImportResult(
            batch_id=earlier.id,
            project_id=project.id,
            filename=filename,
            format=earlier.format,
            lines=earlier.lines,
            added={"problems": 0, "solutions": 0, "labels": 0},
            duplicates=earlier.lines,
            already_imported=True,
        )
    now = utcnow()
    batch = ImportBatch(
        project_id=project.id,
        user_id=user.id if user else None,
        filename=filename,
        format=format_,
        file_sha256=digest,
        separator=kept_separator,
        created_at=now,
    )
    session.add(batch)
    session.flush()
    with _cycle_collection_paused():
        result = _import_lines(session, project, batch, format_, step_separator, stream)
    # Named as its removal names it (app.imports.removal), so that the two read together.
    audit.record(session, user, "import.added", f"imported file {batch.filename} (import {batch.id})",
                 project=project.name, format=format_.value, added=result.added, duplicates=result.duplicates)
    return result


@contextmanager
def _cycle_collection_paused() -> Iterator[None]:
    """Parsed JSON is millions of short-lived dicts and lists without cycles: refcounting frees
    them, and the cycle collector, which would otherwise rescan every chunk while it is alive,
    took about 45% of an import's CPU time. Paused for the import only (process-wide); the
    youngest generation is still collected once a chunk, when the chunk's data is gone."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _import_lines(
    session: Session,
    project: Project,
    batch: ImportBatch,
    format_: ImportFormat,
    step_separator: str,
    stream: BinaryIO,
) -> ImportResult:
    filename = batch.filename
    errors = LineErrors(filename)
    lines = duplicates = uncut = 0
    parse = _parser(format_, step_separator, {"file": filename, "batch": batch.id}, batch.created_at)
    with BatchWriter(session, project.id, batch.id, batch.created_at) as writer:
        for chunk in _chunks(read_lines(stream)):
            lines += len(chunk)
            parsed: list[tuple[int, Any]] = []
            for line in chunk:
                if line.error is not None:
                    errors.add(line.number, None, line.error)
                    continue
                try:
                    parsed.append((line.number, parse(line.number, line.raw)))
                except Invalid as exc:
                    errors.add(line.number, exc.field, exc.message)
            if format_ == ImportFormat.solutions:
                # Which problem a candidate means is only known from the database: check every line.
                duplicates += write_candidates(writer, parsed, errors)
                uncut += sum(candidate.uncut for _, candidate in parsed)
            elif not errors.count:
                write = write_problems if format_ == ImportFormat.math else write_prm800k
                duplicates += write(writer, parsed)
            # The grader's parse trees are cyclic: free this chunk's (see _cycle_collection_paused).
            # The chunk's records go first, or the collection walks every object of them.
            del parsed
            gc.collect(0)
    if lines == 0:
        # Bad data, as a bad line is (the CLI exits 2), though there is no line to list.
        raise BadLines(f"nothing was imported: {filename} holds no records (it is empty or only blank lines; "
                       "expected one JSON object a line)")
    errors.raise_if_any(lines)
    first_id = writer.first_solution_id
    queued = 0 if first_id is None else add_batch_slots(session, project, batch.id, first_id)
    unqueued = drop_filled_slots(session, project, labeled_earlier_solutions(session, batch.id))
    batch.lines = lines
    batch.added = {**writer.added, "duplicates": duplicates}
    return ImportResult(
        batch_id=batch.id,
        project_id=project.id,
        filename=filename,
        format=format_,
        lines=lines,
        added=dict(writer.added),
        duplicates=duplicates,
        grades=dict(writer.grades),
        queued=queued,
        unqueued=unqueued,
        problems_without_answer=writer.without_answer,
        uncut=uncut,
    )


def list_batches(session: Session, project: Project) -> list[ImportBatchRead]:
    batches = session.scalars(
        select(ImportBatch).where(ImportBatch.project_id == project.id).order_by(ImportBatch.id.desc())
    )
    return [ImportBatchRead.model_validate(b) for b in batches]


def _parser(
    format_: ImportFormat, separator: str, origin: dict[str, Any], now: datetime
) -> Callable[[int, bytes], Any]:
    if format_ == ImportFormat.math:
        return lambda number, raw: parse_problem(json_object(raw))
    if format_ == ImportFormat.solutions:
        return lambda number, raw: parse_candidate(json_object(raw), separator, {**origin, "line": number})
    return lambda number, raw: parse_prm800k(raw, {**origin, "line": number}, now)


def _chunks(lines: Iterable[Line]) -> Iterator[list[Line]]:
    chunk: list[Line] = []
    size = 0
    for line in lines:
        chunk.append(line)
        size += len(line.raw)
        if len(chunk) >= CHUNK_LINES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk
