"""A real `stepwise serve`: metrics added up over worker processes, and JSON logs an operator can ship."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.ops.logs import REQUEST_ID, Json, RequestContext
from tests.deploy.test_serve import STEPWISE, _free_port, _listeners, _wait_for, env  # noqa: F401

PASSWORD = "correct horse battery"


def _serve(env: dict[str, str], port: int, workers: int, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [STEPWISE, "serve", "--port", str(port), "--workers", str(workers), *options],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _stop(server: subprocess.Popen[str]) -> str:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        _, stderr = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    return stderr


def _healthz_count(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "stepwise_http_requests_total" and sample.labels.get("route") == "/healthz":
                return sample.value
    return 0.0


def test_counts_add_up_over_the_worker_processes(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    port = _free_port()
    server = _serve({**env, "TMPDIR": str(tmp_path)}, port, 2)
    try:
        _wait_for(lambda: _listeners(port) == 2)
        metrics_dirs = list(tmp_path.glob("stepwise-metrics-*"))
        assert len(metrics_dirs) == 1
        # A new connection each: the kernel spreads them over both workers' sockets.
        for _ in range(40):
            with httpx.Client() as client:
                assert client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        assert len({p.name.split("_")[-1] for p in metrics_dirs[0].glob("*.db")}) == 2, "both workers counted"
        # Whichever worker answers a scrape, it reports both workers' requests.
        for _ in range(6):
            with httpx.Client() as client:
                assert _healthz_count(client.get(f"http://127.0.0.1:{port}/metrics").text) == 40
    finally:
        _stop(server)
    assert not metrics_dirs[0].exists(), "the metrics files are removed when the server stops"


def test_json_logs_name_the_request_and_never_a_secret(env: dict[str, str]) -> None:  # noqa: F811
    subprocess.run([STEPWISE, "users", "create", "--username", "opal", "--role", "admin"],
                   env=env, input=PASSWORD + "\n", check=True, capture_output=True, text=True)
    port = _free_port()
    server = _serve({**env, "STEPWISE_LOG_FORMAT": "json"}, port, 1, "--access-log")
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _listeners(port) == 1)
        with httpx.Client(base_url=base) as browser:
            page = browser.get("/login").text
            login_csrf = page.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
            login = browser.post("/login", data={"username": "opal", "password": PASSWORD, "login_csrf": login_csrf})
            assert login.status_code == 303
            cookie = next(iter(browser.cookies.values()))
            token = browser.post("/api/v1/auth/tokens", json={"username": "opal", "password": PASSWORD}).json()["token"]
        with httpx.Client(base_url=base) as api:
            me = api.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}", "X-Request-ID": "trace-42"})
            assert me.status_code == 200 and me.headers["x-request-id"] == "trace-42"
            user_id = me.json()["id"]
    finally:
        stderr = _stop(server)
    for secret in (PASSWORD, token, cookie, login_csrf):
        assert secret not in stderr
    events = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert all({"time", "level", "message"} <= e.keys() for e in events), "every line is one JSON event"
    # uvicorn's own lines ("Started server process") carry no copy in terminal colours.
    assert any(e.get("logger", "").startswith("uvicorn") for e in events)
    assert "color_message" not in stderr and "\\u001b" not in stderr
    requests = [e for e in events if e.get("logger") == "stepwise.access"]
    mine = next(e for e in requests if e["request_id"] == "trace-42")
    assert mine["route"] == "/api/v1/users/me" and mine["status"] == 200 and mine["user_id"] == user_id
    assert isinstance(mine["duration_ms"], float) and mine["level"] == "INFO"
    posted = next(e for e in requests if e["route"] == "/login" and e["method"] == "POST")
    assert posted["status"] == 303 and len(posted["request_id"]) == 32


def test_an_error_is_logged_with_its_traceback_and_request_id() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Json())
    handler.addFilter(RequestContext())
    logger = logging.getLogger("tests.ops.error")
    logger.addHandler(handler)
    REQUEST_ID.set("req-7")
    try:
        try:
            raise RuntimeError("the disk is full")
        except RuntimeError:
            logger.exception("Exception in ASGI application")
    finally:
        logger.removeHandler(handler)
    event = json.loads(stream.getvalue())
    assert event["level"] == "ERROR" and event["request_id"] == "req-7"
    assert "Traceback" in event["exc_info"] and "RuntimeError: the disk is full" in event["exc_info"]


def test_text_logs_keep_the_apps_lines_with_time_and_level() -> None:
    # uvicorn's configuration alone left the root without a handler: the worker said nothing.
    script = (
        "import logging, logging.config\n"
        "from app.ops.logs import logging_config\n"
        "logging.config.dictConfig(logging_config('text', access_log=False))\n"
        "logging.getLogger('app.rounds.worker').info('round 3: claimed')\n"
        "logging.getLogger('alembic.runtime.migration').info('Context impl PostgresqlImpl.')\n"
        "logging.getLogger('stepwise.access').info('GET /healthz 200')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith(" INFO app.rounds.worker: round 3: claimed"), lines
