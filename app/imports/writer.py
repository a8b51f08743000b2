"""Rows of one import, written a chunk at a time in the caller's transaction.

Each chunk looks up which content hashes the project already has, with one query per table,
and inserts the rest in one bulk insert per table (app.imports.bulk): no ORM object per row,
and no query per line. Rows written earlier in the same file are found by the same lookup.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.imports.answers import AnswerGrader
from app.imports.bulk import BulkRows
from app.imports.records import LabelIn, ProblemIn, SolutionIn, StoredProblem, StoredSolution
from app.models import Label, Problem, Solution, User


class BatchWriter:
    def __init__(self, session: Session, project_id: int, batch_id: int, now: datetime) -> None:
        self.rows = BulkRows(session)
        self.project_id = project_id
        self.batch_id = batch_id
        self.now = now
        self.grader = AnswerGrader()
        self.added = {"problems": 0, "solutions": 0, "labels": 0}
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
        stored = {
            row.content_hash: StoredProblem(row.id, row.content_hash, row.answer, row.reference_solution)
            for row in self.rows.lookup(
                select(Problem.content_hash, Problem.id, Problem.answer, Problem.reference_solution).where(
                    Problem.project_id == self.project_id
                ),
                Problem.content_hash,
                list(unique),
            )
        }
        missing = [p for h, p in unique.items() if h not in stored]
        if not missing:
            return stored, set()
        ids = self._insert(
            Problem,
            [
                {
                    "project_id": self.project_id,
                    "statement": p.statement,
                    "answer": p.answer,
                    "reference_solution": p.reference_solution,
                    "subject": p.subject,
                    "level": p.level,
                    "source_id": p.source_id,
                    "content_hash": p.hash,
                    "is_demo": False,
                    "created_at": self.now,
                }
                for p in missing
            ],
        )
        for p in missing:
            stored[p.hash] = StoredProblem(ids[p.hash], p.hash, p.answer, p.reference_solution)
        self.added["problems"] += len(missing)
        return stored, set(ids)

    def solutions(
        self, items: Sequence[tuple[StoredProblem, SolutionIn]], new_problems: Collection[str] = ()
    ) -> tuple[list[StoredSolution], set[str]]:
        """Each item's row, in order, and the hashes inserted now (graded as they go in).

        Solutions of `new_problems`, which were inserted just now, cannot be in the database
        yet: only the others are looked up.
        """
        hashes = [s.hash_for(p.hash) for p, s in items]
        lookup = {h for h, (p, _) in zip(hashes, items, strict=True) if p.hash not in new_problems}
        stored = {
            row.content_hash: StoredSolution(
                row.id, row.content_hash, row.steps_source, row.final_answer, row.verifier_score
            )
            for row in self.rows.lookup(
                select(
                    Solution.content_hash,
                    Solution.id,
                    Solution.steps_source,
                    Solution.final_answer,
                    Solution.verifier_score,
                ).where(Solution.project_id == self.project_id),
                Solution.content_hash,
                lookup,
            )
        }
        rows: dict[str, dict[str, Any]] = {}
        for h, (problem, solution) in zip(hashes, items, strict=True):
            if h not in stored and h not in rows:
                rows[h] = self._solution_row(h, problem, solution)
        if rows:
            ids = self._insert(Solution, list(rows.values()))
            for h, row in rows.items():
                stored[h] = StoredSolution(
                    ids[h], h, row["steps_source"], row["final_answer"], row["verifier_score"]
                )
            first = min(ids.values())
            if self.first_solution_id is None or first < self.first_solution_id:
                self.first_solution_id = first
            self.added["solutions"] += len(rows)
        return [stored[h] for h in hashes], set(rows)

    def _solution_row(self, content_hash: str, problem: StoredProblem, solution: SolutionIn) -> dict[str, Any]:
        final_answer = solution.final_answer
        grade, version = self.grader.grade(final_answer, problem.answer)
        self.grades[grade.value] = self.grades.get(grade.value, 0) + 1
        return {
            "project_id": self.project_id,
            "problem_id": problem.id,
            "steps": solution.steps,
            "steps_source": solution.steps_source,
            "final_answer": final_answer,
            "answer_grade": grade,
            "grader_version": version,
            "verifier_score": solution.verifier_score,
            "origin": solution.origin,
            "generation": solution.generation,
            "priority": 0.0,
            "content_hash": content_hash,
            "import_batch_id": self.batch_id,
            "is_demo": False,
            "created_at": self.now,
        }

    def labels(
        self, items: Sequence[tuple[str, int, LabelIn, dict[str, Any]]], new_solutions: Collection[int] = ()
    ) -> set[str]:
        """Insert (hash, solution id, label, extra) for hashes the project lacks; the new hashes.

        Labels of `new_solutions` (ids inserted just now) cannot be in the database yet: only
        the others are looked up.
        """
        older = [item for item in items if item[1] not in new_solutions]
        existing = {
            row.content_hash
            for row in self.rows.lookup(
                select(Label.content_hash).where(Label.project_id == self.project_id),
                Label.content_hash,
                {h for h, *_ in older},
            )
        }
        made_here = self._labels_made_here(older)
        rows: dict[str, dict[str, Any]] = {}
        for h, solution_id, label, extra in items:
            if h in existing or h in rows:
                continue
            if (solution_id, label.foreign_labeler, label.created_at) in made_here:
                continue
            rows[h] = {
                "project_id": self.project_id,
                "solution_id": solution_id,
                "foreign_labeler": label.foreign_labeler,
                "generation": label.generation,
                "is_quality_control": label.is_quality_control,
                "is_initial_screening": label.is_initial_screening,
                "finish_reason": label.finish_reason,
                "total_time_ms": label.total_time_ms,
                "steps": label.steps,
                "content_hash": h,
                "import_batch_id": self.batch_id,
                "extra": extra,
                "created_at": label.created_at,
            }
        if rows:
            self.rows.insert(Label, list(rows.values()), ids=False)
            self.added["labels"] += len(rows)
        return set(rows)

    def _labels_made_here(
        self, items: Sequence[tuple[str, int, LabelIn, dict[str, Any]]]
    ) -> set[tuple[int, str, datetime]]:
        """(solution id, labeler UUID, time) of this project's labels made here that `items` name.

        A label made in Stepwise has no content hash of a file; its export names the labeler by
        UUID and carries its exact time, which together with the solution identify it when the
        export comes back.
        """
        uuids = {label.foreign_labeler for _, _, label, _ in items if label.foreign_labeler}
        if not uuids:
            return set()
        rows = self.rows.execute(
            select(Label.solution_id, User.labeler_uuid, Label.created_at)
            .join(User, User.id == Label.user_id)
            .where(
                Label.project_id == self.project_id,
                self.rows.one_of(User.labeler_uuid, uuids),
                self.rows.one_of(Label.solution_id, {s for _, s, _, _ in items}),
            )
        )
        return {(row.solution_id, row.labeler_uuid, row.created_at) for row in rows}

    def _insert(self, model: type[Problem] | type[Solution], rows: list[dict[str, Any]]) -> dict[str, int]:
        ids = self.rows.insert(model, rows, ids=True)
        return {row["content_hash"]: id_ for row, id_ in zip(rows, ids, strict=True)}
