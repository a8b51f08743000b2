"""One chunk of parsed lines, per format, through the BatchWriter; each returns its duplicates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from app.imports.line_errors import LineErrors
from app.imports.prm800k import label_extra
from app.imports.records import Candidate, PrmRecord, StoredProblem
from app.imports.writer import BatchWriter, exported_source
from app.machine_labels.service import machine_label_hash
from app.models import LabelSource, Problem


def _duplicates(hashes: Iterable[str], new: set[str]) -> int:
    """Lines whose row was there already, or came earlier in the file."""
    fresh = set(new)
    count = 0
    for h in hashes:
        if h in fresh:
            fresh.discard(h)
        else:
            count += 1
    return count


def write_problems(writer: BatchWriter, parsed: list[tuple[int, Any]]) -> int:
    problems = [p for _, p in parsed]
    _, new = writer.problems(problems)
    return _duplicates((p.hash for p in problems), new)


def write_prm800k(writer: BatchWriter, parsed: list[tuple[int, PrmRecord]]) -> int:
    every = [r for _, r in parsed]
    problems, new_problems = writer.problems([r.problem for r in every])
    # A label made here comes back from the project's own export as a record whose solution may
    # be new (phase 1's, the labeler's path): it is the project's already, and so is its solution.
    made_here = writer.labels_made_here([(problems[r.problem.hash], r.label) for r in every if r.label is not None])
    records = [
        r for r in every
        if r.label is None
        or (problems[r.problem.hash].id, r.label.foreign_labeler, r.label.created_at) not in made_here
    ]
    solutions, new_solutions = writer.solutions(
        [(problems[r.problem.hash], r.solution) for r in records], new_problems
    )
    unlabeled: list[str] = []
    labels = []
    for record, solution in zip(records, solutions, strict=True):
        if record.label is None:
            unlabeled.append(solution.hash)
            continue
        extra = label_extra(record, problems[record.problem.hash], solution)
        labels.append((_label_hash(record, solution.hash, solution.id, extra), solution.id, record.label, extra))
    own = {s.id for s in solutions if s.hash in new_solutions or writer.wrote_solution(s.hash)}
    new_labels = writer.labels(labels, own)
    return (len(every) - len(records) + _duplicates(unlabeled, new_solutions)
            + _duplicates((h for h, *_ in labels), new_labels))


def _label_hash(record: PrmRecord, solution_hash: str, solution_id: int, extra: dict[str, Any]) -> str:
    """A machine label Stepwise exported names its generator's key: hashed as the machine labels
    service hashes it, it is the label it came from, and a project's own export imported back
    adds nothing. Any other label is hashed from its content."""
    assert record.label is not None
    detail = (extra.get("record") or {}).get("source_detail")
    if exported_source(extra) != LabelSource.human and isinstance(detail, dict) and isinstance(detail.get("key"), str):
        return machine_label_hash(detail["key"], solution_id)
    return record.label.hash_for(solution_hash)


def write_candidates(writer: BatchWriter, parsed: list[tuple[int, Candidate]], errors: LineErrors) -> int:
    columns = (Problem.id, Problem.content_hash, Problem.answer, Problem.reference_solution)
    ids = {c.problem_id for _, c in parsed if c.problem_id is not None}
    source_ids = {c.problem_source_id for _, c in parsed if c.problem_source_id is not None}
    statements = {c.problem_statement for _, c in parsed if c.problem_statement is not None}
    by_id: dict[int, StoredProblem] = {}
    by_source_id: dict[str, list[StoredProblem]] = {}
    by_statement: dict[str, list[StoredProblem]] = {}
    of_project = select(Problem.statement, Problem.source_id, *columns).where(Problem.project_id == writer.project_id)
    for row in writer.rows.lookup(of_project, Problem.id, ids):
        by_id[row.id] = StoredProblem(row.id, row.content_hash, row.answer, row.reference_solution)
    for row in writer.rows.lookup(of_project, Problem.source_id, source_ids):
        stored = StoredProblem(row.id, row.content_hash, row.answer, row.reference_solution)
        by_source_id.setdefault(row.source_id, []).append(stored)
    for row in writer.rows.lookup(of_project, Problem.statement, statements):
        stored = StoredProblem(row.id, row.content_hash, row.answer, row.reference_solution)
        by_statement.setdefault(row.statement, []).append(stored)
    items = []
    for number, candidate in parsed:
        if candidate.problem_id is not None:
            problem = by_id.get(candidate.problem_id)
            if problem is None:
                errors.add(number, "problem_id", f"no problem {candidate.problem_id} in this project")
                continue
        elif candidate.problem_source_id is not None:
            matches = by_source_id.get(candidate.problem_source_id, [])
            if len(matches) != 1:
                errors.add(number, "problem_id", _unmatched_source_id(candidate.problem_source_id, len(matches)))
                continue
            problem = matches[0]
        else:
            matches = by_statement.get(candidate.problem_statement or "", [])
            if len(matches) != 1:
                errors.add(number, "problem", _unmatched(len(matches)))
                continue
            problem = matches[0]
        items.append((problem, candidate.solution))
    if errors.count or not items:
        return 0
    solutions, new = writer.solutions(items)
    return _duplicates((s.hash for s in solutions), new)


def _unmatched(matches: int) -> str:
    if matches == 0:
        return "no problem with this text in the project: import the problems first, or give problem_id"
    return f"{matches} problems have this text (with different answers): give problem_id (the problem's unique_id)"


def _unmatched_source_id(source_id: str, matches: int) -> str:
    shown = source_id if len(source_id) <= 80 else source_id[:79] + "…"
    if matches == 0:
        return f"no problem with unique_id {shown!r} in this project: import the problems first"
    return f"{matches} problems have unique_id {shown!r}: give the problem's text or Stepwise's number instead"
