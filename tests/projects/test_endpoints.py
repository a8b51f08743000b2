"""The projects API refuses bad input with a clear 4xx and changes nothing."""

from __future__ import annotations

import pytest

from tests.conftest import api_headers, make_project, make_user


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


def test_a_duplicate_name_gets_409(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "algebra")
    response = client.post("/api/v1/projects", headers=headers, json={"name": "algebra"})
    assert response.status_code == 409
    assert response.json() == {"detail": "a project named 'algebra' already exists"}


@pytest.mark.parametrize("body", [{"overlap": 0}, {"lease_minutes": 5000}, {"labeling_mode": "x"}])
def test_invalid_settings_change_nothing(client, session_factory, headers, body) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", overlap=2)
    response = client.patch(f"/api/v1/projects/{project.id}", headers=headers, json=body)
    assert response.status_code == 422
    assert client.get(f"/api/v1/projects/{project.id}", headers=headers).json()["overlap"] == 2


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
    response = client.request(method, path, headers=headers, json={} if method != "GET" else None)
    assert response.status_code == status
    assert response.json()["detail"]
