"""The projects API refuses bad input with a clear 4xx and changes nothing."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import text

from app.config import Settings
from app.db import create_db_engine
from tests.conftest import api_headers, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes, jsonl, sample_records


@pytest.fixture
def headers(client, session_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    return api_headers(client, "max")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "ok", "overlap": 0}, "overlap"),
        ({"name": "ok", "overlap": 21}, "overlap"),
        ({"name": "ok", "lease_minutes": 0}, "lease_minutes"),
        ({"name": "ok", "labeling_mode": "random"}, "labeling_mode"),
        ({"name": "<b>x</b>"}, "name"),
        ({"name": ""}, "name"),
        ({}, "name"),
        ({"name": "ok", "overlap": "lots"}, "overlap"),
    ],
)
def test_invalid_new_projects_get_422_naming_the_field(client, headers, body, field) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/api/v1/projects", headers=headers, json=body)
    assert response.status_code == 422
    assert field in {e["field"] for e in response.json()["errors"]}
    assert client.get("/api/v1/projects", headers=headers).json() == []


@pytest.mark.parametrize("field", ["description", "guidelines"])
@pytest.mark.parametrize("control", ["\u202e", "\u2067"])
def test_a_bidirectional_override_in_a_projects_texts_is_refused_as_imports_refuse_it(client, headers, field, control) -> None:  # type: ignore[no-untyped-def]
    # Labelers read both: the words after a right-to-left override show reversed, as in an import.
    text = f"Rate each step: {control}tcerroc si"
    created = client.post("/api/v1/projects", headers=headers, json={"name": "rtl", field: text})
    assert created.status_code == 422
    assert [e["field"] for e in created.json()["errors"]] == [field]
    assert f"{field}: text contains a bidirectional override" in created.json()["detail"]
    project = client.post("/api/v1/projects", headers=headers, json={"name": "rtl", field: "Plain \u200f marks stay"}).json()
    patched = client.patch(f"/api/v1/projects/{project['id']}", headers=headers, json={field: text})
    assert patched.status_code == 422 and [e["field"] for e in patched.json()["errors"]] == [field]
    assert client.get(f"/api/v1/projects/{project['id']}", headers=headers).json()[field] == "Plain \u200f marks stay"


def test_a_duplicate_name_gets_409(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "algebra")
    response = client.post("/api/v1/projects", headers=headers, json={"name": "algebra"})
    assert response.status_code == 409
    assert response.json() == {"detail": "a project named 'algebra' already exists"}
    other_case = client.post("/api/v1/projects", headers=headers, json={"name": "Algebra"})
    assert other_case.status_code == 409
    assert other_case.json() == {"detail": "a project named 'algebra' already exists: names may not differ only in case"}


@pytest.mark.parametrize(("body", "message"), [
    ({"name": "   "}, "needs a value"),
    ({"name": "x" * 300}, "must be at most 100 characters long"),
    ({"name": "café"}, "use only 1-100 letters (A-Z, without accents), digits, space, _ . -, the first a letter or digit, "
                       "the last not a space"),
    ({"name": "ok", "open_to_all": "yes"}, "must be true or false"),
])
def test_a_bad_name_or_truth_value_is_refused_in_words(client, headers, body, message) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/api/v1/projects", headers=headers, json=body)
    assert response.status_code == 422
    assert [e["message"] for e in response.json()["errors"]] == [message]
    assert client.get("/api/v1/projects", headers=headers).json() == []


def test_a_project_is_renamed_to_a_free_name_and_the_change_audited(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    from app.db import session_scope
    from app.demo.service import DEMO_PROJECT
    from app.projects.schemas import ProjectCreate
    from app.projects.service import create_project

    project = make_project(session_factory, "algebra")
    make_project(session_factory, "geometry")
    url = f"/api/v1/projects/{project.id}"
    taken = client.patch(url, headers=headers, json={"name": "Geometry"})
    assert taken.status_code == 409 and "names may not differ only in case" in taken.json()["detail"]
    renamed = client.patch(url, headers=headers, json={"name": "Algebra 2"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Algebra 2"
    # Its own name in another case is no clash.
    assert client.patch(url, headers=headers, json={"name": "algebra 2"}).json()["name"] == "algebra 2"
    admin = api_headers(client, make_user(session_factory, "ada", "admin").username)
    events = client.get("/api/v1/audit-events", params={"category": "projects"}, headers=admin).json()
    assert events["events"][0]["details"]["name"] == ["Algebra 2", "algebra 2"]
    with session_scope(session_factory) as session:
        demo = create_project(session, ProjectCreate(name=DEMO_PROJECT), is_demo=True)
    kept = client.patch(f"/api/v1/projects/{demo.id}", headers=headers, json={"name": "mine"})
    assert kept.status_code == 409 and "the demo project keeps its name" in kept.json()["detail"]


@pytest.mark.parametrize("body", [{"unknown": 1}, {"overlap": 3, "is_demo": True}])
def test_a_field_the_update_cannot_change_is_refused_by_name(client, session_factory, headers, body) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", overlap=2)
    before = client.get(f"/api/v1/projects/{project.id}", headers=headers).json()
    response = client.patch(f"/api/v1/projects/{project.id}", headers=headers, json=body)
    assert response.status_code == 422, response.text
    refused = list(body)[-1]
    assert [e["field"] for e in response.json()["errors"]] == [refused]
    assert f"{refused}: " in response.json()["detail"]
    assert client.get(f"/api/v1/projects/{project.id}", headers=headers).json() == before


@pytest.mark.parametrize("body", [{"overlap": 0}, {"lease_minutes": 5000}, {"labeling_mode": "x"},
                                  {"overlap": True}, {"correction_window_hours": False}, {"qc_rate": True}])
def test_invalid_settings_change_nothing(client, session_factory, headers, body) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", overlap=2)
    before = client.get(f"/api/v1/projects/{project.id}", headers=headers).json()
    response = client.patch(f"/api/v1/projects/{project.id}", headers=headers, json=body)
    assert response.status_code == 422
    if isinstance(list(body.values())[0], bool):
        # JSON true is not 1: false would have closed corrections.
        assert response.json()["errors"][0]["message"] == "must be a number, not true or false"
    assert client.get(f"/api/v1/projects/{project.id}", headers=headers).json() == before


@pytest.mark.parametrize("body", [{}, {"description": None}, {"overlap": None, "qc_rate": 0.1}])
def test_a_patch_that_changes_nothing_is_refused_and_says_why(client, headers, body) -> None:  # type: ignore[no-untyped-def]
    project = client.post("/api/v1/projects", headers=headers, json={"name": "patched"}).json()
    response = client.patch(f"/api/v1/projects/{project['id']}", headers=headers, json=body)
    assert response.status_code == 422
    assert ("cannot be null" if body else "nothing to change") in response.json()["detail"]
    assert client.get(f"/api/v1/projects/{project['id']}", headers=headers).json() == project


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1/projects/999", 404),
        ("PATCH", "/api/v1/projects/999", 404),
        ("GET", "/api/v1/projects/999/progress", 404),
        ("POST", "/api/v1/projects/999/tasks/next", 404),
        ("GET", "/api/v1/projects/999/export?format=trl", 404),
        ("GET", "/api/v1/projects/nine", 422),
        ("GET", "/api/v1/projects/-1", 422),
        ("GET", f"/api/v1/projects/{2**64}", 422),
    ],
)
def test_unknown_or_malformed_project_ids_get_a_clear_4xx(client, headers, method, path, status) -> None:  # type: ignore[no-untyped-def]
    body = {"PATCH": {"overlap": 2}, "POST": {}}.get(method)
    response = client.request(method, path, headers=headers, json=body)
    assert response.status_code == status
    assert response.json()["detail"]


def test_progress_counts_labels_of_the_last_days_not_of_days_to_come(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "imported")
    records = sample_records()[:2]
    records[0]["timestamp"] = "9999-12-31T23:59:59"
    an_hour_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    records[1]["timestamp"] = an_hour_ago.isoformat()
    import_bytes(session_factory, project, jsonl(records))
    progress = client.get(f"/api/v1/projects/{project.id}/progress", headers=headers).json()
    assert progress["labels"] == 2
    # Each of the last 14 days, zeros included, as the activity's: a dashboard plots both alike.
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=13 - i)).isoformat() for i in range(14)]
    assert [d["day"] for d in progress["labels_per_day"]] == days
    assert {d["day"]: d["labels"] for d in progress["labels_per_day"] if d["labels"]} == {an_hour_ago.date().isoformat(): 1}


def test_imported_labels_count_as_progress_once_the_overlap_asks_for_more(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    # The sample at overlap 1 is done; at overlap 2 its labeled solutions wait for a second
    # label, and are in progress, not waiting as if nobody had labeled them.
    project = make_project(session_factory, "imported")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    url = f"/api/v1/projects/{project.id}/progress"
    at_one = client.get(url, headers=headers).json()
    assert (at_one["solutions_done"], at_one["solutions_in_progress"], at_one["solutions_waiting"]) == (8, 0, 0)
    assert client.patch(f"/api/v1/projects/{project.id}", headers=headers, json={"overlap": 2}).status_code == 200
    at_two = client.get(url, headers=headers).json()
    labeled_once = at_two["solutions_in_progress"]
    assert labeled_once > 0 and at_two["solutions_waiting"] == 8 - at_two["solutions_done"] - labeled_once
    assert at_two["solutions_waiting"] == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", "text/json",
                                          "application/x-www-form-urlencoded"])
def test_a_json_body_sent_as_another_type_is_refused_by_its_header(client, session_factory, headers, content_type) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    response = client.patch(f"/api/v1/projects/{project.id}", content=b'{"overlap": 2}',
                            headers={**headers, "Content-Type": content_type})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "body", "message": "send the body as JSON, with Content-Type: "
                                                                      f"application/json, not {content_type}"}]
    assert client.get(f"/api/v1/projects/{project.id}", headers=headers).json()["overlap"] == 1


def test_days_are_utc_days_whatever_time_zone_postgresql_runs_in(postgresql_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # libpq sends PGTZ as the session's time zone, as a server's own setting would apply.
    monkeypatch.setenv("PGTZ", "Asia/Tokyo")
    engine = create_db_engine(Settings(database_url=postgresql_url, STEPWISE_ENV="test"))
    try:
        with engine.connect() as connection:
            day = connection.execute(text("SELECT date(timestamptz '2026-01-01 20:00:00+00')")).scalar_one()
    finally:
        engine.dispose()
    assert day == date(2026, 1, 1)
