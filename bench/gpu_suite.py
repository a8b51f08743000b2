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

    make gpu-suite                                   # all three, about 25 minutes on an H100
    .venv/bin/python bench/gpu_suite.py --only throughput   # one part (a device call is 10 minutes at most)
    .venv/bin/python bench/gpu_suite.py --smoke --results-dir /tmp/suite   # tiny sizes on CPU: checks the wiring

Running parts one at a time keeps the others' figures: the summary is merged with the one
already in the results directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).parent

# Per part: the script, the GPU settings, and tiny CPU settings for --smoke.
PARTS: dict[str, dict[str, Any]] = {
    "learning": {
        "script": "prm_learning.py",
        "gpu": ["--base", "100m", "--device", "cuda", "--budget-s", "240"],
        "smoke": ["--device", "cpu", "--budget-s", "3", "--pretrain-share", "0", "--train-problems", "60",
                  "--eval-problems", "12", "--threads", "1"],
        # Its checkpoints (two 100M models) are scratch: kept out of the results directory.
        "workdir": True,
    },
    "throughput": {
        "script": "prm_throughput.py",
        "gpu": ["--base", "500m", "--device", "cuda", "--solutions", "4096", "--train-steps", "60"],
        "smoke": ["--device", "cpu", "--solutions", "16", "--naive-solutions", "8", "--train-steps", "3",
                  "--threads", "1"],
    },
    "active_learning": {
        "script": "simulate_active_learning.py",
        "gpu": ["--protocol", "paper", "--device", "cuda", "--base", "100m", "--arms", "active,uniform",
                "--pretrain-steps", "1000", "--train-steps", "400", "--learning-rate", "3e-4",
                # Wider than the CPU default: where a 100M PRM starts to rank is not measured yet.
                "--ladder", "1,2,4,8,16"],
        "smoke": ["--protocol", "paper", "--quick", "--device", "cpu", "--arms", "active,uniform"],
    },
}
GOALS = {
    "learning": [("content_step_auroc", 0.95)],
    "throughput": [("score_mfu", 0.50), ("train_mfu", 0.40), ("score_speedup", 20.0)],
    "active_learning": [("data_efficiency.ratio", 2.6)],
}


def _value(results: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        results = results.get(key) if isinstance(results, dict) else None
    return results


def run_part(name: str, results_dir: Path, smoke: bool) -> dict[str, Any]:
    part = PARTS[name]
    output = results_dir / f"gpu_{name}.json"
    command = [sys.executable, str(BENCH / part["script"]), *part["smoke" if smoke else "gpu"], "--output", str(output)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"gpu-suite-{name}-") as scratch:
        scratched = command + (["--workdir", scratch] if part.get("workdir") else [])
        done = subprocess.run(scratched, check=False)
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0 or not output.exists():
        return {"command": command[1:], "seconds": seconds, "returncode": done.returncode, "goals": []}
    results = json.loads(output.read_text())
    goals = []
    for key, goal in GOALS[name]:
        value = _value(results, key)
        goals.append({"metric": key, "value": value, "goal": goal,
                      "met": None if value is None else value >= goal})
    return {"command": command[1:], "seconds": seconds, "returncode": 0, "results": output.name,
            "device": results.get("device") or _value(results, "environment.device"), "goals": goals}


def summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for name, part in summary["parts"].items():
        if part["returncode"] != 0:
            lines.append(f"{name}: FAILED (exit {part['returncode']}) after {part['seconds']:.0f} s")
            continue
        shown = ", ".join(
            f"{g['metric']} {'n/a' if g['value'] is None else format(g['value'], '.3g')} "
            f"(goal {g['goal']:g}: {'met' if g['met'] else 'not met' if g['met'] is False else 'not measured'})"
            for g in part["goals"]
        )
        lines.append(f"{name} on {part['device']}, {part['seconds']:.0f} s: {shown}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts to run, from {','.join(PARTS)}")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: checks the wiring, measures nothing")
    parser.add_argument("--results-dir", type=Path, default=BENCH / "results")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(PARTS))
    if unknown or not names:
        parser.error(f"--only: choose from {', '.join(PARTS)}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    summary_file = args.results_dir / "gpu_suite.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {"parts": {}}
    for name in names:
        summary["parts"][name] = {**run_part(name, args.results_dir, args.smoke),
                                  "date": time.strftime("%Y-%m-%d"), "smoke": args.smoke}
        summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    print("\n".join(summary_lines(summary)))
    sys.exit(1 if any(summary["parts"][n]["returncode"] for n in names) else 0)


if __name__ == "__main__":
    main()
