"""An import into a new project of a populated database plans its lookups for any project.

PostgreSQL's statistics, taken before the import, say the new project is empty; a lookup planned
for it scanned every row the import had added so far, for every chunk. The import must leave
such lookups to one generic plan, which probes the unique index by hash.
"""

from __future__ import annotations

import copy
import io

import pytest
from sqlalchemy import text
from app.db import session_scope
from app.imports import service, writer
from app.imports.service import import_file
from tests.conftest import add_many_solutions, make_project, prepared_plans
from tests.imports.conftest import jsonl, sample_records

CHUNKS = 15


@pytest.mark.parametrize("backend", ["postgresql"])
def test_lookups_are_planned_for_any_project(session_factory, backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    add_many_solutions(session_factory, make_project(session_factory, "large").id, 20_000)
    project = make_project(session_factory, "new")
    monkeypatch.setattr(service, "CHUNK_LINES", 10)
    # As in a file past what the writer keeps of rows: every chunk looks its rows up.
    monkeypatch.setattr(writer, "OWN_ROWS_KEPT", 0)
    monkeypatch.setattr(writer, "PROBLEMS_KEPT", 0)
    template = sample_records()[0]
    records = []
    # Every chunk meets problems and, in its second half, solutions of earlier chunks, which
    # are looked up; a solution's second label differs by its time on task.
    for i in range(CHUNKS * 10):
        solution = i % (CHUNKS * 5)
        record = copy.deepcopy(template)
        record["question"]["problem"] += f" ({solution % 20})"
        record["question"]["pre_generated_steps"][0] += f" ({solution})"
        record["label"]["total_time"] = i
        records.append(record)
    with session_scope(session_factory) as session:
        result = import_file(
            session, project, io.BytesIO(jsonl(records)), filename="f.jsonl", fmt="prm800k", separator=None, user=None
        )
        # The rest of the transaction plans as it did before the import.
        assert session.scalar(text("SELECT current_setting('plan_cache_mode')")) == "auto"
        found = prepared_plans(
            session,
            {
                "problems": "SELECT problems.content_hash, problems.id",
                "solutions": "SELECT solutions.content_hash, solutions.id",
                "labels": "SELECT labels.content_hash",
            },
        )
    assert result.added == {"problems": 20, "solutions": CHUNKS * 5, "labels": CHUNKS * 10}
    for table, plans in found.items():
        assert all(generic > 0 and custom == 0 for generic, custom in plans), (table, plans)
