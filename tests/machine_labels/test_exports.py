"""Exports carry each label's source and filter by it; human records read exactly as before."""

from __future__ import annotations

import io
from urllib.parse import parse_qsl, urlsplit

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from sqlalchemy import case, func, select

from app.cli import cli
from app.config import get_settings
from app.db import session_scope
from app.machine_labels.service import MachineLabel, store_machine_labels
from app.models import Assignment, Label, LabelSource, Solution
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.exports.conftest import export
from tests.imports.conftest import SAMPLE, import_bytes, sample_records

GENERATOR = {"model": "tiny-lm", "backend": "transformers", "rollouts": 4}


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    """The PRM800K sample's nine human labels, and rollout labels on two of its solutions."""
    project = make_project(session_factory, "Algebra 1")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    with session_scope(session_factory) as session:
        solutions = session.scalars(select(Solution.id).order_by(Solution.id).limit(2)).all()
        labels = [MachineLabel(s, [1, -1], {"shares": [0.75, 0.0]}) for s in solutions]
        store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, labels)
    return project


def _lines(body: bytes) -> list[dict]:  # type: ignore[type-arg]
    return [orjson.loads(line) for line in body.splitlines()]


def test_prm800k_human_records_unchanged_machine_records_marked(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    everything = _lines(export(session_factory, project))
    assert everything[:9] == sample_records()
    machine = everything[9:]
    assert len(machine) == 2
    assert all(r["source"] == "rollout" and r["labeler"] is None for r in machine)
    assert machine[0]["source_detail"]["model"] == "tiny-lm"
    assert machine[0]["source_detail"]["shares"] == [0.75, 0.0]
    assert [s["completions"][0]["rating"] for s in machine[0]["label"]["steps"]] == [1, -1]

    assert _lines(export(session_factory, project, sources=["human"])) == sample_records()
    assert _lines(export(session_factory, project, sources=["rollout"])) == machine
    assert export(session_factory, project, sources=["judge", "prm"]) == b""


def test_trl_and_parquet_have_a_source_column(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    trl = _lines(export(session_factory, project, "trl"))
    assert {r["source"] for r in trl} == {"human", "rollout"}
    assert [r["labels"] for r in trl if r["source"] == "rollout"] == [[True, False]] * 2
    table = pq.read_table(io.BytesIO(export(session_factory, project, "parquet", sources=["rollout"])))
    assert table.column("source").to_pylist() == ["rollout", "rollout"]
    assert orjson.loads(table.column("source_detail")[0].as_py())["backend"] == "transformers"
    human = pq.read_table(io.BytesIO(export(session_factory, project, "parquet", sources=["human"])))
    assert set(human.column("source").to_pylist()) == {"human"}
    assert set(human.column("source_detail").to_pylist()) == {None}


def test_cli_filters_by_source(monkeypatch, tmp_path, database_url, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    out = tmp_path / "labels.jsonl"
    try:
        base = ["export", "--project", "Algebra 1", "--format", "prm800k", "--output", str(out)]
        chosen = CliRunner().invoke(cli, [*base, "--source", "human,rollout"])
        both = _lines(out.read_bytes())
        # Repeated, as the API takes it: each one counts, not only the last.
        repeated = CliRunner().invoke(cli, [*base, "--source", "human", "--source", "rollout"])
        assert repeated.exit_code == 0 and _lines(out.read_bytes()) == both
        machine = CliRunner().invoke(cli, [*base, "--source", "rollout"])
        rollout = _lines(out.read_bytes())
        wrong = CliRunner().invoke(cli, [*base, "--source", "human,robot"])
    finally:
        get_settings.cache_clear()
    assert chosen.exit_code == 0 and machine.exit_code == 0, chosen.output + machine.output
    assert len(both) == 11 and len(rollout) == 2
    assert wrong.exit_code != 0 and "'human', 'rollout', 'judge' or 'prm'" in wrong.output
    assert _lines(out.read_bytes()) == rollout


def test_api_filters_by_source(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rex", "researcher")
    headers = api_headers(client, "rex")
    url = f"/api/v1/projects/{project.id}/export"

    def count(*sources: str) -> int:
        params = [("format", "prm800k"), *(("source", s) for s in sources)]
        response = client.get(url, params=params, headers=headers)
        assert response.status_code == 200, response.text
        return len(response.content.splitlines())

    assert (count(), count("human"), count("rollout"), count("human", "rollout"), count("human,rollout")) == (
        11, 9, 2, 11, 11)
    wrong = client.get(url, params={"format": "prm800k", "source": "robot"}, headers=headers)
    assert wrong.status_code == 422 and "rollout" in wrong.text


def test_page_ticks_sources(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    form = client.get(f"/manage/projects/{project.id}/export")
    assert form.text.count('name="sources"') == 4 and form.text.count("checked>") >= 4
    page = f"/manage/projects/{project.id}/export/download"
    ticked = client.get(page, params=[("format", "prm800k"), ("sources", "rollout")], follow_redirects=False)
    assert ticked.status_code == 303
    assert parse_qsl(urlsplit(ticked.headers["location"]).query) == [("format", "prm800k"), ("source", "rollout")]
    assert len(client.get(ticked.headers["location"]).content.splitlines()) == 2
    every = [("format", "prm800k"), *(("sources", s.value) for s in LabelSource)]
    untouched = client.get(page, params=every, follow_redirects=False)
    assert parse_qsl(urlsplit(untouched.headers["location"]).query) == [("format", "prm800k")]
    wrong = client.get(page, params=[("format", "prm800k"), ("sources", "robot")])
    assert wrong.status_code == 422 and "Nothing was exported" in wrong.text


def test_machine_records_import_back_as_machine_labels(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    unlabeled = add_solutions(session_factory, project, 1, steps=2)
    with session_scope(session_factory) as session:
        store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, [MachineLabel(unlabeled[0], [1, 1], {})])
    exported = export(session_factory, project)
    other = make_project(session_factory, "Copy", overlap=1)
    import_bytes(session_factory, other, exported)
    assert export(session_factory, other) == exported
    assert len(_lines(export(session_factory, other, sources=["rollout"]))) == 3
    assert export(session_factory, other, sources=["human"]) == export(session_factory, project, sources=["human"])
    with session_scope(session_factory) as session:
        # A solution whose only label is a machine's still waits for a labeler.
        machine_only = session.scalars(
            select(Label.solution_id).where(Label.project_id == other.id).group_by(Label.solution_id)
            .having(func.count(case((Label.source == LabelSource.human, 1))) == 0)
        ).all()
        slots = session.scalars(select(Assignment.solution_id).where(Assignment.project_id == other.id)).all()
    assert machine_only and set(machine_only) <= set(slots)


def test_a_projects_own_export_imported_back_adds_no_machine_label(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    exported = export(session_factory, project)
    with session_scope(session_factory) as session:
        before = session.scalar(select(func.count()).select_from(Label).where(Label.project_id == project.id))
    import_bytes(session_factory, project, exported)
    assert export(session_factory, project) == exported
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label).where(Label.project_id == project.id)) == before
        solutions = session.scalars(select(Solution.id).order_by(Solution.id).limit(2)).all()
        # The same generator run again finds its labels there.
        labels = [MachineLabel(s, [1, -1], {"shares": [0.75, 0.0]}) for s in solutions]
        assert store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, labels) == 0

    # A copy imported twice holds each machine label once, and its generator finds them too.
    other = make_project(session_factory, "Twice", overlap=1)
    import_bytes(session_factory, other, exported)
    import_bytes(session_factory, other, exported)
    assert export(session_factory, other) == exported
