"""`stepwise serve --workers N`: one listening socket per worker, dead workers replaced, a clean stop."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from app.config import normalize_database_url
from app.server import _Server

STEPWISE = str(Path(sys.executable).parent / "stepwise")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listeners(port: int) -> int:
    """Sockets in LISTEN state on 127.0.0.1:port, as the kernel lists them."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        next(table)
        return sum(1 for row in table if row.split()[1] == wanted and row.split()[3] == "0A")


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def _wait_for(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _workers(pid: int) -> set[int]:
    """The server's children but multiprocessing's resource tracker, which spawn starts too."""
    return {child for child in _children(pid) if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes()}


def _start(
    env: dict[str, str], port: int, log: Path, workers: int = 2, options: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    # A session of its own, so that a test can send a signal to the whole group as a terminal does.
    with log.open("w") as out:
        return subprocess.Popen(
            [STEPWISE, "serve", "--port", str(port), "--workers", str(workers), *options],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    subprocess.run([STEPWISE, "db", "upgrade"], env=env, check=True, capture_output=True)
    yield env


def test_workers_listen_on_their_own_sockets_are_replaced_and_stop_cleanly(env: dict[str, str], tmp_path: Path) -> None:
    port = _free_port()
    server = _start(env, port, tmp_path / "serve.log")
    try:
        # The kernel spreads connections over the workers only if each has its own socket.
        _wait_for(lambda: _listeners(port) == 2 and _answers(port))
        workers = _workers(server.pid)
        assert len(workers) == 2

        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        _wait_for(lambda: victim not in _children(server.pid))
        _wait_for(lambda: len(_workers(server.pid)) == 2 and _listeners(port) == 2)
        assert _answers(port)

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    text = (tmp_path / "serve.log").read_text()
    assert f"Child process [{victim}] died" in text and "Stopping parent process" in text
    _wait_for(lambda: _listeners(port) == 0, timeout=30)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_or_sigterm_stops_every_worker_without_a_traceback(
    env: dict[str, str], tmp_path: Path, workers: int, stop: signal.Signals,
) -> None:
    port = _free_port()
    server = _start(env, port, tmp_path / "serve.log", workers)
    try:
        _wait_for(lambda: _listeners(port) == workers and _answers(port))
        # Ctrl-C reaches every process of the group; a service manager signals the server only.
        if stop == signal.SIGINT:
            os.killpg(server.pid, stop)
        else:
            server.send_signal(stop)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    text = (tmp_path / "serve.log").read_text()
    assert ("Stopping parent process" if workers > 1 else "Finished server process") in text
    assert "Traceback" not in text and "Aborted" not in text
    _wait_for(lambda: _listeners(port) == 0, timeout=30)


@pytest.mark.parametrize(("workers", "options"), [(1, ("--access-log",)), (1, ()), (2, ("--access-log",)), (2, ())])
def test_requests_are_logged_with_access_log_only(
    env: dict[str, str], tmp_path: Path, workers: int, options: tuple[str, ...]
) -> None:
    port = _free_port()
    server = _start(env, port, tmp_path / "serve.log", workers, options)
    try:
        _wait_for(lambda: _listeners(port) == workers and _answers(port))
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    logged = '"GET /login HTTP/1.1" 200' in (tmp_path / "serve.log").read_text()
    assert logged == bool(options)


def test_workers_stop_when_the_supervisor_is_killed(env: dict[str, str], tmp_path: Path) -> None:
    port = _free_port()
    server = _start(env, port, tmp_path / "serve.log")
    try:
        _wait_for(lambda: _listeners(port) == 2 and _answers(port))
        server.kill()
        server.wait()
        # Orphaned workers would go on holding the port, and a restarted server could not bind it.
        _wait_for(lambda: _listeners(port) == 0, timeout=30)
    finally:
        if _listeners(port):
            os.killpg(server.pid, signal.SIGKILL)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_refused_with_one_message(env: dict[str, str], workers: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run(
            [STEPWISE, "serve", "--port", str(port), "--workers", workers], env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "Started parent process" not in result.stderr and "Stepwise at" not in result.stdout


def test_a_worker_metrics_port_in_use_is_refused_with_one_message(env: dict[str, str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run([STEPWISE, "worker", "--once", "--metrics-port", str(port)],
                                env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"cannot listen on 127.0.0.1:{port} for metrics: Address already in use" in result.stderr


def test_a_worker_on_a_database_it_cannot_use_says_so_in_a_line(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    cases = {
        f"sqlite:///{missing}": f"no database at {missing}: run `stepwise db upgrade` to create it",
        "postgresql://nobody@127.0.0.1:1/none": "the database does not answer",
    }
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    cases[f"sqlite:///{empty}"] = "the database has no schema: run `stepwise db upgrade`"
    for url, message in cases.items():
        result = subprocess.run([STEPWISE, "worker", "--once"], env={**os.environ, "DATABASE_URL": url},
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, url
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not missing.exists()


def test_workers_that_cannot_start_stop_the_server(env: dict[str, str]) -> None:
    # A PostgreSQL URL naming a driver that is not installed: only the workers open the database.
    broken = {**env, "DATABASE_URL": "postgresql+nosuchdriver://nobody@127.0.0.1/none"}
    result = subprocess.run(
        [STEPWISE, "serve", "--port", str(_free_port()), "--workers", "2"],
        env=broken,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "failed to start" in result.stderr


def test_no_workers_is_refused(env: dict[str, str]) -> None:
    result = subprocess.run([STEPWISE, "serve", "--workers", "0"], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "0 is not in the range" in result.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "DATABASE_URL: not a database URL: expected sqlite:///"),
        ("mysql://nobody@127.0.0.1/none", "DATABASE_URL: mysql is not supported"),
        # Each connection would have its own empty database.
        ("sqlite://", "DATABASE_URL: an in-memory SQLite database cannot be shared"),
        ("sqlite:///:memory:", "DATABASE_URL: an in-memory SQLite database cannot be shared"),
    ],
)
def test_a_bad_database_url_is_named_without_a_traceback(env: dict[str, str], url: str, message: str) -> None:
    result = subprocess.run([STEPWISE, "db", "upgrade"], env={**env, "DATABASE_URL": url}, capture_output=True, text=True)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_a_database_driver_that_is_missing_is_named_without_a_traceback(env: dict[str, str]) -> None:
    broken = {**env, "DATABASE_URL": "postgresql+nosuchdriver://nobody@127.0.0.1/none"}
    result = subprocess.run([STEPWISE, "projects", "list"], env=broken, capture_output=True, text=True)
    assert result.returncode == 1 and "cannot open DATABASE_URL" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("command", "name", "value", "message"), [
    ("projects list", "STEPWISE_DB_POOL_SIZE", "many", "STEPWISE_DB_POOL_SIZE: must be a whole number"),
    # The round workers' own settings, read before any command runs.
    ("worker --once", "STEPWISE_WORKER_POLL_S", "7", "\n  STEPWISE_WORKER_POLL_S: must divide 60"),
    ("serve", "STEPWISE_LOCAL_WORKER", "maybe", "\n  STEPWISE_LOCAL_WORKER: must be true or false"),
    ("worker --once", "STEPWISE_MODELS_DIR", "", "\n  STEPWISE_MODELS_DIR: must name a folder"),
])
def test_a_bad_setting_is_named_without_a_traceback(env: dict[str, str], command: str, name: str, value: str,
                                                    message: str) -> None:
    result = subprocess.run([STEPWISE, *command.split()], env={**env, name: value}, capture_output=True, text=True)
    assert result.returncode == 1
    assert "Error: bad setting in the environment" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_psycopg2_url_is_spoken_with_psycopg_3() -> None:
    assert normalize_database_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg://u@h/db"


def _seed(url: str, solutions: int) -> int:
    """A project of one-step solutions, queued, and a labeler; the project's id."""
    from app.config import Settings
    from app.db import create_db_engine, create_session_factory, session_scope
    from app.labeling.queue import add_slots
    from app.models import Problem, Role, Solution
    from app.projects.schemas import ProjectCreate
    from app.projects.service import create_project
    from app.users.schemas import UserCreate
    from app.users.service import create_user

    engine = create_db_engine(Settings(database_url=url))
    try:
        with session_scope(create_session_factory(engine)) as session:
            create_user(session, UserCreate(username="lena", role=Role.labeler, password="correct horse"))
            project = create_project(session, ProjectCreate(name="stop"))
            problems = [Problem(project_id=project.id, statement=f"What is {i}+1?", answer=str(i + 1),
                                content_hash=f"p{i}") for i in range(solutions)]
            session.add_all(problems)
            session.flush()
            rows = [Solution(project_id=project.id, problem_id=p.id, steps=["one step"], priority=0.0,
                             content_hash=f"s{p.id}") for p in problems]
            session.add_all(rows)
            session.flush()
            add_slots(session, project, [(row.id, 0.0, None) for row in rows])
            return project.id
    finally:
        engine.dispose()


def _post(port: int, path: str, body: dict, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_sigterm_finishes_submits_in_flight_and_loses_no_acknowledged_label(env: dict[str, str], tmp_path: Path) -> None:
    """Labelers submit as fast as they can while the server is told to stop: every submit it
    acknowledged is stored, once; none it stored twice; none answered with a 5xx."""
    project_id = _seed(env["DATABASE_URL"], 400)
    port = _free_port()
    server = _start(env, port, tmp_path / "serve.log")
    acknowledged: list[str] = []
    failures: list[int] = []  # 5xx statuses, and 0 for a connection lost before the stop
    stop_sent = threading.Event()

    def labeler(index: int) -> None:
        _, body = _post(port, "/api/v1/auth/tokens", {"username": "lena", "password": "correct horse"})
        token = body["token"]
        for n in range(1000):
            try:
                status, task = _post(port, f"/api/v1/projects/{project_id}/tasks/next", {}, token)
                if status != 200 or task.get("task") is None:
                    return
                key = f"client-{index}-{n:04d}"
                status, _ = _post(port, f"/api/v1/assignments/{task['task']['assignment_id']}/submit", {
                    "idempotency_key": key, "ratings": [{"rating": 1}], "finish_reason": "solution",
                    "total_time_ms": 1000}, token)
            except OSError:
                # Refused or reset once the server stops: never acknowledged.
                if not stop_sent.is_set():
                    failures.append(0)
                return
            if status >= 500:
                failures.append(status)
            elif status == 200:
                acknowledged.append(key)

    try:
        _wait_for(lambda: _answers(port))
        threads = [threading.Thread(target=labeler, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        _wait_for(lambda: len(acknowledged) >= 20)
        stop_sent.set()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
        for thread in threads:
            thread.join(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert not failures, failures
    with sqlite3.connect(env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        stored = [key for (key,) in db.execute("SELECT idempotency_key FROM labels")]
    assert len(stored) == len(set(stored)), "a label was stored twice"
    assert set(acknowledged) <= set(stored), "an acknowledged label was lost"
    assert len(stored) - len(acknowledged) <= 8, "more labels stored unacknowledged than were in flight"


def test_the_readme_lists_every_setting_read_from_the_environment() -> None:
    from app.config import Settings
    from app.rounds.config import WorkerSettings

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    names = [field.alias or name.upper() for name, field in Settings.model_fields.items()]
    names += [f"STEPWISE_{name.upper()}" for name in WorkerSettings.model_fields]
    assert [name for name in names if f"| `{name}` |" not in readme] == []


def test_a_started_server_keeps_what_the_app_holds_out_of_the_cycle_collectors_scans() -> None:
    # A large page sets off full collections while it builds its rows; each rescanned the
    # started app's objects (about 0.1 s apiece) until they were frozen.
    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        raise AssertionError("no request is made")

    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=_free_port(), lifespan="off", log_level="warning"))

    async def frozen_once_started() -> int:
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        frozen = gc.get_freeze_count()
        server.should_exit = True
        await serving
        return frozen

    # In a thread of its own: the browser tests' Playwright keeps an event loop running in this one.
    frozen: list[int] = []
    gc.unfreeze()
    try:
        runner = threading.Thread(target=lambda: frozen.append(asyncio.run(frozen_once_started())))
        runner.start()
        runner.join(timeout=60)
        assert frozen and frozen[0] > 100_000
    finally:
        gc.unfreeze()
