"""A request body the API cannot take as sent is refused in words that say what to send instead;
the schema and the answers' headers say what really comes back."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from app.body_guard import TOO_LARGE
from app.db import session_scope
from app.models import Label, Project
from tests.conftest import add_solutions, api_headers, make_project, make_user

REPEATED = "is given more than once in its object: send each key once (a JSON parser keeps only one value)"
NOT_MULTIPART = "send the file as multipart/form-data with parts `file` and `format` (and `separator` for solutions)"


def _description(session_factory, project_id: int) -> str:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalars(select(Project.description).where(Project.id == project_id)).one()


def test_a_json_body_sent_without_a_content_type_is_told_to_name_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # What python requests sends for data=json.dumps(...): the body was called "no object".
    project = make_project(session_factory, description="kept")
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    url = f"/api/v1/projects/{project.id}"
    said = "send the body as JSON, with Content-Type: application/json (the request had no Content-Type)"
    response = client.patch(url, content=json.dumps({"description": "changed"}), headers=headers)
    assert response.status_code == 422, response.text
    assert response.json() == {"detail": f"invalid request: body: {said}", "errors": [{"field": "body", "message": said}]}
    # No body at all is a body left out, as before.
    empty = client.patch(url, headers=headers)
    assert empty.json()["errors"] == [{"field": "body", "message": "this field is required"}]
    assert _description(session_factory, project.id) == "kept"


def test_a_json_body_that_is_not_utf8_names_the_byte(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, description="kept")
    make_user(session_factory, "max", "manager")
    headers = {**api_headers(client, "max"), "Content-Type": "application/json"}
    response = client.patch(f"/api/v1/projects/{project.id}", content=b'{"description":"caf\xe9"}', headers=headers)
    assert response.status_code == 422, response.text
    said = "the body is not valid UTF-8 (byte 19): send JSON encoded as UTF-8"
    assert response.json() == {"detail": said, "errors": [{"field": "body", "message": said}]}
    assert _description(session_factory, project.id) == "kept"
    # A caller the route would turn away hears that first, as for any other unreadable body.
    anonymous = client.patch(f"/api/v1/projects/{project.id}", content=b'{"description":"caf\xe9"}',
                             headers={"Content-Type": "application/json"})
    assert anonymous.status_code == 401


def test_a_key_given_twice_is_refused_by_its_path_and_changes_nothing(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, description="kept", overlap=1)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "ann", "labeler")
    boss = {**api_headers(client, "max"), "Content-Type": "application/json"}
    url = f"/api/v1/projects/{project.id}"
    response = client.patch(url, content='{"description": "a", "description": "b"}', headers=boss)
    assert response.status_code == 422, response.text
    assert response.json() == {"detail": f"invalid request: description: {REPEATED}",
                               "errors": [{"field": "description", "message": REPEATED}]}
    assert _description(session_factory, project.id) == "kept"
    # Under a JSON type of another name too; and a caller the route turns away hears that first.
    vendor = client.patch(url, content='{"description": "a", "description": "b"}',
                          headers={**boss, "Content-Type": "application/merge-patch+json"})
    assert vendor.status_code == 422 and vendor.json()["errors"][0]["field"] == "description"
    anonymous = client.patch(url, content='{"description": "a", "description": "b"}',
                             headers={"Content-Type": "application/json"})
    assert anonymous.status_code == 401

    ann = {**api_headers(client, "ann"), "Content-Type": "application/json"}
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=ann).json()["task"]
    submit = f"/api/v1/assignments/{task['assignment_id']}/submit"
    body = ('{"idempotency_key": "ann-twice-0001", "finish_reason": "solution", "total_time_ms": 1000, '
            '"ratings": [{"rating": 1, "rating": 5}, {"rating": 1}, {"rating": 1}]}')
    refused = client.post(submit, content=body, headers=ann)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [{"field": "ratings.0.rating", "message": REPEATED}]
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0
    # Every repeated key is named, in the order the body has them; a key repeated at the top
    # whose first value held a repeat itself is named as the top's.
    nested = client.post(submit, headers=ann, content=(
        '{"ratings": [{"rating": 1}, {"rating": 1, "flagged": true, "flagged": false}], "ratings": [], '
        '"alternatives": [{"a": {"b": 1, "b": 2}}], "total_time_ms": 1, "total_time_ms": 1}'))
    assert [e["field"] for e in nested.json()["errors"]] == ["ratings", "total_time_ms", "alternatives.0.a.b"]
    # The same keys once each are taken.
    once = body.replace('"rating": 1, "rating": 5', '"rating": 1')
    assert client.post(submit, content=once, headers=ann).status_code == 200


def test_an_import_sent_as_anything_but_multipart_is_told_how_to_send_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    url = f"/api/v1/projects/{project.id}/imports"
    line = b'{"problem": "What is 1+1?", "answer": "2"}\n'
    for kind in ("application/x-ndjson", "application/json", "text/plain", "application/x-www-form-urlencoded"):
        response = client.post(url, content=line, headers={**headers, "Content-Type": kind})
        assert response.status_code == 422, (kind, response.text)
        said = f"{NOT_MULTIPART}, not {kind}"
        assert response.json() == {"detail": said, "errors": [{"field": "body", "message": said}]}
    bare = client.post(url, content=line, headers=headers)
    assert bare.status_code == 422
    assert bare.json()["detail"] == f"{NOT_MULTIPART}: the request had no Content-Type"
    # The login and role checks answer first.
    make_user(session_factory, "ann", "labeler")
    labeler = client.post(url, content=line, headers={**api_headers(client, "ann"), "Content-Type": "text/plain"})
    assert labeler.status_code == 403
    assert client.post(url, content=line, headers={"Content-Type": "text/plain"}).status_code == 401


def test_a_multipart_body_without_a_boundary_is_said_to_lack_one(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # What a client sends that sets Content-Type by hand beside requests' files=.
    project = make_project(session_factory)
    make_user(session_factory, "max", "manager")
    response = client.post(f"/api/v1/projects/{project.id}/imports", content=b"--x\r\n\r\n--x--\r\n",
                           headers={**api_headers(client, "max"), "Content-Type": "multipart/form-data"})
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "the Content-Type multipart/form-data names no boundary between the parts: let the HTTP client write")


def test_every_operation_that_takes_a_body_documents_the_413(client) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/api/v1/openapi.json").json()
    taking = {(method, path): operation["responses"] for path, methods in schema["paths"].items()
              for method, operation in methods.items() if "requestBody" in operation}
    assert ("patch", "/api/v1/projects/{project_id}") in taking
    error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    undocumented = [key for key, responses in taking.items() if responses.get("413", {}).get("content") != error_body]
    assert not undocumented
    assert taking[("patch", "/api/v1/projects/{project_id}")]["413"]["description"] == TOO_LARGE
    # An upload's own limit is the larger one, and keeps its words.
    upload = taking[("post", "/api/v1/projects/{project_id}/imports")]["413"]
    assert upload["description"] == "the upload is larger than STEPWISE_MAX_UPLOAD_MB"
    # An operation without a body is not refused one.
    assert "413" not in schema["paths"]["/api/v1/projects"]["get"]["responses"]


def test_a_wrong_method_is_refused_in_a_sentence_naming_the_right_ones(client) -> None:  # type: ignore[no-untyped-def]
    response = client.put("/api/v1/projects")
    assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
    assert response.json() == {"detail": "PUT is not allowed here: use GET or POST"}
    static = client.post("/static/js/labeler.js")
    assert static.status_code == 405 and static.headers["allow"] == "GET, HEAD"
    assert "POST is not allowed here: use GET or HEAD" in static.text


def test_a_204_carries_no_content_type(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_solutions(session_factory, project, 1)
    make_user(session_factory, "max", "manager")
    ann = make_user(session_factory, "ann", "labeler")
    labeler = api_headers(client, "ann")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=labeler).json()["task"]
    released = client.post(f"/api/v1/assignments/{task['assignment_id']}/release", headers=labeler)
    assert released.status_code == 204 and released.content == b""
    assert "content-type" not in released.headers, released.headers
    manager = api_headers(client, "max")
    added = client.post(f"/api/v1/projects/{project.id}/members", json={"username": "ann"}, headers=manager)
    assert added.status_code == 201, added.text
    removed = client.delete(f"/api/v1/projects/{project.id}/members/{ann.id}", headers=manager)
    assert removed.status_code == 204 and "content-type" not in removed.headers
    # Other answers keep theirs, and a 204 keeps the security headers.
    assert released.headers["x-content-type-options"] == "nosniff"
    assert added.headers["content-type"] == "application/json"
