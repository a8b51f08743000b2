"""The labeling load benchmark's stage: its database, its data, the server, and a CPU meter."""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg
from sqlalchemy import create_engine, insert, select, text

from app.auth.security import hash_password
from app.config import normalize_database_url
from app.db import create_session_factory, session_scope
from app.labeling.queue import add_slots
from app.migrate import upgrade
from app.models import Problem, Role, Solution, User
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench password 123"
STEP_TEXTS = [
    "Let $x$ be the number of apples, so $3x + 5 = 20$.",
    "Subtracting $5$ from both sides gives $3x = 15$.",
    "Dividing by $3$, we get $x = 5$.",
    r"We can write $\frac{a^2 - b^2}{a - b} = a + b$ whenever $a \neq b$.",
    r"By the Pythagorean theorem, $c = \sqrt{6^2 + 8^2} = 10$.",
    r"The sum of the roots of $x^2 - 7x + 12$ is $7$ by Vieta's formulas.",
    r"So the probability is $\frac{3}{8}$, since $3$ of the $8$ outcomes work.",
    r"Expanding, $(x+2)^2 = x^2 + 4x + 4$.",
    r"Since $\gcd(12, 18) = 6$, the least common multiple is $\frac{12 \cdot 18}{6} = 36$.",
    r"\[\sum_{k=1}^{n} k = \frac{n(n+1)}{2}\]",
]


# --- the database -----------------------------------------------------------------------------


def database_url(args: argparse.Namespace) -> str:
    return f"{args.postgres.rsplit('/', 1)[0]}/{args.database}"


def create_database(args: argparse.Namespace) -> str:
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.database}"')
    url = database_url(args)
    upgrade(normalize_database_url(url))
    return url


def drop_database(args: argparse.Namespace) -> None:
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')


@dataclass
class Seeded:
    project_id: int
    users: dict[str, int]
    steps: int
    slots: int
    seconds: float


def seed(url: str, args: argparse.Namespace, usernames: list[str]) -> Seeded:
    """Problems, solutions (COPY), queue slots (add_slots) and labelers, in one transaction."""
    rng = random.Random(args.seed)
    started = time.perf_counter()
    engine = create_engine(normalize_database_url(url))
    factory = create_session_factory(engine)
    with session_scope(factory) as session:
        project = create_project(session, ProjectCreate(name="bench", overlap=args.overlap))
        problems = session.scalars(
            insert(Problem).returning(Problem.id),
            [
                {
                    "project_id": project.id,
                    "statement": f"Problem {i}: find $x$ if $3x + {i} = {3 * i + i}$.",
                    "answer": str(i),
                    "content_hash": f"bench-p{i}",
                }
                for i in range(max(1, args.solutions // 20))
            ],
        ).all()
        steps = 0
        now = datetime.now(UTC)
        copy_sql = (
            "COPY solutions (project_id, problem_id, steps, steps_source, answer_grade, origin,"
            " priority, content_hash, is_demo, created_at) FROM STDIN"
        )
        cursor = session.connection().connection.driver_connection.cursor()
        with cursor.copy(copy_sql) as copy:
            for i in range(args.solutions):
                body = rng.choices(STEP_TEXTS, k=rng.randint(5, 14))
                body.append(f"# Answer\n\n{i % 97}")
                steps += len(body)
                priority = rng.random() if args.priorities == "scored" else 0.0
                row = (
                    project.id,
                    problems[i % len(problems)],
                    json.dumps(body),
                    "given",
                    "ungraded",
                    "{}",
                    priority,
                    f"bench-s{i}",
                    False,
                    now,
                )
                copy.write_row(row)
        solutions = session.execute(
            select(Solution.id, Solution.priority).where(Solution.project_id == project.id)
        ).all()
        slots = add_slots(session, project, [(s.id, s.priority, None) for s in solutions])
        password_hash = hash_password(PASSWORD)
        session.execute(
            insert(User),
            [
                {"username": name, "password_hash": password_hash, "role": Role.labeler}
                for name in usernames
            ],
        )
        users = {name: user_id for name, user_id in session.execute(select(User.username, User.id))}
        project_id = project.id
    # Vacuumed and with fresh statistics, as autovacuum leaves a database soon after a real
    # import; otherwise autovacuum does it during the first phase and is measured with it (it
    # kept PostgreSQL 0.66 cores busy under a single labeler).
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM (ANALYZE)"))
    engine.dispose()
    return Seeded(project_id, users, steps, slots, time.perf_counter() - started)


# --- the server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(url: str, workers: int, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    stepwise = Path(sys.executable).parent / "stepwise"
    command = [
        str(stepwise),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    # PYTHONPATH: this checkout's code, whatever the virtualenv's install of the package points at.
    env = {**os.environ, "DATABASE_URL": url, "STEPWISE_ENV": "production", "PYTHONPATH": str(ROOT)}
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log_path.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            # Every worker must have started, not only the first: each logs one line.
            if log_path.read_text().count("Application startup complete") >= workers:
                return server, base
        except OSError:
            pass
        time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the server did not start in 90 s:\n{log_path.read_text()[-3000:]}")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class CpuMeter:
    """Cores kept busy over a phase: by the server's processes, by PostgreSQL's backends for the
    bench database, by this client, and by everything else on the machine."""

    def __init__(self, server_pid: int, url: str) -> None:
        self.server = psutil.Process(server_pid)
        self.url = url

    def _read(self) -> tuple[dict[tuple[str, int], float], float, float]:
        with psycopg.connect(self.url, autocommit=True) as connection:
            backends = connection.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        groups = {
            "server": [self.server, *self.server.children(recursive=True)],
            "postgres": [psutil.Process(pid) for (pid,) in backends if psutil.pid_exists(pid)],
            "client": [psutil.Process()],
        }
        used = {}
        for group, processes in groups.items():
            for process in processes:
                try:
                    times = process.cpu_times()
                except psutil.Error:
                    continue
                used[(group, process.pid)] = times.user + times.system
        machine = psutil.cpu_times()
        busy = machine.user + machine.system + machine.nice + machine.irq + machine.softirq
        return used, busy, time.monotonic()

    def start(self) -> None:
        self.started = self._read()

    def stop(self) -> None:
        (before, busy_before, start), (after, busy_after, end) = self.started, self._read()
        spent = {"server": 0.0, "postgres": 0.0, "client": 0.0}
        for (group, pid), seconds in after.items():
            # A process that appeared during the phase (a new connection) counts whole.
            spent[group] += seconds - before.get((group, pid), 0.0)
        wall = end - start
        self.cores_busy = {group: round(seconds / wall, 2) for group, seconds in spent.items()}
        # Whatever else ran (other people's tests, say) competed for the same cores.
        other = (busy_after - busy_before) - sum(spent.values())
        self.cores_busy["other"] = round(max(0.0, other) / wall, 2)
