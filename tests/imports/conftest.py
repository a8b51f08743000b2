"""Helpers for import and export tests: a realistic PRM800K sample and an import through the service."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.imports.schemas import ImportResult
from app.imports.service import import_file
from app.models import Assignment, ImportBatch, Label, Problem, Project, Solution

# Hand-written PRM800K records: phase 2 (found_error with alternatives, solution, a QC and a
# screening question, give_up, bad_problem), phase 1 (alternatives, a human completion object,
# chosen completions, an open final step), unicode, LaTeX, HTML in step text, unknown keys at
# every level, a solution labeled twice, a naive timestamp, an offset one, an integer score.
SAMPLE = Path(__file__).parent / "data" / "prm800k_sample.jsonl"


def sample_records() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in SAMPLE.read_bytes().splitlines()]


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def import_bytes(
    factory: sessionmaker[Session],
    project: Project,
    data: bytes,
    fmt: str = "prm800k",
    *,
    filename: str = "data.jsonl",
    separator: str | None = None,
) -> ImportResult:
    with session_scope(factory) as session:
        return import_file(
            session, project, io.BytesIO(data), filename=filename, fmt=fmt, separator=separator, user=None
        )


def row_counts(factory: sessionmaker[Session]) -> dict[str, int]:
    with session_scope(factory) as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
            for model in (ImportBatch, Problem, Solution, Label, Assignment)
        }
