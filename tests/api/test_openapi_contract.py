"""The JSON API keeps the promises of its OpenAPI schema, for inputs nobody thought of.

Schemathesis generates requests from the schema itself (valid ones, and ones broken on purpose)
and sends them to the app on both databases, as an admin, so that no route stops at the role
check. Every answer must be documented: no 500, a status code the operation lists, and a body
that matches the schema of that status code, errors included.

Left out: checks that the schema cannot express. The API refuses some schema-valid input on
purpose (`since` after `until`, shares adding up past 1, a file with no records), and pydantic
takes `0` for `false` and `false` for `0`, as the browser forms need.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import select

from app.db import session_scope
from app.labeling.queue import add_slots
from app.models import Assignment, AssignmentStatus, Label, Problem, Solution
from tests.conftest import PASSWORD, api_headers, make_project, make_user

pytestmark = pytest.mark.timeout(1800)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Left out of the fuzzing: they would revoke the token the other operations run on.
REVOKES_THE_TOKEN = "/api/v1/auth/tokens/current"
REVOKES_A_TOKEN = "/api/v1/auth/tokens/{token_id}"
REVOKES_ANYONES_TOKEN = "/api/v1/api-tokens/{token_id}"


def _examples(count: int):  # type: ignore[no-untyped-def]
    """Hypothesis settings for `count` generated requests, the same on every run."""
    return settings(
        max_examples=count,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _fuzz(operation, headers: dict[str, str], mode: GenerationMode) -> None:  # type: ignore[no-untyped-def]
    @given(case=operation.as_strategy(generation_mode=mode))
    @_examples(25)
    def call(case) -> None:  # type: ignore[no-untyped-def]
        case.call_and_validate(headers=headers, checks=CHECKS)

    call()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_every_operation_answers_as_documented(app, client, session_factory, mode):  # type: ignore[no-untyped-def]
    make_user(session_factory, "fuzz-admin", "admin")
    # Some rows for generated ids to find; most ids are random and miss, which tests the 404s.
    make_project(session_factory, "fuzzed")
    headers = api_headers(client, "fuzz-admin")
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in (REVOKES_THE_TOKEN, REVOKES_A_TOKEN) or \
                (operation.path, operation.method.upper()) == (REVOKES_ANYONES_TOKEN, "DELETE"):
            continue
        try:
            _fuzz(operation, headers, mode)
        except Unsatisfiable:
            # An operation without parameters or body has nothing to get wrong on purpose.
            if mode is GenerationMode.POSITIVE:
                raise
        except Exception as exc:  # noqa: BLE001 - gathered, so that one run lists every failure
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
    # Still an admin, still logged in: otherwise the later operations met only 401s and 403s,
    # which every operation documents.
    me = client.get("/api/v1/users/me", headers=headers)
    assert me.status_code == 200 and me.json()["role"] == "admin", me.text


HOLDER_OPERATIONS = {
    "/api/v1/assignments/{assignment_id}/submit": 200,
    "/api/v1/assignments/{assignment_id}/release": 204,
    "/api/v1/assignments/{assignment_id}/skip": 204,
}


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("path", list(HOLDER_OPERATIONS))
def test_submit_and_release_of_a_held_lease_answer_as_documented(app, client, session_factory, db, path, mode):  # type: ignore[no-untyped-def]
    """Random ids rarely name a lease, so the general fuzz meets these operations' 404s only:
    here every generated request is aimed at the lease the labeler holds at that moment."""
    project = make_project(session_factory, "held", overlap=1)
    # One step each: more of the generated ratings make a whole label of it. One problem each:
    # a labeler who reports a bad problem is not served its other solutions.
    with session_scope(session_factory) as session:
        problems = [Problem(project_id=project.id, statement=f"What is {i}+1?", answer=str(i + 1),
                            content_hash=f"p{i}") for i in range(60)]
        session.add_all(problems)
        session.flush()
        solutions = [Solution(project_id=project.id, problem_id=problem.id, steps=["one step"],
                              priority=0.0, content_hash=f"s{problem.id}") for problem in problems]
        session.add_all(solutions)
        session.flush()
        add_slots(session, project, [(solution.id, 0.0, None) for solution in solutions])
    make_user(session_factory, "holder", "labeler")
    headers = api_headers(client, "holder")
    operation = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)[path]["POST"]
    statuses: list[int] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @_examples(40)
    def call(case) -> None:  # type: ignore[no-untyped-def]
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        assert task is not None, "the seeded queue ran dry"
        case.path_parameters = {"assignment_id": task["assignment_id"]}
        if mode is GenerationMode.POSITIVE and isinstance(case.body, dict):
            # Generated keys repeat: with each valid body under a fresh key, every one of them
            # reaches the store instead of the first one's receipt.
            case.body["idempotency_key"] = f"fuzzed-key-{len(statuses):04d}"
            if case.body.get("finish_reason") in ("give_up", "bad_problem") and not case.body.get("finish_note"):
                # The schema cannot say that these two need a note, so generated bodies would
                # meet only the 422 that says so and never reach the store.
                case.body["finish_note"] = "a fuzzed reason"
        response = case.call(headers=headers)
        case.validate_response(response, checks=CHECKS)
        statuses.append(response.status_code)

    call()
    if mode is GenerationMode.POSITIVE:
        assert HOLDER_OPERATIONS[path] in statuses, statuses
    labels = db.execute(select(Label.assignment_id, Assignment.status).join(Assignment)).all()
    assert all(status == AssignmentStatus.done for _, status in labels)
    assert len({assignment for assignment, _ in labels}) == len(labels)
    assert len(labels) == statuses.count(200)


def test_revoking_the_current_token_answers_as_documented(app, client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "leaving", "labeler")
    headers = api_headers(client, "leaving")
    operation = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)[REVOKES_THE_TOKEN]["DELETE"]
    for expected in (204, 401):
        case = operation.Case(headers=headers)
        response = case.call()
        assert response.status_code == expected, response.text
        case.validate_response(response, checks=CHECKS)


def test_revoking_a_token_by_id_answers_as_documented(app, client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "leaving", "labeler")
    headers = api_headers(client, "leaving")
    spare = client.get("/api/v1/auth/tokens", headers=api_headers(client, "leaving")).json()[0]["id"]
    operation = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)[REVOKES_A_TOKEN]["DELETE"]
    for token_id, expected in ((spare, 204), (spare, 404), (0, 422)):
        case = operation.Case(headers=headers, path_parameters={"token_id": token_id})
        response = case.call()
        assert response.status_code == expected, response.text
        case.validate_response(response, checks=CHECKS)


def test_an_admin_revoking_anyones_token_answers_as_documented(app, client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "leaving", "labeler")
    headers = api_headers(client, "boss")
    spare = client.post("/api/v1/auth/tokens", json={"username": "leaving", "password": PASSWORD}).json()["id"]
    operation = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)[REVOKES_ANYONES_TOKEN]["DELETE"]
    for token_id, expected in ((spare, 204), (spare, 404), (0, 422)):
        case = operation.Case(headers=headers, path_parameters={"token_id": token_id})
        response = case.call()
        assert response.status_code == expected, response.text
        case.validate_response(response, checks=CHECKS)


def test_a_wrong_method_lists_every_allowed_one(client):  # type: ignore[no-untyped-def]
    # GET and POST of /api/v1/projects are two routes; Starlette's 405 named only the first.
    response = client.put("/api/v1/projects")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert response.json() == {"detail": "PUT is not allowed here: use GET or POST"}


def test_a_405_from_the_static_files_keeps_their_allow_header(client):  # type: ignore[no-untyped-def]
    response = client.post("/static/js/labeler.js")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(("started_at", "message"), [
    ("0001-01-01T00:00:00+05:00", "is too far in the past: it is before the year 1 in UTC"),
    # Python's own arithmetic said "year 0 is out of range", of a year nobody sent.
    ("0001-01-01T00:00:00", "is too far in the past: it is before the year 1 in UTC"),
    # Time on task counts from it: a start after the submit would make it up.
    ("2999-01-01T00:00:00Z", "is in the future: a label cannot start after it is sent"),
    ("9999-12-31T23:59:59-05:00", "is in the future: a label cannot start after it is sent"),
])
def test_a_start_time_with_no_instant_in_utc_or_in_the_future_is_a_422(client, session_factory, started_at, message):  # type: ignore[no-untyped-def]
    make_user(session_factory, "early", "labeler")
    headers = api_headers(client, "early")
    body = {
        "ratings": [],
        "finish_reason": "give_up",
        "finish_note": "x",
        "total_time_ms": 1,
        "idempotency_key": "0123456789",
        "started_at": started_at,
    }
    response = client.post("/api/v1/assignments/1/submit", json=body, headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert error["field"] == "started_at" and message in error["message"]


def test_a_body_that_is_not_text_is_a_clear_422(client):  # type: ignore[no-untyped-def]
    response = client.post(
        "/api/v1/auth/tokens", content=b"\x80", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"] == "the body is not valid UTF-8 (byte 0): send JSON encoded as UTF-8"


def test_a_body_that_is_not_json_names_the_place(client):  # type: ignore[no-untyped-def]
    response = client.post(
        "/api/v1/auth/tokens", content=b'{"username": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "body"
    assert error["message"].startswith("not valid JSON at character 13")


def test_text_the_database_cannot_store_is_a_422_that_changes_nothing(client, session_factory):  # type: ignore[no-untyped-def]
    # On both databases: SQLite would store it, and the project's own export would then not
    # import back.
    make_user(session_factory, "nul-admin", "admin")
    headers = api_headers(client, "nul-admin")
    body = {"name": "nul", "description": "a\u0000b"}
    response = client.post("/api/v1/projects", json=body, headers=headers)
    assert response.status_code == 422, response.text
    assert "NUL" in response.json()["detail"]
    assert client.get("/api/v1/projects", headers=headers).json() == []


def test_an_admin_cannot_demote_or_deactivate_themselves(client, session_factory):  # type: ignore[no-untyped-def]
    admin = make_user(session_factory, "only-admin", "admin")
    headers = api_headers(client, "only-admin")
    for change in ({"role": "labeler"}, {"is_active": False}):
        response = client.patch(f"/api/v1/users/{admin.id}", json=change, headers=headers)
        assert response.status_code == 409, response.text
    assert client.get("/api/v1/users/me", headers=headers).json()["role"] == "admin"


def test_an_id_past_the_id_columns_is_a_422(client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "big-admin", "admin")
    headers = api_headers(client, "big-admin")
    response = client.get(f"/api/v1/projects/{2**31}", headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"field": "path.project_id", "message": "must be at most 2147483647"}
    ]


@pytest.mark.parametrize(
    "query, field",
    [
        ("generation=99999999999", "query.generation.0"),
        ("generation=-99999999999", "query.generation.0"),
        ("labeler=a%00b", "query.labeler.0"),
    ],
)
def test_export_filters_the_database_cannot_compare_are_422s(client, session_factory, query, field):  # type: ignore[no-untyped-def]
    # An export streams: a filter PostgreSQL refuses would have broken the answer half-sent.
    make_user(session_factory, "exporting-admin", "admin")
    project = make_project(session_factory, "exported")
    headers = api_headers(client, "exporting-admin")
    response = client.get(f"/api/v1/projects/{project.id}/export?format=prm800k&{query}", headers=headers)
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_every_json_body_refuses_fields_it_does_not_know(client) -> None:  # type: ignore[no-untyped-def]
    # A misspelt field ("flaged") quietly ignored is a rating or a setting lost.
    schema = client.get("/api/v1/openapi.json").json()
    components = schema["components"]["schemas"]

    def objects(node, seen):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    yield from objects(components[name], seen)
                return
            if node.get("properties"):
                yield node
            for value in node.values():
                yield from objects(value, seen)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value, seen)

    lax = set()
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for obj in objects(body["schema"], set()):
                    if obj.get("additionalProperties") is not False:
                        lax.add((method.upper(), path, obj.get("title")))
    assert not lax, sorted(lax)


def test_an_id_written_other_than_in_digits_names_no_row(client, session_factory):  # type: ignore[no-untyped-def]
    # " 1" was read as 1: a DELETE of /projects/%201 deleted project 1.
    project = make_project(session_factory, "kept")
    make_user(session_factory, "id-admin", "admin")
    headers = api_headers(client, "id-admin")
    for written in ("%20" + str(project.id), "+" + str(project.id), "%EF%BC%91"):
        response = client.delete(f"/api/v1/projects/{written}", headers=headers)
        assert response.status_code == 422, written
        assert response.json()["errors"] == [
            {"field": "path.project_id", "message": "must be a whole number written in the digits 0-9"}]
    assert client.get(f"/api/v1/projects/{project.id}", headers=headers).status_code == 200


def test_unreadable_values_are_named_in_plain_words(client, session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "worded")
    make_user(session_factory, "word-admin", "admin")
    make_user(session_factory, "word-labeler", "labeler")
    labeler = api_headers(client, "word-labeler")
    body = {"idempotency_key": "words-key-1", "finish_reason": "give_up", "finish_note": "x", "ratings": []}
    for changed, field, message in (
        ('"started_at": "not-a-date"', "started_at", "must be a date and time in ISO 8601 (2026-11-28T09:30:00Z)"),
        # Text for a number is refused as text, however long (app.validation.ScalarsAsWritten).
        ('"total_time_ms": "' + "9" * 5000 + '"', "total_time_ms", "must be a whole number"),
    ):
        text = json.dumps(body)[:-1] + ", " + changed + "}"
        response = client.post("/api/v1/assignments/1/submit", content=text,
                               headers={**labeler, "content-type": "application/json"})
        assert response.status_code == 422, response.text
        assert {"field": field, "message": message} in response.json()["errors"]
    # A float setting's bounds read as written: "at most 1", not "at most 1.0".
    admin = api_headers(client, "word-admin")
    for value, message in ((1.5, "must be at most 1"), (-0.5, "must be at least 0")):
        response = client.patch(f"/api/v1/projects/{project.id}", headers=admin, json={"qc_rate": value})
        assert {"field": "qc_rate", "message": message} in response.json()["errors"], response.text
    # As a JSON number it is past what Python's parser reads at all.
    huge = client.post("/api/v1/assignments/1/submit", content='{"total_time_ms": ' + "9" * 5000 + "}",
                       headers={**labeler, "content-type": "application/json"})
    assert huge.status_code == 400 and "a number of over 4,300 digits" in huge.json()["detail"]
    upload = client.post(f"/api/v1/projects/{project.id}/imports", headers=api_headers(client, "word-admin"),
                         data={"format": "math"}, files={"file": ("", b"{}", "application/json")})
    assert upload.status_code == 422
    assert upload.json()["errors"] == [{"field": "file", "message": "must be a file: a part with a file name"}]


def test_the_schema_names_how_to_authenticate_and_what_a_patch_may_not_send(app):  # type: ignore[no-untyped-def]
    # Without securitySchemes, Swagger UI had no Authorize button and generated clients sent no token.
    schema = app.openapi()
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "session"}
    assert schema["security"] == [{"bearer": []}, {"session": []}]
    assert schema["paths"]["/api/v1/auth/tokens"]["post"]["security"] == [], "a password buys the token"
    # A null is refused (422) for every setting: the schema must not offer one.
    update = schema["components"]["schemas"]["ProjectUpdate"]["properties"]
    assert all("null" not in str(field) for field in update.values()), update
    assert {"401", "403"} <= set(schema["paths"]["/api/v1/audit-events"]["get"]["responses"])
