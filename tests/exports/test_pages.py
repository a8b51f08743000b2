"""The export form: filters checked on the page, then the API streams the file."""

from __future__ import annotations

import html
import io
import re
from datetime import date
from urllib.parse import parse_qsl, urlsplit

import orjson
import pyarrow.parquet as pq
import pytest

from app.exports.pages import _fraction
from app.exports.schemas import filters_query
from app.exports.schemas import ExportFilters
from tests.conftest import browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes, sample_records


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Algebra 1")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    return project


@pytest.mark.parametrize("role", ["manager", "researcher"])
def test_the_form_downloads_the_streamed_file(client, session_factory, project, role) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "pat", role)
    browser_login(client, "pat")
    form = client.get(f"/manage/projects/{project.id}/export")
    assert form.status_code == 200 and 'action="/manage/projects/' in form.text
    response = client.get(
        f"/manage/projects/{project.id}/export/download",
        params={"format": "prm800k", "since": "", "until": "", "generations": "", "labelers": "", "qc": "include", "neutral": "positive"},
    )
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith('attachment; filename="Algebra_1-prm800k-')
    records = [orjson.loads(line) for line in response.content.splitlines()]
    assert len(records) == 9
    assert {r["labeler"] for r in records} == {r["labeler"] for r in sample_records()}
    direct = client.get(f"/api/v1/projects/{project.id}/export", params={"format": "prm800k"})
    assert response.content == direct.content


def test_filters_become_the_export_apis_query(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    response = client.get(
        f"/manage/projects/{project.id}/export/download",
        params={
            "format": "trl", "since": "2023-01-01", "until": "2023-03-01", "generations": "9, 11",
            "labelers": "340d89bc-f5b7-45e9-b272-909ba68ee363", "qc": "exclude", "neutral": "negative",
        },
        follow_redirects=False,
    )
    assert response.status_code == 303
    location = urlsplit(response.headers["location"])
    assert location.path == f"/api/v1/projects/{project.id}/export"
    assert parse_qsl(location.query) == [
        ("format", "trl"), ("since", "2023-01-01"), ("until", "2023-03-01"), ("generation", "9"),
        ("generation", "11"), ("labeler", "340d89bc-f5b7-45e9-b272-909ba68ee363"), ("qc", "exclude"),
        ("neutral", "negative"),
    ]
    streamed = client.get(response.headers["location"])
    assert streamed.status_code == 200
    for line in streamed.content.splitlines():
        record = orjson.loads(line)
        assert set(record) >= {"prompt", "completions", "labels"}
        assert all(isinstance(label, bool) for label in record["labels"])


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"format": "csv"}, "format", "Choose PRM800K, TRL or Parquet"),
        ({"format": "trl", "since": "yesterday"}, "since", "Must be a date (YYYY-MM-DD)"),
        ({"format": "trl", "generations": "1, two"}, "generations", "Item 2 ('two'): must be a whole number"),
        ({"format": "trl", "qc": "maybe"}, "qc", "'include', 'exclude' or 'only'"),
        ({"format": "trl", "labelers": "x" * 101}, "labelers", "at most 100 characters"),
        # The settings form takes shares: 0.8 here would keep labelers at 0.8% and above.
        ({"format": "trl", "min_labeler_accuracy": "0.8"}, "min_labeler_accuracy",
         "This field is a percentage: 0.8 would mean 0.8%; for 80%, type 80, or 0.8% if 0.8% is meant"),
        # The API reads 1 as every label agreeing.
        ({"format": "trl", "min_agreement": "1"}, "min_agreement",
         "This field is a percentage: 1 would mean 1%; for 100%, type 100, or 1% if 1% is meant"),
        ({"format": "trl", "min_agreement": "150"}, "min_agreement", "Give a percentage from 0 to 100"),
        ({"format": "trl", "labelers": "340d89bc-f5b7-45e9-b272-909ba68ee363, max"}, "labelers",
         "label in this project is by 'max': give a username"),
        # Not a link to an API answer that refuses it; left at its default, a field chooses nothing.
        ({"format": "prm800k", "neutral": "positive", "completions": "all"}, "completions",
         "Completions applies to format trl or parquet, not prm800k"),
        ({"format": "parquet", "neutral": "negative"}, "neutral", "Neutral applies to format trl, not parquet"),
    ],
)
def test_bad_filters_are_shown_on_the_form(client, session_factory, project, params, field, message) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    response = client.get(f"/manage/projects/{project.id}/export/download", params=params)
    assert response.status_code == 422
    assert "Nothing was exported." in response.text
    shown = html.unescape(response.text).split(f'id="{field}-error">', 1)[1].split("<", 1)[0]
    assert message in shown


def test_a_share_written_with_its_percent_sign_is_taken_as_written() -> None:
    assert (_fraction("1%"), _fraction(" 0.5 % "), _fraction("80"), _fraction("100"), _fraction("")) == (
        0.01, 0.005, 0.8, 1.0, None)
    with pytest.raises(ValueError, match="1 would mean 1%"):
        _fraction("1")


def test_dates_out_of_order_are_refused_as_a_whole(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    response = client.get(
        f"/manage/projects/{project.id}/export/download",
        params={"format": "prm800k", "since": "2024-02-01", "until": "2024-01-01"},
    )
    assert response.status_code == 422
    assert "Since (labeled on or after) must be before until (labeled before)." in response.text


def test_filters_that_keep_nothing_say_so_instead_of_an_empty_file(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/export/download"
    later = client.get(url, params={"format": "prm800k", "since": "2030-01-01"})
    assert later.status_code == 422
    assert "Nothing was exported.</strong>\n  No label matches these filters." in later.text
    # Every source box unticked on the form is a choice of nothing, not of everything.
    unticked = client.get(url, params={"format": "prm800k", "sources_offered": "true"})
    assert unticked.status_code == 422
    shown = html.unescape(unticked.text).split('id="sources-error">', 1)[1].split("<", 1)[0]
    assert shown == "Tick at least one source"
    assert 'name="sources" value="human" checked' not in unticked.text
    ticked = client.get(url, params={"format": "prm800k", "sources_offered": "true", "sources": "human"},
                        follow_redirects=False)
    assert ticked.status_code == 303 and ticked.headers["location"].endswith("source=human")


def test_a_project_without_labels_says_so(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # "No label matches these filters" read as a fault of filters nobody set.
    project = make_project(session_factory, "Empty")
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    response = client.get(f"/manage/projects/{project.id}/export/download", params={"format": "prm800k"})
    assert response.status_code == 422
    assert "This project has no labels yet: label some, or import PRM800K labels, first." in response.text


def test_a_trl_export_with_labels_but_no_record_says_why(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # A TRL record needs a rated first step: labels left unrated, or given up, make none.
    unrated = sample_records()[0]
    unrated["label"]["finish_reason"] = None
    for step in unrated["label"]["steps"]:
        for completion in step["completions"]:
            completion["rating"] = None
    project = make_project(session_factory, "Unrated")
    import_bytes(session_factory, project, orjson.dumps(unrated))
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/export/download"
    trl = client.get(url, params={"format": "trl"})
    assert trl.status_code == 422
    assert "none makes a TRL record: each gave up, reported the problem or left its first step unrated" in trl.text
    assert client.get(url, params={"format": "prm800k"}, follow_redirects=False).status_code == 303
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    assert client.get(url, params={"format": "trl"}, follow_redirects=False).status_code == 303


def test_default_filters_add_nothing_to_the_query() -> None:
    assert filters_query(ExportFilters()) == []
    chosen = ExportFilters(since=date(2024, 1, 1), generations=[0], labelers=["ann"], qc="only")
    assert filters_query(chosen) == [("since", "2024-01-01"), ("generation", "0"), ("labeler", "ann"), ("qc", "only")]


@pytest.mark.parametrize("fmt", ["prm800k", "trl", "parquet"])
def test_count_first_says_what_the_download_would_hold(client, session_factory, project, fmt) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/export/download"
    # PRM800K records hold every completion whatever `completions` says, and refuse it.
    params = {"format": fmt, "qc": "exclude", **({} if fmt == "prm800k" else {"completions": "all"})}
    counted = client.get(url, params={**params, "count": "true"})
    assert counted.status_code == 200 and "content-disposition" not in counted.headers
    note = html.unescape(counted.text).split('id="export-count"', 1)[1].split("</div></div>", 1)[0]
    numbers = [int(n.replace(",", "")) for n in re.findall(r"[\d,]+(?= (?:PRM800K record|TRL record|Parquet row|label|solution))", note)]
    downloaded = client.get(f"/api/v1/projects/{project.id}/export", params=params)
    if fmt == "parquet":
        rows = pq.read_table(io.BytesIO(downloaded.content))
        expected = (rows.num_rows, len(set(rows.column("label_id").to_pylist())), len(set(rows.column("solution_id").to_pylist())))
    elif fmt == "prm800k":
        records = [orjson.loads(line) for line in downloaded.content.splitlines()]
        expected = (len(records), len(records), len({r["question"]["problem"] + str(r["question"].get("pre_generated_steps"))
                                                     for r in records}))
    else:
        # A TRL record comes from a label rated to its end (a give-up makes none).
        expected = (len(downloaded.content.splitlines()), None, None)
    assert numbers[0] == expected[0], (note, expected)
    for counted_number, wanted in zip(numbers[1:], expected[1:], strict=True):
        assert wanted is None or counted_number == wanted, (note, expected)
    # The form keeps what was chosen, for the Download that follows.
    assert f'name="format" value="{fmt}" checked' in counted.text

