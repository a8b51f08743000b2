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

import io
import queue
import sys
import threading
from collections.abc import Collection, Sequence
from typing import Any

import psycopg
import psycopg.copy
from sqlalchemy import (
    JSON,
    ColumnElement,
    Engine,
    Executable,
    Result,
    Row,
    Select,
    Text,
    bindparam,
    cast,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, OID, REGCLASS
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.models import Base

# COPYs waiting for the thread that sends them, at most: a chunk's three tables and one more,
# so that memory stays bounded however fast the caller parses.
QUEUED_COPIES = 4
# New ids are taken from a sequence in blocks, each as large as all taken before it, between
# these bounds: taking them waits for the COPY being sent, and a 1,000,000-step import took 21
# blocks of 10,000 where it now takes 5. At most as many are left unused as were used.
ID_BLOCK = 10_000
ID_BLOCK_MAX = 160_000


class BulkRows:
    """Lookups and bulk inserts of one import, in the session's transaction.

    On PostgreSQL the inserts are COPYs that a thread of their own sends, in order, while the
    caller goes on: PostgreSQL takes in one chunk's rows while Python parses the next, where
    the two took turns before (a 1,000,000-step PRM800K import into an empty database took
    13.8 / 13.7 s against 15.9 / 16.2 s, alternating). A statement run through `execute` waits
    for the COPYs first, so that it sees all their rows; one that `beside_copies` runs waits
    only for the COPY being sent (psycopg's connection lock keeps each whole), for a caller that
    needs none of the rows still on their way (see app.imports.writer). `close` before the
    transaction ends.

    Until then PostgreSQL plans each statement once for any project (a generic plan), not for
    the project at hand. The statistics it plans with were taken before the import, and say
    the project being filled has no rows: a plan made for it scanned all its rows for every
    chunk's lookup of content hashes, so the import grew with the square of its size (a
    1,000,000-step file took 20.8 s beside 100,000 solutions of another project, 15.2 s in an
    empty database; 15.85 s with generic plans, which probe the unique index by hash). `close`
    gives the rest of the transaction its plans back: the batch's queue slots, say, are best
    found by the id range the import added.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._copies: _CopyThread | None = None
        self._plan_mode: str | None = None
        self._spare_ids: dict[str, list[int]] = {}
        self._sequences: dict[str, int] = {}
        self._ids_taken: dict[str, int] = {}
        if _is_postgresql(session):
            self._plan_mode = session.scalar(text("SELECT current_setting('plan_cache_mode')"))
            session.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            driver = session.connection().connection.driver_connection
            assert isinstance(driver, psycopg.Connection)
            self._copies = _CopyThread(driver, session.get_bind().engine)

    def execute(self, statement: Executable, *, beside_copies: bool = False) -> Result[Any]:
        if not beside_copies:
            self.wait()
        try:
            return self.session.execute(statement)
        except Exception:
            # A failed COPY fails the transaction, and so every statement after it: its own
            # error says why.
            if self._copies is not None:
                self._copies.raise_error()
            raise

    def lookup(
        self,
        query: Select[Any],
        column: InstrumentedAttribute[Any],
        values: Collection[Any],
        *,
        beside_copies: bool = False,
    ) -> Sequence[Row[Any]]:
        """The rows of `query` whose `column` is one of `values`; no round trip for none."""
        if not values:
            return []
        return self.execute(query.where(self.one_of(column, values)), beside_copies=beside_copies).all()

    def insert(
        self, model: type[Base], columns: Sequence[str], rows: list[tuple[Any, ...]], *, ids: bool
    ) -> list[int]:
        """Insert `rows`, each a tuple of the values of `columns` as the database takes them:
        enums by value, JSON documents encoded (app.imports.records.encode_document). With
        `ids`, their new ids in row order."""
        if not rows:
            return []
        if self._copies is not None:
            return self._copy(model, columns, rows, ids)
        table = model.__table__  # type: ignore[attr-defined]
        # The documents are text already: bound as such, not encoded again by the JSON type.
        statement = insert(table).values(
            {name: bindparam(name, type_=Text() if isinstance(table.c[name].type, JSON) else None) for name in columns}
        )
        params = [dict(zip(columns, row, strict=True)) for row in rows]
        if not ids:
            self.session.execute(statement, params)
            return []
        return list(self.session.execute(statement.returning(table.c.id, sort_by_parameter_order=True), params).scalars())

    def wait(self) -> None:
        """Until every COPY sent so far has been taken in; raises the error of one that failed."""
        if self._copies is not None:
            self._copies.wait()

    def close(self, *, raise_error: bool = True) -> None:
        """Wait for the COPYs sent and stop their thread, raise the error of one that failed,
        and plan as before. With `raise_error` false (the caller is failing already) the COPYs
        not begun are dropped, and so is their error: the transaction will be rolled back."""
        if self._copies is None:
            return
        self._copies.close(abandon=not raise_error)
        if raise_error:
            self._copies.wait()
            self.session.execute(
                text("SELECT set_config('plan_cache_mode', :mode, true)"), {"mode": self._plan_mode}
            )

    def one_of(self, column: InstrumentedAttribute[Any], values: Collection[Any]) -> ColumnElement[bool]:
        if self._copies is not None:
            values_param = bindparam(None, list(values), type_=ARRAY(column.type))
            return column.in_(select(func.unnest(values_param)))
        return column.in_(values)

    def _new_ids(self, table: str, count: int) -> list[int]:
        """`count` ids from the table's sequence, taken in blocks (see ID_BLOCK): most chunks
        need no query. Ids left over at the end are skipped, as those of a rolled-back insert
        are."""
        spare = self._spare_ids.setdefault(table, [])
        if len(spare) < count:
            block = min(max(self._ids_taken.get(table, 0), ID_BLOCK), ID_BLOCK_MAX)
            # One row holding an array: SQLAlchemy makes an object of every row it reads.
            spare += self.execute(
                select(func.array_agg(func.nextval(cast(self._sequence(table), REGCLASS)))).select_from(
                    func.generate_series(1, max(count - len(spare), block))
                ),
                beside_copies=True,
            ).scalar_one()
        taken = spare[:count]
        del spare[:count]
        self._ids_taken[table] = self._ids_taken.get(table, 0) + count
        return taken

    def _sequence(self, table: str) -> int:
        """The oid of the table's id sequence. Found once: named in the statement that takes
        ids, the sequence was looked up by name again for every id, seven times the cost of
        taking it (22 ms against 3 ms for 10,000 ids)."""
        oid = self._sequences.get(table)
        if oid is None:
            serial = cast(func.pg_get_serial_sequence(table, "id"), REGCLASS)
            oid = self._sequences[table] = self.execute(select(cast(serial, OID)), beside_copies=True).scalar_one()
        return oid

    def _copy(
        self, model: type[Base], columns: Sequence[str], rows: list[tuple[Any, ...]], ids: bool
    ) -> list[int]:
        assert self._copies is not None
        table = model.__table__  # type: ignore[attr-defined]
        new_ids: list[int] = []
        if ids:
            new_ids = self._new_ids(table.name, len(rows))
            columns = ["id", *columns]
            rows = [(id_, *row) for id_, row in zip(new_ids, rows, strict=True)]
        names = ", ".join(f'"{name}"' for name in columns)
        self._copies.send(f'COPY "{table.name}" ({names}) FROM STDIN', rows)
        return new_ids


class _CopyThread:
    """COPY statements sent in order by a thread, on one connection.

    The caller's thread formats the rows (psycopg's formatter, writing to memory) and the
    thread only sends them, waiting on the socket without the interpreter lock. When the
    thread formatted them too, it needed the lock while PostgreSQL waited for the rows and
    the caller waited for the thread: a 1,000,000-step import took 6.2-6.5 s, and 5.1-5.4 s
    with the formatting moved. The formatter reads its connection's encoding, and libpq lets
    one thread at a time use a connection, so the formatting has a connection of its own, on
    which nothing runs. It is not taken from the pool: an import that holds its project's lock
    could wait there for one that imports waiting on the lock hold. psycopg's connection lock
    keeps each COPY whole; `wait` keeps the caller's statements after them. After an error the
    thread sends nothing more (the transaction is lost anyway) and `wait` raises it. The thread
    starts with the first COPY.
    """

    def __init__(self, connection: psycopg.Connection[Any], engine: Engine) -> None:
        self._connection = connection
        self._engine = engine
        self._formatting: psycopg.Connection[Any] | None = None
        self._formatter: psycopg.Cursor[Any] | None = None
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue(QUEUED_COPIES)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._abandoned = False

    def send(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        if self._closed:
            raise RuntimeError("a COPY sent after its thread was closed")
        self.raise_error()
        if self._formatting is None:
            args, kwargs = self._engine.dialect.create_connect_args(self._engine.url)
            self._formatting = psycopg.connect(*args, **kwargs)
            self._formatter = self._formatting.cursor()
        if self._thread is None:
            thread = threading.Thread(target=self._run, name="import-copy", daemon=True)
            thread.start()
            # Only a thread that started is joined and counted out by `close`.
            self._thread = thread
            _switches.hasten()
        assert self._formatter is not None
        data = io.BytesIO()
        with psycopg.copy.Copy(self._formatter, writer=psycopg.copy.FileWriter(data)) as copy:
            for row in rows:
                copy.write_row(row)
        self._queue.put((statement, data.getvalue()))

    def wait(self) -> None:
        self._queue.join()
        self.raise_error()

    def close(self, *, abandon: bool) -> None:
        """Stop the thread once it has sent what it holds, or, with `abandon`, once the COPY it
        is sending (if any) is done. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._abandoned = abandon
        try:
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
        finally:
            if self._thread is not None:
                _switches.restore()
            if self._formatting is not None:
                self._formatting.close()

    def raise_error(self) -> None:
        """Raise the error of a COPY that failed, if one did."""
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            statement, data = item
            try:
                if self._error is None and not self._abandoned:
                    with self._connection.cursor() as cursor, cursor.copy(statement) as copy:
                        copy.write(data)
            except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread by wait()
                self._error = exc
            finally:
                self._queue.task_done()
        self._queue.task_done()


class _SwitchInterval:
    """The interpreter's thread switch interval, short while a COPY thread runs.

    The thread waits on the socket most of the time, and each time PostgreSQL has taken in
    what it was sent, it needs the interpreter lock to send more. By default it waits up to
    5 ms for the caller's thread to let go, and PostgreSQL waits with it: a 1,000,000-step
    import took 6.2-6.4 s where at 0.2 ms it takes 5.1-5.4 s (0.1 ms is no faster, 1 ms
    slower). The interval is the process's, so concurrent imports count themselves in and
    the last one out puts it back.
    """

    INTERVAL_S = 0.0002

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads = 0
        self._before = sys.getswitchinterval()

    def hasten(self) -> None:
        with self._lock:
            if self._threads == 0:
                self._before = sys.getswitchinterval()
                sys.setswitchinterval(self.INTERVAL_S)
            self._threads += 1

    def restore(self) -> None:
        with self._lock:
            self._threads -= 1
            if self._threads == 0:
                sys.setswitchinterval(self._before)


_switches = _SwitchInterval()


def _is_postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"
