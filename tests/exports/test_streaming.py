"""An export streamed over HTTP holds nobody up: not while it streams, nor after its client went.

Its chunks come from a session of its own. On SQLite that session's transaction took the write
lock, and a client that closed the connection mid-download left the session open: every write of
every user waited 30 s and failed (503) until the server restarted.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Generator
from pathlib import Path

import anyio
from anyio.from_thread import start_blocking_portal
import httpx
import pytest
from sqlalchemy import update

from app.db import session_scope
from app.exports.schemas import ExportFilters
from app.exports.service import stream_export
from app.exports.streaming import ClosingStreamingResponse
from app.models import Project
from tests.conftest import make_project
from tests.deploy.test_observability import PASSWORD, _serve, _stop
from tests.deploy.test_serve import STEPWISE, _free_port, _listeners, _wait_for, env  # noqa: F401
from tests.imports.conftest import import_bytes, jsonl, sample_records

SAMPLE = Path(__file__).parents[1] / "imports" / "data" / "prm800k_sample.jsonl"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_streaming_export_lets_writers_on(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(sample_records()))
    chunks = stream_export(session_factory, project.id, "prm800k", ExportFilters())
    assert next(chunks)
    try:
        # Mid-stream, its transaction open: a write goes through (it waited 30 s, then failed).
        with session_scope(session_factory) as session:
            session.execute(update(Project).where(Project.id == project.id).values(description="written"))
    finally:
        chunks.close()
    with session_scope(session_factory) as session:
        assert session.get_one(Project, project.id).description == "written"


def test_a_client_that_goes_mid_stream_closes_the_chunks() -> None:
    closed = []

    def chunks() -> Generator[bytes, None, None]:
        try:
            while True:
                yield b"x" * 1024
        finally:
            closed.append(True)

    async def run() -> None:
        sent = []

        async def receive() -> dict[str, object]:
            # The client is gone once the first chunk went.
            while not sent:
                await anyio.sleep(0.01)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await ClosingStreamingResponse(chunks())({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)

    # A loop of its own, in a thread of its own: a test before may leave one running in this thread.
    with start_blocking_portal() as portal:
        portal.call(run)
    assert closed == [True]


def test_a_download_cut_short_leaves_the_server_writing(env: dict[str, str]) -> None:  # noqa: F811
    for command, stdin in ((["users", "create", "--username", "opal", "--role", "admin"], PASSWORD + "\n"),
                           (["projects", "create", "streamed"], None),
                           (["import", "--project", "streamed", "--format", "prm800k", str(SAMPLE)], None)):
        subprocess.run([STEPWISE, *command], env=env, input=stdin, check=True, capture_output=True, text=True)
    port = _free_port()
    server = _serve(env, port, 1)
    try:
        _wait_for(lambda: _listeners(port) == 1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as api:
            token = api.post("/api/v1/auth/tokens", json={"username": "opal", "password": PASSWORD}).json()["token"]
            headers = {"Authorization": f"Bearer {token}"}
            project_id = api.get("/api/v1/projects", headers=headers).json()[0]["id"]
            # A download cancelled after its first bytes, as a browser's Cancel or `curl -I` does.
            with socket.create_connection(("127.0.0.1", port)) as raw:
                raw.sendall(f"GET /api/v1/projects/{project_id}/export?format=prm800k HTTP/1.1\r\n"
                            f"Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
                assert raw.recv(200).startswith(b"HTTP/1.1 200")
            changed = api.patch(f"/api/v1/projects/{project_id}", headers=headers, json={"description": "after"})
            assert changed.status_code == 200, changed.text
    finally:
        _stop(server)
