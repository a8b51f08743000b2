"""Labeling under load: simulated labelers against the real server on PostgreSQL.

Makes its own database (dropped at the end), loads --solutions solutions with COPY and the
queue's own `add_slots`, starts `stepwise serve` with --workers processes on 127.0.0.1 and runs
closed-loop labelers over loopback (log in, then next → submit until the phase's time is up) at
each --concurrency. Figures stand beside two baselines measured in the same run: `floor`, the
same server and client answering a request that needs no database (an unauthenticated call,
401) at the same concurrency, and `select1`, a bare `SELECT 1` round trip. Afterwards it checks
that every acknowledged label is stored exactly once, then times import and export of a
generated PRM800K file of --io-steps steps with `stepwise import` and `stepwise export`, each
run as a process of its own, and records their peak RSS.

Client, server and PostgreSQL share this machine's cores: the figures are for all three
together, and the CPU each of them used is part of the results.

    .venv/bin/python bench/labeling_load.py                  # the full run (about 15 minutes)
    .venv/bin/python bench/labeling_load.py --solutions 2000 --seconds 5 --io-steps 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import psutil
import psycopg
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_results import run_header, write_results  # noqa: E402
from load_client import Tally, floor_phase, latency, load_phase, verify  # noqa: E402
from load_io import import_export  # noqa: E402
from load_setup import (  # noqa: E402
    CpuMeter,
    Seeded,
    create_database,
    drop_database,
    seed,
    start_server,
    stop_server,
)

LABEL_STUDIO_1_23 = {
    "source": "published Label Studio 1.23 figures on this machine kind (gunicorn, 4 workers, "
    "PostgreSQL); external, not measured by this script",
    "next_task_at_64": {"requests_per_s": 33, "p99_ms": 4100},
    "submit_at_16": {"labels_per_s": 7.9, "p99_ms": 1200},
    "next_task_at_1": {"p99_ms": "100-160"},
    "import": {"tasks_per_s": 2100, "steps_per_s": 21000},
    "export": {"tasks": 10000, "seconds": 15, "memory_mb": 650},
}
TARGETS = {
    "next_at_64_requests_per_s": (">=", 330),
    "next_at_64_p99_ms": ("<=", 400),
    "next_at_1_p99_ms": ("<=", 15),
    "submit_at_16_labels_per_s": (">=", 80),
    "submit_at_16_p99_ms": ("<=", 120),
    "import_steps_per_s": (">=", 100_000),
    "export_steps_per_s": (">=", 200_000),
    "export_peak_rss_mb": ("<=", 200),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "STEPWISE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="URL of a database on the server to make the bench database on",
    )
    parser.add_argument(
        "--database", default="stepwise_bench", help="name of the database to create and drop"
    )
    parser.add_argument("--solutions", type=int, default=100_000, help="solutions in the queue")
    parser.add_argument("--overlap", type=int, default=2, help="labelers per solution")
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument(
        "--concurrency", default="1,16,64", help="comma-separated labeler counts, one phase each"
    )
    parser.add_argument("--seconds", type=float, default=30, help="length of each load phase")
    parser.add_argument(
        "--floor-seconds", type=float, default=5, help="length of each floor-baseline phase"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, default=5, help="unmeasured load before the phases"
    )
    parser.add_argument(
        "--max-iterations", type=int, default=100_000, help="next+submit rounds per labeler at most"
    )
    parser.add_argument(
        "--retry-fraction",
        type=float,
        default=0.02,
        help="share of submits sent twice with the same key",
    )
    parser.add_argument(
        "--priorities",
        choices=("imported", "scored"),
        default="imported",
        help="queue priorities as an import leaves them (all 0) "
        "or as a scoring round sets them (all different)",
    )
    parser.add_argument(
        "--io-steps",
        type=int,
        default=1_000_000,
        help="steps in the generated PRM800K file (0 skips import/export)",
    )
    parser.add_argument(
        "--export-formats",
        default="prm800k,trl,parquet",
        help="comma-separated export formats to time",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "bench" / "results" / "labeling_load.json",
        help="where the JSON results go",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    return args


def select1_baseline(url: str, rounds: int = 2000) -> dict[str, float]:
    with psycopg.connect(url) as connection:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            connection.execute("SELECT 1").fetchone()
            samples.append((time.perf_counter() - start) * 1000)
    return latency(samples)


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds else 0.0


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def phase_report(
    labelers: int,
    tally: Tally,
    seconds: float,
    cpu: CpuMeter,
    floor: Tally,
    floor_seconds: float,
    floor_cpu: CpuMeter,
) -> dict[str, object]:
    next_, submit = latency(tally.samples["next"]), latency(tally.samples["submit"])
    floor_latency = latency(floor.samples["floor"])
    requests = sum(len(tally.samples[kind]) for kind in ("next", "submit", "retry"))
    floor_rps = _rate(floor_latency["count"], floor_seconds)  # type: ignore[arg-type]
    return {
        "labelers": labelers,
        "seconds": round(seconds, 2),
        "next": {**next_, "requests_per_s": _rate(next_["count"], seconds)},  # type: ignore[arg-type]
        "submit": {**submit, "labels_per_s": _rate(len(tally.receipts), seconds)},
        "retried_submit": latency(tally.samples["retry"]),
        "login": latency(tally.samples["login"]),
        "requests_per_s": _rate(requests, seconds),
        "errors": tally.errors,
        "queue_ran_empty": tally.queue_empty,
        "cores_busy": cpu.cores_busy,
        "floor": {
            **floor_latency,
            "requests_per_s": floor_rps,
            "errors": floor.errors,
            "cores_busy": floor_cpu.cores_busy,
        },
        "vs_floor": {
            "requests_per_s": _ratio(_rate(requests, seconds), floor_rps),
            "next_p50": _ratio(next_.get("p50_ms"), floor_latency.get("p50_ms")),
            "next_p99": _ratio(next_.get("p99_ms"), floor_latency.get("p99_ms")),
            "submit_p50": _ratio(submit.get("p50_ms"), floor_latency.get("p50_ms")),
            "submit_p99": _ratio(submit.get("p99_ms"), floor_latency.get("p99_ms")),
        },
    }


def check_targets(results: dict) -> dict[str, dict[str, object]]:  # type: ignore[type-arg]
    load, io = results["load"], results.get("import_export") or {}
    figures = {
        "next_at_64_requests_per_s": load.get("64", {}).get("next", {}).get("requests_per_s"),
        "next_at_64_p99_ms": load.get("64", {}).get("next", {}).get("p99_ms"),
        "next_at_1_p99_ms": load.get("1", {}).get("next", {}).get("p99_ms"),
        "submit_at_16_labels_per_s": load.get("16", {}).get("submit", {}).get("labels_per_s"),
        "submit_at_16_p99_ms": load.get("16", {}).get("submit", {}).get("p99_ms"),
        "import_steps_per_s": io.get("import", {}).get("steps_per_s"),
        "export_steps_per_s": io.get("export", {}).get("steps_per_s"),
        "export_peak_rss_mb": io.get("export", {}).get("peak_rss_mb"),
    }
    checked = {}
    for name, (op, bound) in TARGETS.items():
        value = figures[name]
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        checked[name] = {"value": value, "target": f"{op} {bound}", "met": met}
    return checked


def summary(results: dict) -> str:  # type: ignore[type-arg]
    select1 = results["baseline"]["select1"]
    lines = [f"select 1: p50 {select1['p50_ms']} ms, p99 {select1['p99_ms']} ms"]
    for labelers, phase in results["load"].items():
        n, s, f = phase["next"], phase["submit"], phase["floor"]
        lines.append(
            f"{labelers:>3} labelers: "
            f"next {n['requests_per_s']}/s p50 {n.get('p50_ms')} p99 {n.get('p99_ms')} ms | "
            f"submit {s['labels_per_s']} labels/s p50 {s.get('p50_ms')} p99 {s.get('p99_ms')} ms | "
            f"floor {f['requests_per_s']}/s p99 {f.get('p99_ms')} ms | "
            f"cores {phase['cores_busy']} | errors {phase['errors'] or 'none'}"
        )
    lines.append(f"server workers replaced by the supervisor: {results['worker_restarts']}")
    check = results["integrity"]
    verdict = "ok" if check["ok"] else "FAILED"
    lines.append(f"integrity: {verdict} ({check['acknowledged']} acknowledged, {check['stored']} stored)")
    for kind, io in (results.get("import_export") or {}).items():
        if isinstance(io, dict) and "steps_per_s" in io:
            marginal = io.get("marginal_steps_per_s")
            lines.append(
                f"{kind}: {io['steps_per_s']} steps/s ({marginal} beyond the small file's cost), "
                f"{io['seconds']} s, peak RSS {io['peak_rss_mb']} MB"
            )
    for name, target in results["targets"].items():
        met = {True: "met", False: "MISSED", None: "not measured"}[target["met"]]  # type: ignore[index]
        lines.append(f"target {name} {target['target']}: {target['value']} {met}")
    return "\n".join(lines)


# --- the run ------------------------------------------------------------------------------------


def run_load(
    url: str, seeded: Seeded, args: argparse.Namespace, logs: Path
) -> tuple[dict[str, object], list[Tally], int]:
    """The phases, their tallies, and how many workers the server's supervisor replaced."""
    log = logs / "server.log"
    server, base = start_server(url, args.workers, log)
    phases: dict[str, object] = {}
    tallies = []
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            meter = CpuMeter(server.pid, url)
            # Unmeasured: fills every worker's connection pool and warms PostgreSQL's cache.
            warm = [f"warm-{i}" for i in range(max(args.concurrency))]
            tally, _ = runner.run(load_phase(base, seeded, warm, args, args.warmup_seconds, meter))
            tallies.append(tally)
            for labelers in args.concurrency:
                floor_meter, load_meter = CpuMeter(server.pid, url), CpuMeter(server.pid, url)
                floor, floor_seconds = runner.run(floor_phase(base, labelers, args, floor_meter))
                names = [f"c{labelers}-{i}" for i in range(labelers)]
                tally, seconds = runner.run(
                    load_phase(base, seeded, names, args, args.seconds, load_meter)
                )
                tallies.append(tally)
                phases[str(labelers)] = phase_report(
                    labelers, tally, seconds, load_meter, floor, floor_seconds, floor_meter
                )
                print(f"{labelers} labelers done", flush=True)
    finally:
        stop_server(server)
    return phases, tallies, log.read_text().count("] died")


def machine() -> dict[str, object]:
    with psycopg.connect(
        os.environ.get("STEPWISE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
    ) as c:
        version = c.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "postgresql": version,
        "note": "the load generator, the server's workers and PostgreSQL share these cores",
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    labelers = [f"warm-{i}" for i in range(max(args.concurrency))]
    labelers += [f"c{c}-{i}" for c in args.concurrency for i in range(c)]
    started = time.perf_counter()
    results: dict[str, object] = {
        **run_header("labeling_load"),
        "machine": machine(),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    url = create_database(args)
    try:
        seeded = seed(url, args, labelers)
        results["seed"] = {
            "solutions": args.solutions,
            "steps": seeded.steps,
            "queue_slots": seeded.slots,
            "seconds": round(seeded.seconds, 1),
        }
        print(
            f"seeded {args.solutions} solutions, {seeded.slots} slots in {seeded.seconds:.1f} s",
            flush=True,
        )
        results["baseline"] = {"select1": select1_baseline(url)}
        with tempfile.TemporaryDirectory() as logs:
            phases, tallies, restarts = run_load(url, seeded, args, Path(logs))
        results["load"] = phases
        results["worker_restarts"] = restarts
        results["integrity"] = verify(url, seeded.project_id, args.overlap, tallies)
        if args.io_steps:
            results["import_export"] = import_export(url, args)
    finally:
        drop_database(args)
    results["targets"] = check_targets(results)
    results["label_studio_1_23"] = LABEL_STUDIO_1_23
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    write_results(args.output, results)
    print(summary(results))
    print(f"results in {args.output}")
    return 0 if results["integrity"]["ok"] else 1  # type: ignore[index]


if __name__ == "__main__":
    sys.exit(main())
