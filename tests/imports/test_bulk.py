"""BulkRows on PostgreSQL: COPYs sent by a thread, and statements that wait for them."""

from __future__ import annotations

import threading

import psycopg
import pytest
from sqlalchemy import func, select

from app.imports.bulk import BulkRows
from app.models import Problem, utcnow
from tests.conftest import make_project


def _problems(project_id: int, hashes: list[str]) -> list[dict[str, object]]:
    return [
        {"project_id": project_id, "statement": f"problem {h}", "content_hash": h, "is_demo": False, "created_at": utcnow()}
        for h in hashes
    ]


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
            assert rows.insert(Problem, _problems(project.id, sent[start : start + 500]), ids=False) == []
        found = rows.lookup(select(Problem.content_hash), Problem.content_hash, sent)
        assert sorted(r.content_hash for r in found) == sorted(sent)
        more = [f"m{n}" for n in range(1000)]
        ids = rows.insert(Problem, _problems(project.id, more), ids=True)
        assert len(ids) == len(set(ids)) == 1000
        found = rows.lookup(select(Problem.content_hash), Problem.content_hash, sent + more)
        assert sorted(r.content_hash for r in found) == sorted(sent + more)
        rows.close()
        rows.close()
        with pytest.raises(RuntimeError):
            rows.insert(Problem, _problems(project.id, ["late"]), ids=False)
        session.rollback()
    assert not _copy_threads()


@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("raise_error", [True, False])
def test_a_failed_copy_is_raised_on_the_callers_thread(session_factory, backend, raise_error) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with session_factory() as session:
        rows = BulkRows(session)
        rows.insert(Problem, _problems(project.id, ["same", "same"]), ids=False)
        with pytest.raises(psycopg.errors.UniqueViolation):
            rows.execute(select(func.count()).select_from(Problem))
        with pytest.raises(psycopg.errors.UniqueViolation):
            rows.insert(Problem, _problems(project.id, ["other"]), ids=False)
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
