"""POST /api/v1/projects/{id}/imports (multipart) and GET of the batches."""

from __future__ import annotations

import httpx
from anyio.from_thread import start_blocking_portal
import orjson

from app.demo.service import MATH500
from tests.conftest import api_headers, make_project, make_user
from tests.imports.conftest import SAMPLE, row_counts


def _upload(client, headers, project_id, data: bytes, fmt: str, filename="f.jsonl", **form):  # type: ignore[no-untyped-def]
    return client.post(
        f"/api/v1/projects/{project_id}/imports",
        headers=headers,
        files={"file": (filename, data, "application/x-ndjson")},
        data={"format": fmt, **form},
    )


def test_manager_imports_prm800k_then_the_same_file_again(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    headers = api_headers(client, "mia")
    response = _upload(client, headers, project.id, SAMPLE.read_bytes(), "prm800k", filename="phase1_test.jsonl")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["added"] == {"problems": 8, "solutions": 8, "labels": 9}
    assert body["filename"] == "phase1_test.jsonl" and body["format"] == "prm800k"
    assert not body["already_imported"]

    again = _upload(client, headers, project.id, SAMPLE.read_bytes(), "prm800k")
    assert again.status_code == 200 and again.json()["already_imported"]
    assert again.json()["batch_id"] == body["batch_id"]

    batches = client.get(f"/api/v1/projects/{project.id}/imports", headers=headers)
    assert batches.status_code == 200
    [batch] = batches.json()
    assert batch["id"] == body["batch_id"] and batch["lines"] == 9 and len(batch["file_sha256"]) == 64
    assert batch["user_id"] is not None and batch["added"]["labels"] == 9


def test_bad_upload_answers_422_with_every_bad_line(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    headers = api_headers(client, "mia")
    data = b'{"problem": "a", "answer": "1"}\n{"problem": 3}\nnot json\n{"problem": "b", "level": "x"}\n'
    response = _upload(client, headers, project.id, data, "math", filename="broken.jsonl")
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "3 bad lines in broken.jsonl: nothing was imported"
    assert [(e["file"], e["line"], e["field"]) for e in body["errors"]] == [
        ("broken.jsonl", 2, "problem"),
        ("broken.jsonl", 3, None),
        ("broken.jsonl", 4, "level"),
    ]
    assert row_counts(session_factory)["problems"] == 0


def test_two_files_at_once_are_refused_and_neither_is_imported(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # FastAPI hands the route the last file part: the first was dropped without a word.
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    line = b'{"problem": "What is $1+1$?", "answer": "2"}\n'
    response = client.post(
        f"/api/v1/projects/{project.id}/imports",
        headers=api_headers(client, "mia"),
        files=[("file", ("a.jsonl", line, "application/x-ndjson")), ("file", ("b.jsonl", line, "application/x-ndjson"))],
        data={"format": "math"},
    )
    assert response.status_code == 422
    assert response.json()["detail"] == "one file at a time: the upload holds 2 files; import each on its own"
    assert response.json()["errors"][0]["field"] == "file"
    assert row_counts(session_factory)["import_batches"] == 0


def test_candidates_with_a_separator_through_the_api(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    headers = api_headers(client, "mia")
    math = MATH500.read_bytes().splitlines()[:1]
    assert _upload(client, headers, project.id, math[0], "math").status_code == 201
    problem = orjson.loads(math[0])["problem"]
    line = orjson.dumps({"problem": problem, "text": "First.|Second.|The answer is 3."})
    response = _upload(client, headers, project.id, line, "solutions", separator="|")
    assert response.status_code == 201, response.text
    assert response.json()["added"]["solutions"] == 1


def test_wrong_format_role_and_project_are_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    make_user(session_factory, "leo", "labeler")
    make_user(session_factory, "rex", "researcher")
    manager = api_headers(client, "mia")
    assert _upload(client, manager, project.id, b"{}", "csv").status_code == 422
    assert _upload(client, manager, project.id + 100, b"{}", "math").status_code == 404
    assert _upload(client, api_headers(client, "leo"), project.id, b"{}", "math").status_code == 403
    assert _upload(client, api_headers(client, "rex"), project.id, b"{}", "math").status_code == 403
    assert client.get(f"/api/v1/projects/{project.id}/imports", headers=api_headers(client, "rex")).status_code == 200
    assert client.get(f"/api/v1/projects/{project.id}/imports", headers=api_headers(client, "leo")).status_code == 403
    missing_file = client.post(f"/api/v1/projects/{project.id}/imports", headers=manager, data={"format": "math"})
    assert missing_file.status_code == 422
    assert row_counts(session_factory)["import_batches"] == 0


def test_import_route_is_documented(client) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/api/v1/openapi.json").json()
    post = schema["paths"]["/api/v1/projects/{project_id}/imports"]["post"]
    assert "multipart/form-data" in post["requestBody"]["content"]
    assert {"200", "201", "422"} <= set(post["responses"])
    export = schema["paths"]["/api/v1/projects/{project_id}/export"]["get"]
    assert {p["name"] for p in export["parameters"]} >= {"format", "since", "until", "generation", "labeler", "qc", "neutral"}


def test_upload_over_the_limit_is_refused(client, app, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    app.state.settings = app.state.settings.model_copy(update={"max_upload_mb": 1})
    data = b'{"problem": "' + b"x" * (1024 * 1024) + b'", "answer": "1"}\n'
    response = _upload(client, api_headers(client, "mia"), project.id, data, "math")
    assert response.status_code == 413
    assert response.json()["detail"] == "the file is larger than the 1 MB upload limit"
    assert row_counts(session_factory)["problems"] == 0


def _streamed_upload(app, path: str, headers: dict[str, str], megabytes: int, *, declared: bool):  # type: ignore[no-untyped-def]
    """An upload of `megabytes` of file, sent a chunk at a time; the answer, and how many bytes
    of the body the server read."""
    boundary = "stepwise-test-boundary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\nmath\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
            "Content-Type: application/x-ndjson\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    chunk = b"x" * (64 * 1024)
    chunks = megabytes * 16
    sent = 0

    async def body():  # type: ignore[no-untyped-def]
        nonlocal sent
        for part in [head, *[chunk] * chunks, tail]:
            sent += len(part)
            yield part

    length = len(head) + len(chunk) * chunks + len(tail)
    headers = {**headers, "Content-Type": f"multipart/form-data; boundary={boundary}",
               **({"Content-Length": str(length)} if declared else {})}

    async def call():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
            return await client.post(path, headers=headers, content=body())

    # A loop of its own, in a thread of its own: a test before may leave one running in this thread.
    with start_blocking_portal() as portal:
        return portal.call(call), sent


def test_an_upload_is_refused_before_its_body_is_read_by_whom_and_how_large(client, app, session_factory) -> None:  # type: ignore[no-untyped-def]
    # The body was spooled to disk whole, then refused: anyone could fill the server's disk.
    project = make_project(session_factory)
    make_user(session_factory, "mia", "manager")
    make_user(session_factory, "lars", "labeler")
    app.state.settings = app.state.settings.model_copy(update={"max_upload_mb": 1})
    path = f"/api/v1/projects/{project.id}/imports"
    nobody, read = _streamed_upload(app, path, {}, 8, declared=True)
    assert nobody.status_code == 401 and read < 64 * 1024
    labeler, read = _streamed_upload(app, path, api_headers(client, "lars"), 8, declared=True)
    assert labeler.status_code == 403 and read < 64 * 1024
    mia = api_headers(client, "mia")
    said, read = _streamed_upload(app, path, mia, 8, declared=True)
    assert said.status_code == 413 and read < 64 * 1024
    # Not saying its length, it is cut off once past the limit.
    unsaid, read = _streamed_upload(app, path, mia, 8, declared=False)
    assert unsaid.status_code == 413 and read < 3 * 1024 * 1024
    assert unsaid.json()["detail"] == "the file is larger than the 1 MB upload limit"
    assert row_counts(session_factory)["problems"] == 0
    # Within the limit, the same way in, it is taken.
    taken, _ = _streamed_upload(app, path, mia, 0, declared=False)
    assert taken.status_code == 422, taken.text
