"""The simulation: the data-efficiency arithmetic on hand-made curves, then one quick real run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from active_learning.simulate import SimulationConfig, data_efficiency, labels_to_reach

STEPWISE = str(Path(sys.executable).with_name("stepwise"))


def curve(points: list[tuple[int, float | None]]) -> list[dict]:
    return [{"round": i, "labels": labels, "step_auroc": q} for i, (labels, q) in enumerate(points)]


def test_labels_to_reach_interpolates_in_log_labels() -> None:
    uniform = curve([(100, 0.6), (200, 0.7), (400, 0.8)])
    assert labels_to_reach(uniform, "step_auroc", 0.7) == (pytest.approx(200), False)
    needed, extrapolated = labels_to_reach(uniform, "step_auroc", 0.75)
    assert not extrapolated and needed == pytest.approx(math.sqrt(200 * 400))
    # Already there at the first point: uniform needs at most that many.
    assert labels_to_reach(uniform, "step_auroc", 0.5) == (100.0, False)


def test_labels_to_reach_extrapolates_past_the_last_point_or_gives_up() -> None:
    uniform = curve([(100, 0.6), (200, 0.7), (400, 0.8)])
    needed, extrapolated = labels_to_reach(uniform, "step_auroc", 0.9)
    assert extrapolated and needed == pytest.approx(800, rel=1e-6)
    falling = curve([(100, 0.7), (200, 0.65), (400, 0.6)])
    assert labels_to_reach(falling, "step_auroc", 0.9) == (None, True)
    # A nearly flat curve would "need" millions of labels: beyond 4x its last point, no figure.
    flat = curve([(100, 0.50), (200, 0.501), (400, 0.502)])
    assert labels_to_reach(flat, "step_auroc", 0.51) == (None, True)
    assert labels_to_reach(uniform, "step_auroc", 0.95)[0] == pytest.approx(100 * 2**3.5)
    assert labels_to_reach(uniform, "step_auroc", 1.05) == (None, True)
    assert labels_to_reach(curve([(100, None)]), "step_auroc", 0.5) == (None, True)


def test_data_efficiency_compares_each_active_round_with_uniform() -> None:
    active = curve([(100, 0.6), (200, 0.8), (300, 0.85)])
    uniform = curve([(100, 0.6), (200, 0.7), (400, 0.8)])
    result = data_efficiency(active, uniform, "step_auroc")
    first, last = result["per_round"]
    assert (first["labels"], first["uniform_labels_needed"], first["ratio"]) == (200, 400.0, 2.0)
    assert last["extrapolated"] and last["ratio"] == pytest.approx(100 * 2**2.5 / 300, rel=1e-3)
    assert result["final"] == last


@pytest.mark.slow
def test_a_quick_simulation_writes_results_and_a_plot(tmp_path: Path) -> None:
    output = tmp_path / "active_learning.json"
    done = subprocess.run([STEPWISE, "simulate", "--quick", "--seed", "3", "--output", str(output)],
                          env=dict(os.environ), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(output.read_text())
    config = SimulationConfig.quick(3)
    assert results["config"]["seed"] == 3
    for arm in ("active", "uniform"):
        labels = [p["labels"] for p in results["curves"][arm]]
        assert labels == [config.seed_labels + r * config.labels_per_round for r in range(config.rounds + 1)]
    # Same seed labels, same model: the arms agree before they diverge.
    assert results["curves"]["active"][0]["step_auroc"] == results["curves"]["uniform"][0]["step_auroc"]
    # The active arm asks for wrong-answer solutions; uniform takes the pool's mix.
    active_wrong = results["curves"]["active"][-1]["wrong_answer_labels"]
    uniform_wrong = results["curves"]["uniform"][-1]["wrong_answer_labels"]
    assert active_wrong > uniform_wrong
    assert set(results["data_efficiency"]) == {"step_auroc", "first_error_f1", "best_of_n"}
    svg = output.with_suffix(".svg").read_text()
    assert svg.startswith("<svg") and "polyline" in svg
    assert "majority voting" in svg  # best-of-N's reference level
    assert "step_auroc" in done.stdout


@pytest.mark.slow
def test_a_pretrained_base_serves_both_arms_for_a_fixed_number_of_steps(tmp_path: Path) -> None:
    from active_learning.simulate import run

    config = SimulationConfig.quick(4).replace(pretrain_steps=2, errors="carry,remark", rounds=1, train_steps=3)
    results = run(config, tmp_path)
    assert results["config"]["pretrain_steps"] == 2 and results["config"]["errors"] == "carry,remark"
    base = json.loads((tmp_path / "base" / "stepwise.json").read_text())
    assert base["kind"] == "pretrained base" and base["steps"] == 2
    for arm in ("active", "uniform"):
        meta = json.loads((tmp_path / arm / "round-1" / "stepwise.json").read_text())
        assert meta["base"] == "base"  # named, not located
        assert meta["config"]["step_token_labels"] and meta["lm_loss_weight"] == 1.0
        # Twice the labels of round 0, and still the same number of steps.
        assert meta["steps"] == 3 and meta["train_examples"] == config.seed_labels + config.labels_per_round


def test_simulate_refuses_unknown_kinds_of_mistakes(tmp_path: Path) -> None:
    output = tmp_path / "active_learning.json"
    done = subprocess.run([STEPWISE, "simulate", "--quick", "--errors", "carry,typo", "--output", str(output)],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "choose from result, operand, carry, remark" in done.stderr
    assert not output.exists()
