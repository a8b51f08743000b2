"""Sample solutions to a project's problems and put them into its pool.

What the generator (active_learning.generate) writes goes through the candidate import, which
grades each final answer against the problem's ground truth, records the grader's version, drops
repeats and queues the new solutions; the model and the sampling parameters land in each
solution's origin.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session

from active_learning.generate import GenerationConfig, Sampler, parse_solution
from app.errors import BadInput
from app.imports.records import MAX_ANSWER, MAX_STEPS
from app.imports.service import import_file
from app.models import Problem, Project, utcnow

PROBLEMS_PER_IMPORT = 256


@dataclass
class GenerationResult:
    problems: int = 0
    sampled: int = 0
    empty: int = 0
    added: int = 0
    duplicates: int = 0
    grades: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        grades = ", ".join(f"{n} {g}" for g, n in sorted(self.grades.items())) or "none"
        return (f"sampled {self.sampled} solutions for {self.problems} problems: {self.added} added, "
                f"{self.duplicates} already there, {self.empty} empty; answers: {grades}")


def generate_for_project(
    session: Session, project: Project, config: GenerationConfig, *, limit: int | None = None
) -> GenerationResult:
    """Sample `config.samples` solutions for each problem of the project and import them."""
    query = select(Problem.id, Problem.statement).where(Problem.project_id == project.id).order_by(Problem.id)
    problems = session.execute(query.limit(limit) if limit else query).all()
    result = GenerationResult(problems=len(problems))
    stamp = utcnow().strftime("%Y%m%dT%H%M%S")
    name = os.path.basename(config.model.rstrip("/")) or "model"
    if not problems:
        return result
    try:
        sampler = Sampler(config)
    except ValueError as e:  # a model that cannot be loaded or sampled from: the user's to mend
        raise BadInput(str(e)) from None
    for start in range(0, len(problems), PROBLEMS_PER_IMPORT):
        chunk = problems[start:start + PROBLEMS_PER_IMPORT]
        texts = sampler.sample([statement for _, statement in chunk])
        add_samples(session, project, config.origin(sampler.backend), [pid for pid, _ in chunk], texts,
                    f"generated-{name}-{stamp}-{start // PROBLEMS_PER_IMPORT}.jsonl", result)
    return result


def add_samples(
    session: Session,
    project: Project,
    origin: dict,
    problem_ids: Sequence[int],
    texts: Sequence[Sequence[str]],
    filename: str,
    result: GenerationResult,
) -> None:
    """Cut each problem's generated texts into steps and import them as candidates."""
    lines = []
    for problem_id, outputs in zip(problem_ids, texts, strict=True):
        for text in outputs:
            result.sampled += 1
            steps, answer = parse_solution(text)
            # A sampler may ramble past what the import takes; keep what fits instead of refusing the file.
            steps, answer = steps[:MAX_STEPS], answer[:MAX_ANSWER] if answer else answer
            if not steps:
                result.empty += 1
                continue
            lines.append({"problem_id": problem_id, "steps": steps, "answer": answer, "generator": origin})
    if not lines:
        return
    imported = import_file(
        session, project, io.BytesIO(b"".join(orjson.dumps(line) + b"\n" for line in lines)),
        filename=filename, fmt="solutions", separator=None, user=None,
    )
    result.added += imported.added.get("solutions", 0)
    result.duplicates += imported.duplicates
    for grade, count in imported.grades.items():
        result.grades[grade] = result.grades.get(grade, 0) + count
