"""The export query's rows. On PostgreSQL they are read through COPY, not SQLAlchemy's result:
the same values of the same types whatever the filters, parameters quoted safely, and a
session still usable after an export that stopped early."""

from __future__ import annotations

import copy
from datetime import date, datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from app.db import session_scope
from app.exports.query import label_query, stream_rows
from app.exports.schemas import ExportFilters
from app.models import Label
from tests.conftest import make_project
from tests.imports.conftest import SAMPLE, import_bytes, jsonl, sample_records

pytestmark = pytest.mark.parametrize("backend", ["postgresql"])

FILTERS: list[dict[str, Any]] = [
    {},
    {"since": date(2022, 11, 30), "until": date(2023, 1, 24)},
    {"generations": [9, 5, -1]},
    # Quotes, a backslash and a percent sign travel as a literal, not as SQL.
    {"labelers": ["340d89bc-f5b7-45e9-b272-909ba68ee363", "o'brien \\ 100%'; DROP TABLE labels; --"]},
    {"qc": "exclude"},
    {"qc": "only"},
]


def _described(row: Any) -> list[tuple[type, Any]]:
    # Datetimes by their text too: the export writes isoformat(), offset included.
    return [(type(v), v.isoformat() if isinstance(v, datetime) else v) for v in row]


@pytest.mark.parametrize("finished_only", [False, True])
@pytest.mark.parametrize("filters", FILTERS)
def test_rows_are_what_sqlalchemy_gives(session_factory, filters, finished_only) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    query = label_query(project.id, ExportFilters(**filters), finished_only=finished_only)
    with session_scope(session_factory) as session:
        streamed = [_described(row) for row in stream_rows(session, query)]
        expected = [_described(row) for row in session.execute(query)]
        assert session.scalar(select(func.count(Label.id))) == 9
    assert expected
    assert streamed == expected


def test_rows_have_the_query_columns_by_name(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    query = label_query(project.id, ExportFilters())
    with session_scope(session_factory) as session:
        row = next(iter(stream_rows(session, query)))
        assert row._fields == tuple(c.key for c in query.selected_columns)
        assert row.created_at.utcoffset().total_seconds() == 0


def test_an_export_left_early_leaves_the_session_usable(session_factory) -> None:  # type: ignore[no-untyped-def]
    # Megabytes of rows, more than the socket holds: the server is still sending when the
    # reader goes, so the COPY has to be cancelled, not just dropped.
    template = sample_records()[0]
    records = []
    for n in range(40):
        record = copy.deepcopy(template)
        record["question"]["problem"] = f"Problem {n}: " + "x" * 100_000
        records.append(record)
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(records))
    with session_scope(session_factory) as session:
        rows = stream_rows(session, label_query(project.id, ExportFilters()))
        assert next(rows).statement.startswith("Problem 0: ")
        rows.close()
        assert session.scalar(select(func.count(Label.id))) == 40
