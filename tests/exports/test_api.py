"""GET /api/v1/projects/{id}/export: streamed attachments, filters as query parameters, roles."""

from __future__ import annotations

import io

import orjson
import pyarrow.parquet as pq
import pytest
from sqlalchemy import func, select

from app.db import session_scope
from app.models import AuditEvent
from tests.conftest import api_headers, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes, sample_records


def _project_with_sample(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra 1")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    return project


def test_each_format_streams_as_an_attachment(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_with_sample(session_factory)
    make_user(session_factory, "rex", "researcher")
    headers = api_headers(client, "rex")
    url = f"/api/v1/projects/{project.id}/export"

    with client.stream("GET", url, params={"format": "prm800k"}, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        disposition = response.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="Algebra_1-prm800k-') and disposition.endswith('.jsonl"')
        body = b"".join(response.iter_bytes())
    records = [orjson.loads(line) for line in body.splitlines()]
    assert len(records) == 9 and records[1] == sample_records()[1]

    trl = client.get(url, params={"format": "trl", "neutral": "negative"}, headers=headers)
    assert trl.status_code == 200
    assert orjson.loads(trl.content.splitlines()[0])["labels"] == [False, False, False]

    every = client.get(url, params={"format": "trl", "completions": "all"}, headers=headers)
    assert every.status_code == 200
    assert all("human_written" in orjson.loads(line) for line in every.content.splitlines())
    assert len(every.content.splitlines()) > len(trl.content.splitlines())

    parquet = client.get(url, params={"format": "parquet"}, headers=headers)
    assert parquet.headers["content-type"] == "application/vnd.apache.parquet"
    assert parquet.headers["content-disposition"].endswith('.parquet"')
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == 9


def test_filters_come_from_the_query_string(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_with_sample(session_factory)
    make_user(session_factory, "mia", "manager")
    headers = api_headers(client, "mia")
    url = f"/api/v1/projects/{project.id}/export"
    params = [
        ("format", "prm800k"),
        ("generation", "9"),
        ("generation", "11"),
        ("labeler", "340d89bc-f5b7-45e9-b272-909ba68ee363"),
        ("since", "2023-01-01"),
        ("qc", "exclude"),
    ]
    response = client.get(url, params=params, headers=headers)
    assert response.status_code == 200
    stamps = [orjson.loads(line)["timestamp"] for line in response.content.splitlines()]
    assert stamps == ["2023-01-22T04:34:27.052924", "2023-05-05T05:05:05.555555"]


def test_bad_requests_are_refused_before_streaming(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_with_sample(session_factory)
    make_user(session_factory, "mia", "manager")
    make_user(session_factory, "leo", "labeler")
    headers = api_headers(client, "mia")
    url = f"/api/v1/projects/{project.id}/export"
    for params in (
        {"format": "csv"},
        {},
        {"format": "trl", "qc": "sometimes"},
        {"format": "trl", "generation": "nine"},
        {"format": "trl", "since": "2023-13-01"},
        {"format": "trl", "completions": "some"},
    ):
        response = client.get(url, params=params, headers=headers)
        assert response.status_code == 422, params
        assert response.headers["content-type"] == "application/json"
    backwards = client.get(url, params={"format": "trl", "since": "2023-02-01", "until": "2023-01-01"}, headers=headers)
    assert backwards.status_code == 422 and backwards.json()["detail"] == "invalid export filters"
    assert backwards.json()["errors"] == [{"field": "until", "message": "since (labeled on or after) must be before until (labeled before)"}]
    nobody = client.get(url, params={"format": "trl", "labeler": ["leo", "340d89bc-f5b7-45e9-b272-909ba68ee363"]},
                        headers=headers)
    assert nobody.status_code == 422 and nobody.json()["errors"] == [{"field": "labeler", "message": "no labels by 'leo' here"}]
    assert nobody.json()["detail"].startswith("no label in this project is by 'leo'")
    # A generation no label has is a typo until shown otherwise, as a labeler is.
    nothing = client.get(url, params={"format": "trl", "generation": ["-4", "9"]}, headers=headers)
    assert nothing.status_code == 422, nothing.text
    assert nothing.json()["errors"] == [{"field": "generation", "message": "no labels of generation -4 here"}]
    assert nothing.json()["detail"].startswith("no label in this project has generation -4: its labels' generations are ")
    unknown = client.get(url, params={"format": "trl", "source": "human,robot"}, headers=headers)
    assert unknown.status_code == 422 and [e["field"] for e in unknown.json()["errors"]] == ["source"]
    assert client.get(f"/api/v1/projects/{project.id + 100}/export", params={"format": "trl"}, headers=headers).status_code == 404
    assert client.get(url, params={"format": "trl"}, headers=api_headers(client, "leo")).status_code == 403
    assert client.get(url, params={"format": "trl"}).status_code == 401


def test_generation_1_on_labels_no_round_picked_is_refused_with_why(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from app.models import FinishReason
    from tests.reports.builders import add_problem, label_next

    project = make_project(session_factory)
    add_problem(session_factory, project, "1+1?", n_solutions=1)
    labeler = make_user(session_factory, "lena", "labeler")
    label_next(session_factory, project.id, labeler.id, FinishReason.solution)
    make_user(session_factory, "mona", "manager")
    url = f"/api/v1/projects/{project.id}/export"
    headers = api_headers(client, "mona")
    # The PRM800K export writes 1 for them.
    (record,) = [orjson.loads(line) for line in client.get(url, params={"format": "prm800k"}, headers=headers).content.splitlines()]
    assert record["generation"] == 1
    refused = client.get(url, params={"format": "prm800k", "generation": "1"}, headers=headers)
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "no label in this project has generation 1: its labels' generations are none (labels of solutions no round "
        "picked have none: PRM800K exports write them as 1; leave the filter empty to keep them)")


def test_a_parameter_the_format_does_not_read_is_refused_as_the_cli_refuses_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_with_sample(session_factory)
    make_user(session_factory, "rex", "researcher")
    headers = api_headers(client, "rex")
    url = f"/api/v1/projects/{project.id}/export"
    for params, field, message in (
        ({"format": "prm800k", "completions": "all"}, "completions", "completions applies to format trl or parquet, not prm800k"),
        ({"format": "prm800k", "neutral": "negative"}, "neutral", "neutral applies to format trl, not prm800k"),
        # Given is given, the default value too: the CLI refuses `--neutral positive` alike.
        ({"format": "parquet", "neutral": "positive"}, "neutral", "neutral applies to format trl, not parquet"),
    ):
        response = client.get(url, params=params, headers=headers)
        assert response.status_code == 422, params
        assert response.json()["detail"] == message
        assert response.json()["errors"] == [{"field": field, "message": message}]
    for params in ({"format": "trl", "neutral": "negative", "completions": "all"}, {"format": "parquet", "completions": "all"}):
        assert client.get(url, params=params, headers=headers).status_code == 200, params


def test_the_check_names_parameters_as_its_caller_spells_them() -> None:
    from app.errors import BadInput
    from app.exports.schemas import refuse_unread

    refuse_unread("trl", ["neutral", "completions", "qc"])
    with pytest.raises(BadInput) as refused:
        refuse_unread("prm800k", ["qc", "completions"], formats=("prm800k", "trl", "parquet", "hf"),
                      spelled=lambda name: f"--{name}")
    assert refused.value.message == "--completions applies to --format trl or parquet or hf, not prm800k"


def test_head_answers_the_headers_without_building_the_export_or_recording_a_download(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_with_sample(session_factory)
    make_user(session_factory, "rex", "researcher")
    headers = api_headers(client, "rex")
    url = f"/api/v1/projects/{project.id}/export"

    for fmt in ("prm800k", "parquet"):
        got = client.get(url, params={"format": fmt}, headers=headers)
        head = client.head(url, params={"format": fmt}, headers=headers)
        assert (head.status_code, head.content) == (200, b"")
        for name in ("content-type", "content-disposition"):
            assert head.headers[name] == got.headers[name]
    assert client.head(url, params={"format": "prm800k", "labeler": "nobody"}, headers=headers).status_code == 422
    with session_scope(session_factory) as session:
        downloads = session.scalar(select(func.count()).select_from(AuditEvent)
                                   .where(AuditEvent.action == "export.downloaded"))
    assert downloads == 2, "the GETs only"


@pytest.mark.parametrize("value", ["NaN", "-inf"])
def test_a_share_that_is_no_finite_number_is_said_to_be_one(client, session_factory, value) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    url = f"/api/v1/projects/{project.id}/export"
    for name in ("min_labeler_accuracy", "min_agreement"):
        refused = client.get(url, params={"format": "prm800k", name: value}, headers=api_headers(client, "mia"))
        assert refused.status_code == 422
        assert refused.json()["errors"] == [{"field": f"query.{name}", "message": "must be a finite number"}]
