"""A JSON body's bad values are named in the words the forms and the CLI use, not pydantic's."""

from __future__ import annotations

from tests.conftest import api_headers, make_user


def test_wrong_types_in_a_body_read_as_the_forms_say_them(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    response = client.post("/api/v1/projects", headers=api_headers(client, "max"),
                           json={"name": 5, "overlap": "two", "open_to_all": []})
    assert response.status_code == 422
    words = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert words == {"name": "must be text", "overlap": "must be a whole number",
                     "open_to_all": "must be true or false"}

    make_user(session_factory, "root", "admin")
    renamed = client.patch("/api/v1/users/1", headers=api_headers(client, "root"), json={"username": "other"})
    assert renamed.status_code == 422
    assert {"field": "username", "message": "is not a field here"} in renamed.json()["errors"]


def test_text_for_a_number_or_a_truth_value_is_refused_in_json_and_changes_nothing(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # pydantic's lax mode took "yes" for true: every step was stored flagged; "false" deactivated.
    from tests.conftest import add_solutions, make_project

    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "root", "admin")
    ann, boss, root = (api_headers(client, name) for name in ("ann", "max", "root"))
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    submit = f"/api/v1/assignments/{task['assignment_id']}/submit"
    good = {"idempotency_key": "ann-typed-0001", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution",
            "total_time_ms": 1000}
    for changed, field, message in (
        ({"ratings": [{"rating": 1, "flagged": "yes"}] * 3}, "ratings.0.flagged", "must be true or false"),
        ({"total_time_ms": "1000"}, "total_time_ms", "must be a whole number"),
    ):
        refused = client.post(submit, headers=ann, json={**good, **changed})
        assert refused.status_code == 422 and {"field": field, "message": message} in refused.json()["errors"], refused.text
    assert client.post(submit, headers=ann, json=good).status_code == 200

    for body, field in (({"overlap": "3"}, "overlap"), ({"qc_rate": "0.5"}, "qc_rate"), ({"qc_feedback": "true"}, "qc_feedback")):
        refused = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json=body)
        assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == field, refused.text
    kept = client.get(f"/api/v1/projects/{project.id}", headers=boss).json()
    assert (kept["overlap"], kept["qc_rate"], kept["qc_feedback"]) == (1, 0.0, False)

    ann_id = client.get("/api/v1/users/me", headers=ann).json()["id"]
    assert client.patch(f"/api/v1/users/{ann_id}", headers=root, json={"is_active": "false"}).status_code == 422
    assert client.get("/api/v1/users/me", headers=ann).status_code == 200, "still active, token still good"
    token = client.post("/api/v1/auth/tokens", headers=ann, json={"name": "typed", "read_only": "true"})
    assert token.status_code == 422 and token.json()["errors"][0]["field"] == "read_only"

    # Numbers are no truth values either: 0 had resumed a paused project.
    assert client.patch(f"/api/v1/projects/{project.id}", headers=boss, json={"paused": True}).status_code == 200
    for body in ({"paused": 0}, {"open_to_all": 1}, {"qc_feedback": 1.0}):
        refused = client.patch(f"/api/v1/projects/{project.id}", headers=boss, json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["errors"] == [{"field": next(iter(body)), "message": "must be true or false"}]
    assert client.get(f"/api/v1/projects/{project.id}", headers=boss).json()["paused"] is True
    assert client.patch(f"/api/v1/users/{ann_id}", headers=root, json={"is_active": 0}).status_code == 422
    # A mapping's values as its own: text for a weight is refused, though its keys are text.
    weights = client.patch(f"/api/v1/projects/{project.id}/round-settings", headers=root,
                           json={"source_weights": {"human": "1"}})
    assert weights.status_code == 422 and weights.json()["errors"][0]["field"] == "source_weights", weights.text
    assert client.patch(f"/api/v1/projects/{project.id}/round-settings", headers=root,
                        json={"source_weights": {"human": 1}}).status_code == 200


def test_a_label_that_breaks_its_modes_rules_names_the_field_to_fix(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import add_solutions, make_project

    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 1, steps=3)
    make_user(session_factory, "ann", "labeler")
    ann = api_headers(client, "ann")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    submit = f"/api/v1/assignments/{task['assignment_id']}/submit"
    good = {"idempotency_key": "ann-rules-0001", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution",
            "total_time_ms": 1000}
    for changed, field in (
        ({"ratings": [{"rating": 1}] * 5}, "ratings"),
        ({"finish_reason": "give_up"}, "finish_note"),
        ({"ratings": [{"rating": 1}], "finish_reason": "found_error"}, "finish_reason"),
        ({"ratings": [{"rating": -1}, {"rating": 1}], "finish_reason": "give_up", "finish_note": "x"}, "ratings"),
        ({"alternatives": []}, "alternatives"),
    ):
        refused = client.post(submit, headers=ann, json={**good, **changed})
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["errors"] == [{"field": field, "message": body["detail"]}], (changed, body)
