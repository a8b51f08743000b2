"""Export filters: dates, generations, labelers (imported ids, usernames, UUIDs), QC in or out."""

from __future__ import annotations

from datetime import date

import orjson
import pytest
from pydantic import ValidationError
from sqlalchemy import select

from app.db import session_scope
from app.exports.query import check_labelers
from app.exports.schemas import ExportFilters
from app.models import User
from tests.conftest import make_project
from tests.exports.conftest import export, label_in_stepwise
from tests.imports.conftest import SAMPLE, import_bytes


def _labelers(factory, project, **filters) -> list[str]:  # type: ignore[no-untyped-def]
    lines = export(factory, project, **filters).splitlines()
    return [orjson.loads(line)["labeler"][:8] for line in lines]


@pytest.fixture
def sample_project(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    return project


def test_dates_take_since_and_leave_until_out(session_factory, sample_project) -> None:  # type: ignore[no-untyped-def]
    # Labels of 2023-01-22 and 2023-01-23; `until` is the first day left out.
    found = _labelers(session_factory, sample_project, since=date(2023, 1, 22), until=date(2023, 1, 24))
    assert found == ["340d89bc", "9c8b7a65"]
    assert _labelers(session_factory, sample_project, since=date(2023, 1, 23), until=date(2023, 1, 24)) == ["9c8b7a65"]
    # 2022-11-30T23:59:59+01:00 is 22:59:59 UTC on the 30th.
    assert _labelers(session_factory, sample_project, until=date(2022, 12, 1)) == ["f00dfeed", "340d89bc", "0a1b2c3d"]


def test_generations(session_factory, sample_project) -> None:  # type: ignore[no-untyped-def]
    assert _labelers(session_factory, sample_project, generations=[9]) == ["340d89bc", "9c8b7a65"]
    assert sorted(_labelers(session_factory, sample_project, generations=[-1, 5])) == ["8b2e4c1a", "f00dfeed"]


def test_quality_control_in_out_only(session_factory, sample_project) -> None:  # type: ignore[no-untyped-def]
    assert len(_labelers(session_factory, sample_project)) == 9
    assert _labelers(session_factory, sample_project, qc="only") == ["8b2e4c1a"]
    assert len(_labelers(session_factory, sample_project, qc="exclude")) == 8


def test_labelers_by_imported_id(session_factory, sample_project) -> None:  # type: ignore[no-untyped-def]
    found = _labelers(session_factory, sample_project, labelers=["340d89bc-f5b7-45e9-b272-909ba68ee363"])
    assert found == ["340d89bc"] * 3
    assert _labelers(session_factory, sample_project, labelers=["nobody"]) == []


def test_labelers_by_username_or_uuid(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, _ = label_in_stepwise(client, session_factory, [1, 1, 1], "solution")
    with session_scope(session_factory) as session:
        uuid = session.scalar(select(User.labeler_uuid).where(User.username == "lena"))
    assert _labelers(session_factory, project, labelers=["lena"]) == [uuid[:8]]
    assert _labelers(session_factory, project, labelers=[uuid]) == [uuid[:8]]
    assert _labelers(session_factory, project, labelers=["someone"]) == []
    # A username in any case, as the Labels tab and the members form take it.
    assert _labelers(session_factory, project, labelers=["LENA"]) == [uuid[:8]]
    assert _labelers(session_factory, project, labelers=[uuid.upper()]) == [uuid[:8]]
    with session_scope(session_factory) as session:
        check_labelers(session, project.id, ExportFilters(labelers=["Lena", uuid.upper()]))


def test_filters_refuse_nonsense() -> None:
    with pytest.raises(ValidationError, match=r"since \(labeled on or after\) must be before until"):
        ExportFilters(since=date(2024, 1, 2), until=date(2024, 1, 1))
    with pytest.raises(ValidationError):
        ExportFilters(qc="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ExportFilters(labelers=[""])
