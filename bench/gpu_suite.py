"""The GPU suite in one command: the checks issue 20 asks of a machine with a GPU.

Three parts, each a benchmark of its own run with its GPU settings, each writing its JSON under
bench/results/ (gpu_*.json), and a summary of all three against their goals in
bench/results/gpu_suite.json, printed at the end:

- `learning`: bench/prm_learning.py, the 100M-parameter PRM against its position-only baseline
  on the synthetic task (goal: step AUROC >= 0.95);
- `throughput`: bench/prm_throughput.py with a ~0.5B backbone built from a config (goals:
  scoring >= 50% and training >= 40% of bf16 peak FLOPs, scoring >= 20x the naive baseline);
- `active_learning`: the paper-protocol experiment (bench/simulate_active_learning.py) on the
  100M backbone, active against uniform.

    make gpu-suite                                   # all three, sized for one 10-minute device call
    .venv/bin/python bench/gpu_suite.py --only throughput   # one part
    .venv/bin/python bench/gpu_suite.py --smoke --results-dir /tmp/suite   # tiny sizes on CPU: checks the wiring

Running parts one at a time keeps the others' figures: the summary is merged with the one
already in the results directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_results import write_results

BENCH = Path(__file__).parent

# Per part: the script, the GPU settings, tiny CPU settings for --smoke, and the seconds after
# which the GPU run is stopped (the H200 runs of 2026-11-26 timed each part; docs/prm.md).
PARTS: dict[str, dict[str, Any]] = {
    "learning": {
        "script": "prm_learning.py",
        # 3e-4: the CPU default 1e-3 is a tiny model's rate. Step counts, not seconds: with 100 s
        # a model, beside the experiment the content PRM got about 300 pretraining steps and 216
        # on labels and stayed at step AUROC 0.60, alone 600 and 235 and reached 0.98.
        # Sharing the GPU now costs time (alone a model should take about 125 s; shared, about
        # twice that until the experiment ends), not learning.
        "gpu": ["--base", "100m", "--device", "cuda", "--pretrain-steps", "600", "--train-steps", "300",
                "--learning-rate", "3e-4"],
        "smoke": ["--device", "cpu", "--pretrain-steps", "4", "--train-steps", "8", "--train-problems", "60",
                  "--eval-problems", "12", "--threads", "1"],
        # Its checkpoints (two 100M models) are scratch: kept out of the results directory.
        "workdir": True,
        # 339 s beside the experiment in the third lease; up to what the deadline leaves after the
        # throughput part (about 190 s), so that the position-only model finishes too.
        "limit_s": 480,
    },
    "throughput": {
        "script": "prm_throughput.py",
        # 30 training steps a setting; 16,384 solutions scored, a stream of about 3.8M tokens. A
        # short stream measures its start more than the scorer: 2,048 solutions took 1.3 s, the
        # first chunk's tokenising (the GPU waits for it) and each read-back weighing; at 8,192 the
        # chunk ramp (256 doubling to 4,096: small chunks, 10% padding against 4.6%) still held
        # 3,840 of them, against 23% now and nothing in a pool of millions. The variants
        # (bench/score_variants.py) measure the ramp apart.
        # Four scoring and four training settings, half of them after a compile: 146 s in all on
        # the H200 with 8,192 solutions, 33 s of it the four scoring streams; about 40 s more now
        # (32,768 would take about 245 s, past this limit and the learning part's share).
        "gpu": ["--base", "500m", "--device", "cuda", "--solutions", "16384", "--train-steps", "30", "--profile"],
        "smoke": ["--device", "cpu", "--solutions", "16", "--naive-solutions", "8", "--train-steps", "3",
                  "--threads", "1", "--profile"],
        # Its JSON is rewritten after every setting: stopped, it keeps what it measured.
        "limit_s": 240,
    },
    "active_learning": {
        "script": "simulate_active_learning.py",
        "gpu": ["--protocol", "paper", "--device", "cuda", "--base", "100m", "--arms", "active,uniform",
                "--pretrain-steps", "300", "--train-steps", "300", "--learning-rate", "3e-4",
                # Sized to share one 10-minute device call with the learning part: rungs 1, 2 and
                # 4 of three seeds took 282 s there (H200, second lease).
                "--ladder", "1,2,4"],
        "smoke": ["--protocol", "paper", "--quick", "--device", "cpu", "--arms", "active,uniform"],
        "limit_s": 420,
    },
}
# Throughput runs alone, since it measures speed. The two learning parts run at once, each in a
# process of its own: a 100M model at batch 16 leaves most of a Hopper GPU idle, and together
# they fit a 10-minute device call. The learning part trains fixed step counts, so sharing costs
# it time, not learning; its JSON records the seconds each model took.
SHARE_THE_GPU = ("learning", "active_learning")
# Every part stops by then: a device call is cut at 600 s, and what it wrote must come back.
DEADLINE_S = 570.0
GOALS = {
    "learning": [("content_step_auroc", 0.95)],
    "throughput": [("score_mfu", 0.50), ("train_mfu", 0.40), ("score_speedup", 20.0)],
    "active_learning": [("data_efficiency.ratio", 2.6)],
}


def _value(results: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        results = results.get(key) if isinstance(results, dict) else None
    return results


def _run_within(command: list[str], limit: float | None) -> int | str:
    """The command's exit status, or "timeout" once it has run `limit` seconds. It runs in a
    session of its own so that a stop reaches its children too (the experiment's seed
    processes), which would otherwise train on and load the GPU under the next part."""
    process = subprocess.Popen(command, start_new_session=True)
    try:
        return process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        # The group outlives its leader while children run; once all are gone there is no group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return "timeout"


def run_part(name: str, results_dir: Path, smoke: bool, limit: float | None) -> dict[str, Any]:
    part = PARTS[name]
    output = results_dir / f"gpu_{name}.json"
    command = [sys.executable, str(BENCH / part["script"]), *part["smoke" if smoke else "gpu"], "--output", str(output)]
    started, began = time.monotonic(), time.time()
    with tempfile.TemporaryDirectory(prefix=f"gpu-suite-{name}-") as scratch:
        scratched = command + (["--workdir", scratch] if part.get("workdir") else [])
        returncode = _run_within(scratched, limit)
    seconds = round(time.monotonic() - started, 1)
    # A part stopped at its limit may have written what it finished (throughput after every
    # setting, the experiment its finished rungs): its goals are read from that, marked partial.
    fresh = output.exists() and output.stat().st_mtime >= began  # not an earlier run's
    try:
        results = json.loads(output.read_text()) if fresh and returncode in (0, "timeout") else None
    except ValueError:  # cut off mid-write by the kill after the SIGTERM
        results = None
    if results is None:
        # Exit status 0 without a file of this run's is a failure too.
        return {"command": command[1:], "seconds": seconds, "goals": [],
                "returncode": "no results" if returncode == 0 else returncode}
    goals = []
    for key, goal in GOALS[name]:
        value = _value(results, key)
        goals.append({"metric": key, "value": value, "goal": goal,
                      "met": None if value is None else value >= goal})
    return {"command": command[1:], "seconds": seconds, "returncode": returncode, "results": output.name,
            "device": results.get("device") or _value(results, "environment.device"), "goals": goals}


def summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for name, part in summary["parts"].items():
        shown = ", ".join(
            f"{g['metric']} {'n/a' if g['value'] is None else format(g['value'], '.3g')} "
            f"(goal {g['goal']:g}: {'met' if g['met'] else 'not met' if g['met'] is False else 'not measured'})"
            for g in part["goals"]
        )
        if part["returncode"] == "timeout":
            kept = f"; what it finished, on {part.get('device')}: {shown}" if part.get("results") else ""
            lines.append(f"{name}: STOPPED at its time limit after {part['seconds']:.0f} s{kept}")
        elif part["returncode"] == "no results":
            lines.append(f"{name}: FAILED, exit 0 but no results written, after {part['seconds']:.0f} s")
        elif part["returncode"] != 0:
            lines.append(f"{name}: FAILED (exit {part['returncode']}) after {part['seconds']:.0f} s")
        else:
            lines.append(f"{name} on {part['device']}, {part['seconds']:.0f} s: {shown}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts to run, from {','.join(PARTS)}")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: checks the wiring, measures nothing")
    parser.add_argument("--results-dir", type=Path, default=BENCH / "results")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="stop each part after this many seconds (default: each part's own limit; none with --smoke)")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help=f"stop every part this many seconds after the suite starts (default {DEADLINE_S:g}, "
                             "inside one 10-minute device call; none with --smoke)")
    args = parser.parse_args()
    names = list(dict.fromkeys(n.strip() for n in args.only.split(",") if n.strip()))
    unknown = sorted(set(names) - set(PARTS))
    if unknown or not names:
        parser.error(f"--only: choose from {', '.join(PARTS)}")
    for flag, value in (("--timeout-s", args.timeout_s), ("--deadline-s", args.deadline_s)):
        if value is not None and value <= 0:
            parser.error(f"{flag} must be positive")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    summary_file = args.results_dir / "gpu_suite.json"
    # Both flags are positive when given; --smoke runs have no limits of their own.
    deadline = args.deadline_s or (None if args.smoke else DEADLINE_S)
    suite_started = time.monotonic()

    def limit(name: str) -> float | None:
        own = args.timeout_s or (None if args.smoke else PARTS[name]["limit_s"])
        left = None if deadline is None else max(1.0, deadline - (time.monotonic() - suite_started))
        return min((t for t in (own, left) if t is not None), default=None)

    def run(name: str) -> None:
        part = {**run_part(name, args.results_dir, args.smoke, limit(name)),
                "date": time.strftime("%Y-%m-%d"), "smoke": args.smoke}
        with lock:
            # Read again just before writing, and replace the file whole: an earlier invocation's
            # parts stay, and a reader never sees half a file.
            summary = json.loads(summary_file.read_text()) if summary_file.exists() else {"parts": {}}
            summary["parts"][name] = part
            write_results(summary_file, summary)

    lock = threading.Lock()
    for name in [n for n in names if n not in SHARE_THE_GPU]:
        run(name)
    with ThreadPoolExecutor(len(SHARE_THE_GPU)) as pool:
        list(pool.map(run, [n for n in names if n in SHARE_THE_GPU]))
    summary = json.loads(summary_file.read_text())
    summary["parts"] = {n: summary["parts"][n] for n in [*PARTS, *summary["parts"]] if n in summary["parts"]}
    print("\n".join(summary_lines(summary)))
    sys.exit(1 if any(summary["parts"][n]["returncode"] for n in names) else 0)


if __name__ == "__main__":
    main()
