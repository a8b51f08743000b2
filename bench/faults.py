"""Faults, measured: labelers keep labeling while API workers are killed and PostgreSQL restarts.

Starts a PostgreSQL cluster of its own (initdb in a temporary directory, a free loopback port;
the machine's shared PostgreSQL is never touched), loads --solutions solutions as
bench/labeling_load.py does, serves them with `stepwise serve --workers N` and runs --labelers
closed-loop labelers over loopback for --duration seconds. Each labeler retries as the labeler
page does (labeler_ui/static/js/api.js): on a dropped connection or a 502/503/504 it sends the
same request again, with the same idempotency key, after 1 s, then 2, 4, ... up to 15 s. On top,
--retry-fraction of the acknowledged submits are sent again (a client that lost the answer) and
--twin-fraction are sent twice at once (a double click, two tabs).

The first and last 15% of the run are left calm; in between, --kills times a random API worker
is killed with SIGKILL and --pg-restarts times PostgreSQL is restarted with
`pg_ctl restart -m <--restart-mode>`, both evenly spread. Afterwards it checks, by SQL against
what the clients were acknowledged, that every acknowledged label is stored exactly once, under
its labeler and solution, and that no solution is over its overlap or labeled twice by one
labeler; it counts the 5xx answers outside the restart windows (a restart window runs from the
restart's start until /readyz answers 200, plus --grace seconds), times each recovery and
gives the throughput before, during and after the faults.

    .venv/bin/python bench/faults.py            # the full run: 200 labelers, 10 minutes
    .venv/bin/python bench/faults.py --quick    # a smoke run: 75 s of labeling, 2-3 minutes in all
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import psutil
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_results import run_header, write_results  # noqa: E402
from load_client import Tally, http_session, latency, log_in, make_label, verify  # noqa: E402
from load_setup import Seeded, create_database, seed, start_server, stop_server  # noqa: E402
from throwaway_postgres import ThrowawayPostgres  # noqa: E402

# As labeler_ui/static/js/api.js: what it retries, and its backoff.
RETRY_STATUSES = frozenset({502, 503, 504})
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 15.0
# The share of the run left calm at each end, for the throughput before and after the faults.
CALM_SHARE = 0.15
# After the run's end, how long submits still unanswered keep being retried.
DRAIN_S = 60.0
LOGINS_AT_ONCE = 8
# A worker not replaced, or a server not ready again, this long after a fault is a failure.
RECOVERY_BOUND_S = 60.0
# A server worker holds at most its pool plus overflow (app.db.MAX_OVERFLOW); room for the
# readiness probes, the checks and a psql on top.
CONNECTIONS_PER_WORKER = 30 + 10
SPARE_CONNECTIONS = 20
# 400,000 queue slots at overlap 2: more than 200 labelers can take in 10 minutes at the 364
# labels/s bench/labeling_load.py measured, so that the queue never runs dry.
FULL = {"labelers": 200, "duration": 600.0, "kills": 50, "pg_restarts": 10, "solutions": 200_000}
QUICK = {"labelers": 40, "duration": 75.0, "kills": 8, "pg_restarts": 2, "solutions": 5_000}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK}")
    parser.add_argument("--labelers", type=int, help=f"simulated labelers ({FULL['labelers']})")
    parser.add_argument("--duration", type=float, help=f"seconds of labeling ({FULL['duration']:.0f})")
    parser.add_argument("--kills", type=int, help=f"API workers killed with SIGKILL ({FULL['kills']})")
    parser.add_argument("--pg-restarts", type=int, help=f"PostgreSQL restarts ({FULL['pg_restarts']})")
    parser.add_argument("--solutions", type=int, help=f"solutions in the queue ({FULL['solutions']})")
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--overlap", type=int, default=2, help="labelers per solution")
    parser.add_argument(
        "--restart-mode",
        choices=("fast", "immediate"),
        default="fast",
        help="pg_ctl's shutdown mode for each restart",
    )
    parser.add_argument(
        "--retry-fraction", type=float, default=0.10, help="share of submits sent again after the answer"
    )
    parser.add_argument(
        "--twin-fraction", type=float, default=0.02, help="share of submits sent twice at once"
    )
    parser.add_argument(
        "--grace", type=float, default=1.0, help="seconds a restart window lasts past /readyz's first 200"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "bench" / "results" / "faults.json",
        help="where the JSON results go",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    # What load_setup.seed reads besides.
    args.priorities = "imported"
    args.database = "stepwise_faults"
    return args


# --- the labelers ---------------------------------------------------------------------------------


@dataclass
class Sent:
    """One HTTP request: its kind, when it went and came back (monotonic), and the status (0: no
    answer, the connection dropped or timed out)."""

    kind: str
    start: float
    end: float
    status: int


@dataclass
class Run:
    stop_at: float
    give_up_at: float
    sent: list[Sent] = field(default_factory=list)
    acknowledged_at: list[float] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)


async def post_like_the_page(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], payload: object, run: Run, kind: str
) -> tuple[int, dict] | None:  # type: ignore[type-arg]
    """The labeler page's postWithRetry: the answer, or None once the run is over."""
    data = orjson.dumps(payload) if payload is not None else None
    delay = FIRST_BACKOFF_S
    while True:
        start = time.monotonic()
        try:
            async with http.post(url, headers=headers, data=data) as response:
                status, body = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError):
            status, body = 0, b""
        run.sent.append(Sent(kind, start, time.monotonic(), status))
        if status and status not in RETRY_STATUSES:
            return status, orjson.loads(body) if body.startswith(b"{") else {}
        if time.monotonic() + delay > run.give_up_at:
            return None
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)


async def submit(
    http: aiohttp.ClientSession,
    base: str,
    headers: dict[str, str],
    user_id: int,
    task: dict,  # type: ignore[type-arg]
    run: Run,
    args: argparse.Namespace,
    rng: random.Random,
) -> None:
    payload = make_label(len(task["solution"]["steps"]), rng)
    url = f"{base}/api/v1/assignments/{task['assignment_id']}/submit"
    draw = rng.random()
    twins = 2 if draw < args.twin_fraction else 1
    answers = await asyncio.gather(
        *(post_like_the_page(http, url, headers, payload, run, "submit") for _ in range(twins))
    )
    acknowledged = [answer[1] for answer in answers if answer is not None and answer[0] == 200]
    for answer in answers:
        if answer is None:
            run.tally.unacknowledged += 1
        elif answer[0] != 200:
            # The page drops a label refused with a 4xx: any here is a fault's doing, and a bug.
            run.tally.error(f"submit {answer[0]}: {answer[1].get('detail')}")
    if not acknowledged:
        return
    if len({body["label_id"] for body in acknowledged}) > 1:
        run.tally.error("twin submits acknowledged under different label ids")
    receipt = acknowledged[0]
    key = str(payload["idempotency_key"])
    run.tally.receipts.append((user_id, key, receipt["label_id"], task["solution"]["id"]))
    run.acknowledged_at.append(time.monotonic())
    if args.twin_fraction <= draw < args.twin_fraction + args.retry_fraction:
        again = await post_like_the_page(http, url, headers, payload, run, "retry")
        if again is not None and (again[0] != 200 or again[1]["label_id"] != receipt["label_id"]):
            run.tally.error(f"retry {again[0]} did not give the first receipt back")


async def labeler(
    http: aiohttp.ClientSession,
    base: str,
    seeded: Seeded,
    user_id: int,
    headers: dict[str, str],
    run: Run,
    args: argparse.Namespace,
    rng: random.Random,
) -> None:
    """next → submit until the run's end, as a labeler at the page whose answers are lost now and then."""
    next_url = f"{base}/api/v1/projects/{seeded.project_id}/tasks/next"
    while time.monotonic() < run.stop_at:
        answer = await post_like_the_page(http, next_url, headers, None, run, "next")
        if answer is None:
            return
        status, body = answer
        if status != 200:
            run.tally.error(f"next {status}: {body.get('detail')}")
            await asyncio.sleep(FIRST_BACKOFF_S)
            continue
        if body["task"] is None:
            run.tally.queue_empty = True
            return
        await submit(http, base, headers, user_id, body["task"], run, args, rng)


# --- the faults -----------------------------------------------------------------------------------


def spread(count: int, start: float, length: float) -> list[float]:
    """`count` moments evenly over [start, start + length], none at either end."""
    return [start + (i + 0.5) * length / count for i in range(count)]


def listening_workers(server_pid: int) -> set[int]:
    """The supervisor's workers that serve: a worker listens on its socket only once its app
    has started (app.server), so one still starting has no listening socket yet."""
    workers = set()
    for child in psutil.Process(server_pid).children():
        try:
            if any(c.status == psutil.CONN_LISTEN for c in child.net_connections("tcp")):
                workers.add(child.pid)
        except psutil.Error:
            continue
    return workers


class Replacements:
    """Watches the workers, and notes when each new one starts listening."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.known = listening_workers(server_pid)
        self.started: list[float] = []

    async def watch(self) -> None:
        while True:
            new = listening_workers(self.server_pid) - self.known
            self.known |= new
            self.started.extend([time.monotonic()] * len(new))
            await asyncio.sleep(0.05)

    async def nth(self, n: int, killed_at: float) -> float | None:
        """When the nth replacement (from 1) started listening; None if not in RECOVERY_BOUND_S."""
        deadline = killed_at + RECOVERY_BOUND_S
        while len(self.started) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.started[n - 1] if len(self.started) >= n else None


async def kill_workers(server_pid: int, moments: list[float], rng: random.Random) -> list[dict]:  # type: ignore[type-arg]
    """At each moment, kills a serving worker. Each kill's "replaced" is when its replacement
    started serving, replacements matched to kills in order (a kill can come before the last
    one's replacement has started)."""
    replacements = Replacements(server_pid)
    watcher = asyncio.create_task(replacements.watch())
    kills = []
    for moment in moments:
        await asyncio.sleep(max(0.0, moment - time.monotonic()))
        serving = listening_workers(server_pid)
        while not serving:
            await asyncio.sleep(0.05)
            serving = listening_workers(server_pid)
        victim = rng.choice(sorted(serving))
        os.kill(victim, signal.SIGKILL)
        kills.append({"at": time.monotonic(), "pid": victim, "workers_serving": len(serving)})
    for n, kill in enumerate(kills, start=1):
        kill["replaced"] = await replacements.nth(n, kill["at"])
    watcher.cancel()
    return kills


async def ready(base: str) -> float:
    """When /readyz first answers 200, each probe on a connection of its own (so the kernel hands
    it to any worker)."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=5)) as http:
        while True:
            try:
                async with http.get(f"{base}/readyz") as response:
                    if response.status == 200:
                        return time.monotonic()
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.05)


async def restart_postgres(
    pg: ThrowawayPostgres, base: str, moments: list[float], mode: str
) -> list[dict]:  # type: ignore[type-arg]
    restarts = []
    for moment in moments:
        await asyncio.sleep(max(0.0, moment - time.monotonic()))
        began = time.monotonic()
        await asyncio.to_thread(pg.restart, mode)
        up = time.monotonic()
        try:
            back = await asyncio.wait_for(ready(base), RECOVERY_BOUND_S)
        except TimeoutError:
            back = None
        restarts.append({"at": began, "up": up, "ready": back})
    return restarts


# --- the run --------------------------------------------------------------------------------------


async def log_in_all(
    http: aiohttp.ClientSession, base: str, usernames: list[str], tally: Tally
) -> list[dict[str, str] | None]:
    """Every labeler's headers, a few logins at a time: each one hashes a password (argon2), and
    200 at once queue past the client's timeout on two cores."""
    gate = asyncio.Semaphore(LOGINS_AT_ONCE)

    async def one(name: str) -> dict[str, str] | None:
        async with gate:
            return await log_in(http, base, name, tally)

    return await asyncio.gather(*(one(name) for name in usernames))


async def run_faults(
    base: str, server_pid: int, pg: ThrowawayPostgres, seeded: Seeded, args: argparse.Namespace
) -> tuple[Run, float, list[dict], list[dict]]:  # type: ignore[type-arg]
    """The labelers and the faults together: the run, its start, the kills and the restarts."""
    rng = random.Random(args.seed)
    usernames = list(seeded.users)
    async with http_session(2 * args.labelers) as http:
        login_tally = Tally()
        logins = await log_in_all(http, base, usernames, login_tally)
        if login_tally.errors:
            raise RuntimeError(f"labelers could not log in: {login_tally.errors}")
        t0 = time.monotonic()
        run = Run(stop_at=t0 + args.duration, give_up_at=t0 + args.duration + DRAIN_S)
        calm, stormy = CALM_SHARE * args.duration, (1 - 2 * CALM_SHARE) * args.duration
        kills = asyncio.create_task(
            kill_workers(server_pid, spread(args.kills, t0 + calm, stormy), random.Random(rng.random()))
        )
        restarts = asyncio.create_task(
            restart_postgres(pg, base, spread(args.pg_restarts, t0 + calm, stormy), args.restart_mode)
        )
        await asyncio.gather(
            *(
                labeler(http, base, seeded, seeded.users[name], headers, run, args, random.Random(rng.random()))
                for name, headers in zip(usernames, logins, strict=True)
                if headers is not None
            )
        )
        return run, t0, await kills, await restarts


def relative(moment: float, t0: float) -> float:
    return round(moment - t0, 2)


def kill_row(kill: dict, t0: float) -> dict[str, object]:  # type: ignore[type-arg]
    return {
        "at_s": relative(kill["at"], t0),
        "pid": kill["pid"],
        "workers_serving": kill["workers_serving"],
        "replacement_started_s": round(kill["replaced"] - kill["at"], 2) if kill["replaced"] else None,
    }


def restart_row(restart: dict, window: tuple[float, float], run: Run, t0: float) -> dict[str, object]:  # type: ignore[type-arg]
    """How long pg_ctl took, and from its start until /readyz said 200 (None: not in
    RECOVERY_BOUND_S) and until the first submit sent after the new server was up was
    acknowledged."""
    first_submit = min(
        (s.end for s in run.sent if s.kind == "submit" and s.status == 200 and s.start >= restart["up"]),
        default=None,
    )
    return {
        "at_s": relative(restart["at"], t0),
        "pg_ctl_s": round(restart["up"] - restart["at"], 2),
        "readyz_ok_s": round(restart["ready"] - restart["at"], 2) if restart["ready"] else None,
        "first_submit_s": round(first_submit - restart["at"], 2) if first_submit else None,
        "window_s": [relative(window[0], t0), relative(window[1], t0)],
    }


def answers_report(run: Run, windows: list[tuple[float, float]]) -> dict[str, object]:
    """Answers by kind and status; 5xx and dropped connections inside and outside restart windows."""

    def inside(sent: Sent) -> bool:
        return any(sent.start <= end and sent.end >= start for start, end in windows)

    by_status = Counter(f"{s.kind} {s.status or 'no answer'}" for s in run.sent)
    server_errors = [s for s in run.sent if s.status >= 500]
    dropped = [s for s in run.sent if s.status == 0]
    outside = Counter(f"{s.kind} {s.status}" for s in server_errors if not inside(s))
    return {
        "requests": len(run.sent),
        "by_kind_and_status": dict(sorted(by_status.items())),
        "5xx_in_restart_windows": sum(1 for s in server_errors if inside(s)),
        "5xx_outside_restart_windows": sum(outside.values()),
        "5xx_outside_by_kind": dict(outside),
        "no_answer_in_restart_windows": sum(1 for s in dropped if inside(s)),
        "no_answer_outside_restart_windows": sum(1 for s in dropped if not inside(s)),
    }


def throughput_report(run: Run, t0: float, first_fault: float, last_fault: float) -> dict[str, object]:
    """Acknowledged labels per second, and submit latency, before, during and after the faults."""
    # A replacement still starting at the end leaves no "after".
    last_fault = min(last_fault, run.stop_at)
    phases = {"before": (t0, first_fault), "during": (first_fault, last_fault), "after": (last_fault, run.stop_at)}
    report = {}
    for name, (start, end) in phases.items():
        labels = sum(1 for at in run.acknowledged_at if start <= at < end)
        submits = [(s.end - s.start) * 1000 for s in run.sent if s.kind == "submit" and start <= s.end < end]
        report[name] = {
            "from_s": relative(start, t0),
            "to_s": relative(end, t0),
            "labels_per_s": round(labels / (end - start), 1) if end > start else None,
            "submit": latency(submits),
        }
    return report


def server_log_report(log: Path) -> dict[str, object]:
    """Workers the supervisor replaced, and the errors the server logged, each told once."""
    text = log.read_text(errors="replace")
    errors = Counter(
        line.split("] ", 1)[-1][:200] for line in text.splitlines() if "ERROR" in line or "Traceback" in line
    )
    return {"workers_replaced": text.count("] died"), "error_lines": dict(errors.most_common(10))}


def machine(pg: ThrowawayPostgres) -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "postgresql": pg.version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "note": "the labelers, the server's workers and PostgreSQL share these cores",
    }


def summary(results: dict) -> str:  # type: ignore[type-arg]
    check, answers = results["integrity"], results["answers"]
    lines = [
        f"{results['config']['labelers']} labelers, {results['config']['duration']:.0f} s, "
        f"{len(results['kills'])} workers killed ({results['server']['workers_replaced']} replaced), "
        f"{len(results['restarts'])} PostgreSQL restarts (-m {results['config']['restart_mode']})",
        f"integrity: {'ok' if check['ok'] else 'FAILED'} ({check['acknowledged']} acknowledged, "
        f"{check['stored']} stored, {check['missing']} lost, {check['stored_more_than_once']} duplicated, "
        f"{check['attributed_to_another_labeler']} to another labeler, "
        f"{check['solutions_over_overlap']} over overlap, "
        f"{check['solutions_labeled_twice_by_one_labeler']} labeled twice by one labeler)",
        f"5xx outside restart windows: {answers['5xx_outside_restart_windows']} "
        f"(inside: {answers['5xx_in_restart_windows']})",
    ]
    for restart in results["restarts"]:
        lines.append(
            f"restart at {restart['at_s']} s: pg_ctl {restart['pg_ctl_s']} s, "
            f"readyz {restart['readyz_ok_s']} s, first submit {restart['first_submit_s']} s"
        )
    for name, phase in results["throughput"].items():
        if phase["labels_per_s"] is None:
            lines.append(f"{name:>6}: none, the faults lasted until the end")
            continue
        lines.append(
            f"{name:>6}: {phase['labels_per_s']} labels/s, submit p50 {phase['submit'].get('p50_ms')} "
            f"p99 {phase['submit'].get('p99_ms')} ms"
        )
    lines.append(f"client errors: {results['client_errors'] or 'none'}")
    if results["queue_ran_empty"]:
        lines.append("the queue ran empty: raise --solutions")
    return "\n".join(lines)


def passed(results: dict) -> bool:  # type: ignore[type-arg]
    return (
        results["integrity"]["ok"]
        and results["answers"]["5xx_outside_restart_windows"] == 0
        and results["server"]["workers_replaced"] == len(results["kills"])
        and all(kill["replacement_started_s"] is not None for kill in results["kills"])
        and all(restart["readyz_ok_s"] is not None for restart in results["restarts"])
        and not results["client_errors"]
    )


def measure(pg: ThrowawayPostgres, args: argparse.Namespace, logs: Path) -> dict[str, object]:
    args.postgres = pg.url
    url = create_database(args)
    seeded = seed(url, args, [f"labeler-{i}" for i in range(args.labelers)])
    print(f"seeded {args.solutions} solutions in {seeded.seconds:.1f} s", flush=True)
    log = logs / "server.log"
    server, base = start_server(url, args.workers, log)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            run, t0, kills, restarts = runner.run(run_faults(base, server.pid, pg, seeded, args))
    finally:
        stop_server(server)
    windows = [(r["at"], (r["ready"] or r["at"] + RECOVERY_BOUND_S) + args.grace) for r in restarts]
    fault_moments = [k["at"] for k in kills] + [r["at"] for r in restarts]
    first_fault = min(fault_moments, default=run.stop_at)
    # The faults are over once the last killed worker is replaced and the last restart is over.
    last_fault = max([k["replaced"] or k["at"] for k in kills] + [end for _, end in windows], default=run.stop_at)
    return {
        "kills": [kill_row(k, t0) for k in kills],
        "restarts": [restart_row(r, window, run, t0) for r, window in zip(restarts, windows, strict=True)],
        "throughput": throughput_report(run, t0, first_fault, last_fault),
        "answers": answers_report(run, windows),
        "integrity": verify(url, seeded.project_id, args.overlap, [run.tally]),
        "server": server_log_report(log),
        "client_errors": run.tally.errors,
        "queue_ran_empty": run.tally.queue_empty,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    results: dict[str, object] = {
        **run_header("faults"),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    max_connections = args.workers * CONNECTIONS_PER_WORKER + SPARE_CONNECTIONS
    with ThrowawayPostgres(max_connections) as pg, tempfile.TemporaryDirectory() as logs:
        results["machine"] = machine(pg)
        results.update(measure(pg, args, Path(logs)))
        results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]  # type: ignore[index]
    results["passed"] = passed(results)
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    write_results(args.output, results)
    print(summary(results))
    print(f"results in {args.output}")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
