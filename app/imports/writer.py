"""Rows of one import, written a chunk at a time in the caller's transaction.

Each chunk inserts the rows the project lacks with one bulk insert per table (app.imports.bulk):
no ORM object per row, and no query per line. Which rows it lacks is known two ways. The rows
this import wrote itself are known by their content hashes, which the writer keeps; the rows
from before the import are looked up, one query per table and chunk. Such a lookup need not see
this import's rows, so it does not wait for the COPYs on their way (one that asks for a row the
import wrote does), and none is needed at all for the solutions of a problem the import added,
nor for the labels of a solution it added. So PostgreSQL takes in one chunk's rows while Python
reads the next ones: a 1,000,000-step import into a new project, which had run a lookup per
table and chunk, each after the COPYs before it, took 21.4 / 22.1 s against 29.3 / 29.3 s
(alternating, on a slow hour).

Past `OWN_ROWS_KEPT` hashes, which bounds the writer's memory, it forgets them, and every
lookup waits for the COPYs and finds the import's rows with the others.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.imports.answers import AnswerGrader
from app.imports.bulk import BulkRows
from app.imports.records import LabelIn, ProblemIn, SolutionIn, StoredProblem, StoredSolution, encode_document
from app.models import MACHINE_SOURCES, Label, LabelSource, Problem, Solution, User

# About 80 bytes each: 60 MB at most.
OWN_ROWS_KEPT = 750_000
# Problems recur across a file (PRM800K has some 12,000 for 800,000 labels): their rows are
# kept, so that a chunk rarely looks one up.
PROBLEMS_KEPT = 100_000

# The columns of the rows each table is given, in the order the rows hold them.
_PROBLEM_COLUMNS = (
    "project_id",
    "statement",
    "answer",
    "reference_solution",
    "subject",
    "level",
    "source_id",
    "content_hash",
    "import_batch_id",
    "is_demo",
    "created_at",
)
_SOLUTION_COLUMNS = (
    "project_id",
    "problem_id",
    "steps",
    "steps_source",
    "final_answer",
    "answer_grade",
    "grader_version",
    "verifier_score",
    "origin",
    "generation",
    "priority",
    "content_hash",
    "import_batch_id",
    "is_demo",
    "created_at",
)
_LABEL_COLUMNS = (
    "project_id",
    "solution_id",
    "foreign_labeler",
    "generation",
    "is_quality_control",
    "is_initial_screening",
    "finish_reason",
    "finish_note",
    "total_time_ms",
    "steps",
    "content_hash",
    "import_batch_id",
    "extra",
    "created_at",
    "source",
)


MACHINE_SOURCE_VALUES = frozenset(source.value for source in MACHINE_SOURCES)


def exported_source(extra: dict[str, Any]) -> str:
    """A record Stepwise exported from a machine label names its source (and keeps it, with
    `source_detail`, in `extra` to be written back): read again, it is that machine's label, which
    must not pass for a labeler's."""
    source = (extra.get("record") or {}).get("source")
    return source if source in MACHINE_SOURCE_VALUES else LabelSource.human.value


def _key(content_hash: str) -> int:
    # The hash's first 128 bits take a third of the memory of its hex string.
    return int(content_hash[:32], 16)


class _OwnRows:
    """The content hashes of the rows this import wrote, by table, until there are too many.

    While `complete`, a hash not here is not one of the import's rows.
    """

    def __init__(self) -> None:
        self.complete = True
        self._keys: dict[str, set[int]] = {"problems": set(), "solutions": set(), "labels": set()}
        self._count = 0

    def add(self, table: str, hashes: Iterable[str]) -> None:
        if not self.complete:
            return
        keys = self._keys[table]
        before = len(keys)
        keys.update(map(_key, hashes))
        self._count += len(keys) - before
        if self._count > OWN_ROWS_KEPT:
            self.complete = False
            self._keys = {table: set() for table in self._keys}

    def has(self, table: str, content_hash: str) -> bool:
        """Whether the import wrote this row, as far as is known (never, once not complete)."""
        return self.complete and _key(content_hash) in self._keys[table]


class BatchWriter:
    def __init__(self, session: Session, project_id: int, batch_id: int, now: datetime) -> None:
        self.rows = BulkRows(session)
        self._own = _OwnRows()
        self._problems: dict[str, StoredProblem] = {}
        self.project_id = project_id
        self.batch_id = batch_id
        self.now = now
        self.grader = AnswerGrader()
        self.added = {"problems": 0, "solutions": 0, "labels": 0}
        # New problems with no reference answer: their solutions stay ungraded.
        self.without_answer = 0
        self.grades: dict[str, int] = {}
        self.first_solution_id: int | None = None

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        # An error of the import's own outranks a COPY's, which may only be its consequence.
        self.rows.close(raise_error=exc is None)

    def problems(self, items: Sequence[ProblemIn]) -> tuple[dict[str, StoredProblem], set[str]]:
        """Every item's row by hash, and the hashes inserted now."""
        unique: dict[str, ProblemIn] = {}
        for p in items:
            unique.setdefault(p.hash, p)
        stored = {h: self._problems[h] for h in unique if h in self._problems}
        for row in self._lookup(
            select(Problem.content_hash, Problem.id, Problem.answer, Problem.reference_solution).where(
                Problem.project_id == self.project_id
            ),
            Problem.content_hash,
            "problems",
            [h for h in unique if h not in stored],
        ):
            stored[row.content_hash] = StoredProblem(row.id, row.content_hash, row.answer, row.reference_solution)
        missing = [p for h, p in unique.items() if h not in stored]
        if missing:
            ids = self.rows.insert(
                Problem,
                _PROBLEM_COLUMNS,
                [
                    (
                        self.project_id,
                        p.statement,
                        p.answer,
                        p.reference_solution,
                        p.subject,
                        p.level,
                        p.source_id,
                        p.hash,
                        self.batch_id,
                        False,
                        self.now,
                    )
                    for p in missing
                ],
                ids=True,
            )
            for p, id_ in zip(missing, ids, strict=True):
                stored[p.hash] = StoredProblem(id_, p.hash, p.answer, p.reference_solution)
            self._own.add("problems", (p.hash for p in missing))
            self.added["problems"] += len(missing)
            self.without_answer += sum(p.answer is None for p in missing)
        if len(self._problems) + len(stored) > PROBLEMS_KEPT:
            self._problems.clear()
        self._problems.update(stored)
        return stored, {p.hash for p in missing}

    def solutions(
        self, items: Sequence[tuple[StoredProblem, SolutionIn]], new_problems: Collection[str] = ()
    ) -> tuple[list[StoredSolution], set[str]]:
        """Each item's row, in order, and the hashes inserted now (graded as they go in).

        Solutions of `new_problems`, which were inserted just now, cannot be in the database
        yet, nor can those of a problem this import wrote, unless the import wrote them too:
        only the others are looked up.
        """
        hashes = [s.hash_for(p.hash) for p, s in items]
        lookup = {
            h for h, (p, _) in zip(hashes, items, strict=True) if self._may_be_stored(p.hash, h, new_problems)
        }
        stored = {
            row.content_hash: StoredSolution(
                row.id, row.content_hash, row.steps_source, row.final_answer, row.verifier_score
            )
            for row in self._lookup(
                select(
                    Solution.content_hash,
                    Solution.id,
                    Solution.steps_source,
                    Solution.final_answer,
                    Solution.verifier_score,
                ).where(Solution.project_id == self.project_id),
                Solution.content_hash,
                "solutions",
                lookup,
            )
        }
        fresh: dict[str, tuple[StoredProblem, SolutionIn]] = {}
        for h, item in zip(hashes, items, strict=True):
            if h not in stored and h not in fresh:
                fresh[h] = item
        if fresh:
            rows = [self._solution_row(h, problem, solution) for h, (problem, solution) in fresh.items()]
            ids = self.rows.insert(Solution, _SOLUTION_COLUMNS, rows, ids=True)
            self._own.add("solutions", fresh)
            for (h, (_, solution)), id_ in zip(fresh.items(), ids, strict=True):
                stored[h] = StoredSolution(id_, h, solution.steps_source, solution.final_answer, solution.verifier_score)
            first = min(ids)
            if self.first_solution_id is None or first < self.first_solution_id:
                self.first_solution_id = first
            self.added["solutions"] += len(fresh)
        return [stored[h] for h in hashes], set(fresh)

    def _may_be_stored(self, problem: str, solution: str, new_problems: Collection[str]) -> bool:
        if problem in new_problems:
            return False
        # A problem the import wrote has only the solutions the import wrote.
        return not self._own.has("problems", problem) or self._own.has("solutions", solution)

    def _solution_row(self, content_hash: str, problem: StoredProblem, solution: SolutionIn) -> tuple[Any, ...]:
        final_answer = solution.final_answer
        grade, version = self.grader.grade(final_answer, problem.answer)
        self.grades[grade.value] = self.grades.get(grade.value, 0) + 1
        return (
            self.project_id,
            problem.id,
            solution.steps_json,
            solution.steps_source.value,
            final_answer,
            grade.value,
            version,
            solution.verifier_score,
            encode_document(solution.origin),
            solution.generation,
            0.0,
            content_hash,
            self.batch_id,
            False,
            self.now,
        )

    def labels(
        self, items: Sequence[tuple[str, int, LabelIn, dict[str, Any]]], own_solutions: Collection[int] = ()
    ) -> set[str]:
        """Insert (hash, solution id, label, extra) for hashes the project lacks; the new hashes.

        `own_solutions` are ids of solutions this import wrote: their labels are in the
        database only if the import wrote them too (see `wrote_solution`). Only the labels of
        other solutions are looked up.
        """
        older = [item for item in items if item[1] not in own_solutions]
        existing = {h for h, solution_id, *_ in items if solution_id in own_solutions and self._own.has("labels", h)}
        existing.update(
            row.content_hash
            for row in self._lookup(
                select(Label.content_hash).where(Label.project_id == self.project_id),
                Label.content_hash,
                "labels",
                {h for h, *_ in older},
            )
        )
        rows: dict[str, tuple[Any, ...]] = {}
        for h, solution_id, label, extra in items:
            if h in existing or h in rows:
                continue
            reason = label.finish_reason
            rows[h] = (
                self.project_id,
                solution_id,
                label.foreign_labeler,
                label.generation,
                label.is_quality_control,
                label.is_initial_screening,
                None if reason is None else reason.value,
                label.finish_note,
                label.total_time_ms,
                label.steps.stored,
                h,
                self.batch_id,
                encode_document(extra),
                label.created_at,
                exported_source(extra),
            )
        if rows:
            self.rows.insert(Label, _LABEL_COLUMNS, list(rows.values()), ids=False)
            self._own.add("labels", rows)
            self.added["labels"] += len(rows)
        return set(rows)

    def labels_made_here(self, items: Sequence[tuple[StoredProblem, LabelIn]]) -> set[tuple[int, str, datetime]]:
        """(problem id, labeler UUID, time) of this project's labels made here that the
        (problem, label) `items` name.

        A label made in Stepwise has no content hash of a file; its export names the labeler by
        UUID and carries its exact time, which together with the problem identify it when the
        export comes back. Not with the solution: the record of a label that went on with an
        alternative or a step of its own is phase 1's, whose solution is the labeler's path.
        """
        # A problem this import wrote has no label made here.
        wanted = [
            (problem.id, label.foreign_labeler)
            for problem, label in items
            if label.foreign_labeler and not self._own.has("problems", problem.hash)
        ]
        if not wanted:
            return set()
        # Labels made in Stepwise, and the solutions they rate: none is in a COPY of this import.
        rows = self.rows.execute(
            select(Solution.problem_id, User.labeler_uuid, Label.created_at)
            .join(User, User.id == Label.user_id)
            .join(Solution, Solution.id == Label.solution_id)
            .where(
                Label.project_id == self.project_id,
                self.rows.one_of(User.labeler_uuid, {uuid for _, uuid in wanted}),
                self.rows.one_of(Solution.problem_id, {problem_id for problem_id, _ in wanted}),
            ),
            beside_copies=True,
        )
        return {(row.problem_id, row.labeler_uuid, row.created_at) for row in rows}

    def wrote_solution(self, content_hash: str) -> bool:
        """Whether this import wrote the solution, as far as the writer knows."""
        return self._own.has("solutions", content_hash)

    def _lookup(
        self, query: Select[Any], column: InstrumentedAttribute[Any], table: str, hashes: Collection[str]
    ) -> Iterable[Any]:
        """The rows of `query` with these hashes: beside the COPYs on their way unless one of
        the rows may be in them, that is, unless the import wrote it or no longer knows."""
        mine = not self._own.complete or any(self._own.has(table, h) for h in hashes)
        return self.rows.lookup(query, column, hashes, beside_copies=not mine)
