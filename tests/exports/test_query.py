"""The export query's rows. On PostgreSQL they are read through COPY, not SQLAlchemy's result:
the same values of the same types whatever the filters, parameters quoted safely, a session
free to commit or roll back while rows are still being read, and one still usable after an
export that stopped early."""

from __future__ import annotations

import copy
from datetime import date, datetime
from typing import Any

import pytest
from sqlalchemy import Enum, Integer, String, func, literal, literal_column, select

from app.db import session_scope
from app.exports.query import _copy_parameter, label_query, stream_rows
from app.exports.schemas import ExportFilters
from app.models import Base, Label, Role, User
from app.quality.service import AccurateLabelers
from app.users.schemas import UserCreate
from app.users.service import create_user
from tests.conftest import PASSWORD, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes, jsonl, sample_records

postgresql_only = pytest.mark.parametrize("backend", ["postgresql"])

FILTERS: list[dict[str, Any]] = [
    {},
    {"since": date(2022, 11, 30), "until": date(2023, 1, 24)},
    {"generations": [9, 5, -1]},
    # Quotes, a backslash and percent signs travel as a literal, not as SQL.
    {"labelers": ["340d89bc-f5b7-45e9-b272-909ba68ee363", "o'brien \\ 100% %(x)s %s'; DROP TABLE labels; --"]},
    {"qc": "exclude"},
    {"qc": "only"},
]


def _described(row: Any) -> list[tuple[type, Any]]:
    # Datetimes by their text too, offset included: equal datetimes can differ in their zone.
    return [(type(v), v.isoformat() if isinstance(v, datetime) else v) for v in row]


def _sample_project(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    return project


def _same_rows(session_factory, query) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        streamed = [_described(row) for row in stream_rows(session, query)]
        expected = [_described(row) for row in session.execute(query)]
    assert expected
    assert streamed == expected


@postgresql_only
@pytest.mark.parametrize("finished_only", [False, True])
@pytest.mark.parametrize("filters", FILTERS)
def test_rows_are_what_sqlalchemy_gives(session_factory, filters, finished_only) -> None:  # type: ignore[no-untyped-def]
    project = _sample_project(session_factory)
    _same_rows(session_factory, label_query(project.id, ExportFilters(**filters), finished_only=finished_only))


@postgresql_only
def test_rows_of_accurate_labelers_are_what_sqlalchemy_gives(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _sample_project(session_factory)
    user = make_user(session_factory, "lena", "labeler")
    accurate = AccurateLabelers(
        user_ids=frozenset({user.id}), foreign_labelers=frozenset({"340d89bc-f5b7-45e9-b272-909ba68ee363", "o'x"})
    )
    _same_rows(session_factory, label_query(project.id, ExportFilters(), accurate=accurate))


@postgresql_only
def test_rows_have_the_query_columns_by_name(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _sample_project(session_factory)
    query = label_query(project.id, ExportFilters())
    with session_scope(session_factory) as session:
        row = next(iter(stream_rows(session, query)))
        assert row._fields == tuple(c.key for c in query.selected_columns)
        assert row.created_at.utcoffset().total_seconds() == 0


@postgresql_only
@pytest.mark.parametrize("with_parameter", [False, True])
def test_a_percent_sign_in_the_statement_stays_one(session_factory, with_parameter) -> None:  # type: ignore[no-untyped-def]
    query = select(literal_column("'100%'", String).label("text"))
    if with_parameter:
        query = query.where(literal(1, Integer) == 1)
    with session_scope(session_factory) as session:
        assert [row.text for row in stream_rows(session, query)] == ["100%"]


def _big_project(session_factory):  # type: ignore[no-untyped-def]
    # Megabytes of rows, more than the socket holds: the server is still sending when the
    # reader stops, so the COPY has to be cancelled, not just dropped.
    template = sample_records()[0]
    records = []
    for n in range(40):
        record = copy.deepcopy(template)
        record["question"]["problem"] = f"Problem {n}: " + "x" * 100_000
        records.append(record)
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(records))
    return project


@postgresql_only
def test_an_export_left_early_leaves_the_session_usable(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _big_project(session_factory)
    with session_scope(session_factory) as session:
        rows = stream_rows(session, label_query(project.id, ExportFilters()))
        assert next(rows).statement.startswith("Problem 0: ")
        rows.close()
        assert session.scalar(select(func.count(Label.id))) == 40


@postgresql_only
@pytest.mark.timeout(120)
def test_a_session_can_end_while_rows_are_still_being_read(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _big_project(session_factory)
    # The consumer raises while it holds the rows: the session rolls back at once.
    with pytest.raises(RuntimeError, match="consumer failed"):
        with session_scope(session_factory) as session:
            rows = stream_rows(session, label_query(project.id, ExportFilters()))
            next(rows)
            raise RuntimeError("consumer failed")
    # Or it writes and commits midway: the write lands.
    with session_scope(session_factory) as session:
        rows = stream_rows(session, label_query(project.id, ExportFilters()))
        next(rows)
        create_user(session, UserCreate(username="midway", role=Role.labeler, password=PASSWORD))
        session.commit()
        assert sum(1 for _ in rows) == 39
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count(User.id)).where(User.username == "midway")) == 1


def test_copy_parameters_are_plain_values_or_refused() -> None:
    assert _copy_parameter("o'brien") == "o'brien"
    with pytest.raises(ValueError, match="naive"):
        _copy_parameter(datetime(2023, 1, 1))
    with pytest.raises(TypeError, match="no COPY parameter"):
        _copy_parameter([1, 2])


def test_every_enum_column_stores_member_names() -> None:
    # COPY parameters bind an enum member by name (app.exports.query._copy_parameter), as
    # SQLAlchemy does for a non-native Enum without values_callable.
    for table in Base.metadata.tables.values():
        for column in table.columns:
            if isinstance(column.type, Enum) and column.type.enum_class is not None:
                assert column.type.enums == [m.name for m in column.type.enum_class], column
