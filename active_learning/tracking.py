"""Where training reports to: accelerate's experiment trackers, and `training_log.json`, the
loss and evaluation history that stays beside the checkpoint whatever tracker is used.

No torch or accelerate at import time: the research pages read training logs through this
module, and a web server should not load torch to draw a line.
"""

import json
import math
from pathlib import Path

from active_learning.files import replace_whole

TRAINING_LOG_FILE = "training_log.json"
# accelerate's tracker name -> the package it needs.
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def resolve_report_to(report_to: str) -> str | None:
    """The tracker to hand `Accelerator(log_with=...)`, or None. `auto` means TensorBoard when it
    is installed; a named tracker whose package is missing is refused before training starts,
    not found out after an hour of it."""
    from accelerate.utils import is_mlflow_available, is_tensorboard_available, is_wandb_available

    available = {"tensorboard": is_tensorboard_available, "wandb": is_wandb_available,
                 "mlflow": is_mlflow_available}
    if report_to == "none":
        return None
    if report_to == "auto":
        return "tensorboard" if is_tensorboard_available() else None
    if report_to not in TRACKERS:
        raise ValueError(f"report_to must be auto, none or one of {', '.join(TRACKERS)}, "
                         f"not {report_to!r}")
    if not available[report_to]():
        raise ValueError(f"--report-to {report_to} needs the {TRACKERS[report_to]} package, which "
                         f"is not installed: pip install {TRACKERS[report_to]}, or use "
                         f"--report-to none")
    return report_to


def scalars(metrics: dict, prefix: str = "") -> dict[str, float]:
    """The numbers of a nested metrics dict under slash-joined keys, as trackers want them
    (they take scalars only; intervals and counts lists are left out)."""
    flat = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat |= scalars(value, name + "/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            flat[name] = value
    return flat


class TrainingLog:
    """The run's loss and evaluation history, rewritten whole at every entry (a few hundred small
    entries at most), so a killed run leaves a readable file that a resumed one continues."""

    def __init__(self, path: Path, total_steps: int, resumed_from_step: int = 0):
        self.path = path
        self.data = {"format": 1, "total_steps": total_steps, "train": [], "eval": []}
        if resumed_from_step and path.exists():
            old = json.loads(path.read_text())
            # Entries past the snapshot are trained again after a resume, so they are dropped.
            for kind in ("train", "eval"):
                self.data[kind] = [e for e in old.get(kind, []) if e["step"] <= resumed_from_step]

    def add(self, kind: str, entry: dict) -> None:
        self.data[kind].append(entry)
        replace_whole(self.path, json.dumps(self.data, indent=1, default=str) + "\n")


def read_training_log(checkpoint: str | Path) -> dict | None:
    """A checkpoint's training log, or None when it has none or it cannot be read."""
    try:
        data = json.loads((Path(checkpoint) / TRAINING_LOG_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("train"), list) \
            or not isinstance(data.get("eval", []), list):
        return None
    return data
