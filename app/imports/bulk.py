"""Many rows at once: bulk inserts (COPY on PostgreSQL) and lookups by a list of values.

On PostgreSQL a multi-row INSERT of a thousand solutions is a statement of fifteen thousand
parameters that the driver re-parses in Python for every chunk, and JSON is encoded by the
standard library; COPY streams the rows instead, with JSON encoded by orjson (a 100,000-step
PRM800K import took 40% less time). Ids come from the table's sequence first, so that callers
get them as with RETURNING. For the same reason a lookup of a thousand hashes is one array
parameter there, joined as a set: `= ANY(array)` reads well, but once the driver prepares the
statement PostgreSQL's generic plan compares every row with every element in turn (0.1 s per
chunk against the problems of a 200,000-step import, a third of its time).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson
from sqlalchemy import JSON, ColumnElement, Enum, bindparam, func, insert, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.models import Base


def plan_lookups_for_any_project(session: Session) -> None:
    """Plan each repeated lookup once for any project (generic plans), for the rest of the
    transaction, not for the project at hand.

    The statistics PostgreSQL plans with were taken before the import, and say the project being
    filled has no rows: a plan made for it scans all its rows for every chunk's lookup of content
    hashes, so the import grows with the square of its size (a 1,000,000-step file took 20.8 s
    beside 100,000 solutions of another project, 15.2 s in an empty database). A generic plan
    probes the unique index once per hash (15.9 s there). psycopg prepares a lookup on its sixth
    run, so the first five chunks, when the project is still small, are planned as before.
    """
    if _is_postgresql(session):
        session.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))


def one_of(session: Session, column: InstrumentedAttribute[Any], values: Collection[Any]) -> ColumnElement[bool]:
    if _is_postgresql(session):
        values_param = bindparam(None, list(values), type_=ARRAY(column.type))
        return column.in_(select(func.unnest(values_param)))
    return column.in_(values)


def _is_postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def insert_rows(session: Session, model: type[Base], rows: list[dict[str, Any]], *, ids: bool) -> list[int]:
    """Insert `rows` (each with the same keys); with `ids`, their new ids in row order."""
    if not rows:
        return []
    if _is_postgresql(session):
        return _copy(session, model, rows, ids)
    if not ids:
        session.execute(insert(model), rows)
        return []
    table = model.__table__  # type: ignore[attr-defined]
    result = session.execute(
        insert(model).returning(table.c.id, sort_by_parameter_order=True), rows
    )
    return list(result.scalars())


def _copy(session: Session, model: type[Base], rows: list[dict[str, Any]], ids: bool) -> list[int]:
    table = model.__table__  # type: ignore[attr-defined]
    columns = list(rows[0])
    new_ids: list[int] = []
    if ids:
        sequence = func.pg_get_serial_sequence(table.name, "id")
        new_ids = list(
            session.scalars(select(func.nextval(sequence)).select_from(func.generate_series(1, len(rows))))
        )
        columns = ["id", *columns]
    to_json = [i for i, name in enumerate(columns) if isinstance(table.c[name].type, JSON)]
    to_text = [i for i, name in enumerate(columns) if isinstance(table.c[name].type, Enum)]
    names = ", ".join(f'"{name}"' for name in columns)
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor, cursor.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
        for i, row in enumerate(rows):
            values = [new_ids[i], *(row[c] for c in columns[1:])] if ids else [row[c] for c in columns]
            for k in to_json:
                if values[k] is not None:
                    values[k] = orjson.dumps(values[k]).decode()
            for k in to_text:
                values[k] = getattr(values[k], "value", values[k])
            copy.write_row(values)
    return new_ids
