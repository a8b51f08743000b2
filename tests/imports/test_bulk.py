"""BulkRows on PostgreSQL: COPYs sent by a thread, and statements that wait for them."""

from __future__ import annotations

import copy
import sys
import threading
import time

import psycopg
import pytest
from sqlalchemy import event, func, select

from app.imports import bulk, chunks, service
from app.imports.bulk import BulkRows
from app.models import Problem, utcnow
from tests.conftest import make_project
from tests.imports.conftest import import_bytes, jsonl, row_counts, sample_records


_COLUMNS = ("project_id", "statement", "content_hash", "is_demo", "created_at")


def _problems(project_id: int, hashes: list[str]) -> list[tuple[object, ...]]:
    return [(project_id, f"problem {h}", h, False, utcnow()) for h in hashes]


def _copy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "import-copy"]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_lookup_sees_the_rows_of_every_copy_sent_before_it(session_factory, backend) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with session_factory() as session:
        rows = BulkRows(session)
        assert not _copy_threads(), "the thread starts with the first COPY"
        sent = [f"h{n}" for n in range(3000)]
        # Without ids nothing waits between the COPYs: they queue behind one another.
        for start in range(0, len(sent), 500):
            assert rows.insert(Problem, _COLUMNS, _problems(project.id, sent[start : start + 500]), ids=False) == []
        found = rows.lookup(select(Problem.content_hash), Problem.content_hash, sent)
        assert sorted(r.content_hash for r in found) == sorted(sent)
        more = [f"m{n}" for n in range(1000)]
        ids = rows.insert(Problem, _COLUMNS, _problems(project.id, more), ids=True)
        assert len(ids) == len(set(ids)) == 1000
        found = rows.lookup(select(Problem.content_hash), Problem.content_hash, sent + more)
        assert sorted(r.content_hash for r in found) == sorted(sent + more)
        rows.close()
        rows.close()
        with pytest.raises(RuntimeError):
            rows.insert(Problem, _COLUMNS, _problems(project.id, ["late"]), ids=False)
        session.rollback()
    assert not _copy_threads()


@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("raise_error", [True, False])
def test_a_failed_copy_is_raised_on_the_callers_thread(session_factory, backend, raise_error) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with session_factory() as session:
        rows = BulkRows(session)
        rows.insert(Problem, _COLUMNS, _problems(project.id, ["same", "same"]), ids=False)
        with pytest.raises(psycopg.errors.UniqueViolation):
            rows.execute(select(func.count()).select_from(Problem))
        with pytest.raises(psycopg.errors.UniqueViolation):
            rows.insert(Problem, _COLUMNS, _problems(project.id, ["other"]), ids=False)
        if raise_error:
            with pytest.raises(psycopg.errors.UniqueViolation):
                rows.close()
        else:
            # As when an error of the caller's own is on its way out: that one is kept.
            rows.close(raise_error=False)
        session.rollback()
    assert not _copy_threads()
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Problem)) == 0


@pytest.mark.parametrize("backend", ["postgresql"])
def test_chunks_of_problems_met_before_wait_for_no_copy(session_factory, backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The solutions and labels of problems the import added need no lookup, the problems'
    rows are kept, and new ids come in blocks: the second chunk runs no statement at all, and
    none waits for the COPYs of the first, which the COPY thread holds back until the second is
    written."""
    monkeypatch.setattr(service, "CHUNK_LINES", 2)
    # Room for both chunks' COPYs.
    monkeypatch.setattr(bulk, "QUEUED_COPIES", 8)
    released = threading.Event()
    run = bulk._CopyThread._run
    timed_out: list[bool] = []

    def held_run(thread: bulk._CopyThread) -> None:
        timed_out.append(not released.wait(10))
        run(thread)

    monkeypatch.setattr(bulk._CopyThread, "_run", held_run)
    write_prm800k = chunks.write_prm800k
    written: list[int] = []

    def counted(writer, parsed):  # type: ignore[no-untyped-def]
        duplicates = write_prm800k(writer, parsed)
        written.append(len(parsed))
        if len(written) == 2:
            released.set()
        return duplicates

    monkeypatch.setattr(service, "write_prm800k", counted)
    first, second = sample_records()[:2]
    again = []
    for record in (first, second):
        record = copy.deepcopy(record)
        record["question"]["pre_generated_steps"][0] += " (again)"
        again.append(record)
    project = make_project(session_factory)
    in_second_chunk: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        if len(written) == 1:
            in_second_chunk.append(statement)

    engine = session_factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        result = import_bytes(session_factory, project, jsonl([first, second, *again, first]))
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert timed_out == [False] and written == [2, 2, 1]
    assert in_second_chunk == []
    assert result.added == {"problems": 2, "solutions": 4, "labels": 4}
    assert result.duplicates == 1
    assert row_counts(session_factory)["labels"] == 4


@pytest.mark.parametrize("backend", ["postgresql"])
def test_new_ids_come_from_growing_blocks_of_the_sequence(session_factory, backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(bulk, "ID_BLOCK", 2)
    monkeypatch.setattr(bulk, "ID_BLOCK_MAX", 8)
    project = make_project(session_factory)
    blocks: list[int] = []
    lookups: list[str] = []

    def seen(conn, cursor, statement, parameters, *args) -> None:  # type: ignore[no-untyped-def]
        if "nextval" in statement:
            blocks.append(parameters["generate_series_2"])
        elif "pg_get_serial_sequence" in statement:
            lookups.append(statement)

    engine = session_factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with session_factory() as session:
            rows = BulkRows(session)
            sizes = (1, 1, 3, 1, 2, 9, 1, 1)
            ids = [rows.insert(Problem, _COLUMNS, _problems(project.id, [f"{n}.{i}" for i in range(size)]), ids=True) for n, size in enumerate(sizes)]
            rows.close()
            stored = dict(session.execute(select(Problem.content_hash, Problem.id)).all())
            session.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # Each block as large as all ids taken before it, from ID_BLOCK up to ID_BLOCK_MAX, or as
    # large as the insert needs beyond what is left: 2 serve the first two inserts, 3 the third,
    # 5 the next two, 8 (with 2 left) the nine, and after one more another 8.
    assert blocks == [2, 3, 5, 8, 8]
    assert len(lookups) == 1, "the sequence is found once"
    assert [len(i) for i in ids] == list(sizes)
    every = [i for block in ids for i in block]
    assert every == sorted(every) and len(set(every)) == len(every) == sum(sizes)
    assert stored == {f"{n}.{i}": ids[n][i] for n, size in enumerate(sizes) for i in range(size)}


@pytest.mark.parametrize("backend", ["postgresql"])
def test_the_switch_interval_is_short_while_a_copy_thread_runs(session_factory, backend) -> None:  # type: ignore[no-untyped-def]
    before = sys.getswitchinterval()
    project = make_project(session_factory)
    with session_factory() as session:
        first, second = BulkRows(session), BulkRows(session)
        first.insert(Problem, _COLUMNS, _problems(project.id, ["a"]), ids=False)
        second.insert(Problem, _COLUMNS, _problems(project.id, ["b"]), ids=False)
        short = pytest.approx(bulk._SwitchInterval.INTERVAL_S)
        assert sys.getswitchinterval() == short
        first.close()
        # The other thread still runs.
        assert sys.getswitchinterval() == short
        second.close()
        session.rollback()
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("raise_error", [True, False])
def test_the_formatter_has_a_connection_of_its_own_outside_the_pool(session_factory, backend, raise_error) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    pool = session_factory.kw["bind"].pool
    with session_factory() as session:
        rows = BulkRows(session)
        held = pool.checkedout()
        rows.insert(Problem, _COLUMNS, _problems(project.id, ["a"]), ids=False)
        copies = rows._copies
        assert copies is not None and copies._formatting is not None
        formatting = copies._formatting
        assert formatting is not session.connection().connection.driver_connection
        # An import holding its project's lock never waits on the pool for it.
        assert pool.checkedout() == held
        rows.close(raise_error=raise_error)
        assert formatting.closed
        session.rollback()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_copy_thread_that_cannot_start_leaves_nothing_behind(session_factory, backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    before = sys.getswitchinterval()
    project = make_project(session_factory)

    def refuse(self) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(bulk.threading.Thread, "start", refuse)
    with session_factory() as session:
        rows = BulkRows(session)
        with pytest.raises(RuntimeError, match="can't start"):
            rows.insert(Problem, _COLUMNS, _problems(project.id, ["a"]), ids=False)
        formatting = rows._copies._formatting  # type: ignore[union-attr]
        rows.close(raise_error=False)
        session.rollback()
    assert sys.getswitchinterval() == before
    assert formatting is not None and formatting.closed


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_statement_beside_a_failed_copy_raises_the_copys_error(session_factory, backend) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with session_factory() as session:
        rows = BulkRows(session)
        rows.insert(Problem, _COLUMNS, _problems(project.id, ["same", "same"]), ids=False)
        deadline = time.monotonic() + 10
        while rows._copies._error is None and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.01)
        # Not "current transaction is aborted": the error that aborted it.
        with pytest.raises(psycopg.errors.UniqueViolation):
            rows.execute(select(func.count()).select_from(Problem), beside_copies=True)
        rows.close(raise_error=False)
        session.rollback()
    assert not _copy_threads()
