"""The paper-protocol experiment: the sets each arm labels, the fitted-line ratio and its bootstrap,
the run's bookkeeping with the model replaced by stand-ins, then one quick real run."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from active_learning import experiment
from active_learning.efficiency import bootstrap_ratio, fitted_ratio
from active_learning.experiment import (ExperimentConfig, PoolScores, active_set, run_experiment,
                                        step_uncertainty, uncertainty_set, uniform_set)
from active_learning.select import Candidate

ROOT = Path(__file__).resolve().parents[2]


def pool(problems: int = 6, per_problem: int = 10, seed: int = 0) -> list[Candidate]:
    rng = random.Random(seed)
    return [Candidate(p * per_problem + k, f"p{p}", rng.random(), "wrong" if k % 2 else "right")
            for p in range(problems) for k in range(per_problem)]


def per_problem(ids: list[int], candidates: list[Candidate]) -> Counter:
    by_id = {c.solution_id: c for c in candidates}
    return Counter(by_id[i].problem_id for i in ids)


def test_the_active_set_takes_the_most_convincing_wrong_answers_then_the_rest_per_problem() -> None:
    candidates = pool()
    ids = active_set(candidates, 5, 0.8, seed=1)
    assert len(ids) == len(set(ids)) == 30
    assert set(per_problem(ids, candidates).values()) == {5}
    by_id = {c.solution_id: c for c in candidates}
    for problem in {c.problem_id for c in candidates}:
        mine = [by_id[i] for i in ids if by_id[i].problem_id == problem]
        wrong = [c for c in candidates if c.problem_id == problem and c.answer_grade == "wrong"]
        rest = [c for c in candidates if c.problem_id == problem and c not in mine]
        top_wrong = sorted(wrong, key=lambda c: -c.score)[:4]
        # 80% of 5: the four most convincing wrong answers, then the best-scored of the others.
        assert all(c in mine for c in top_wrong)
        extra = next(c for c in mine if c not in top_wrong)
        assert extra.score >= max(c.score for c in rest)


def test_the_mixed_set_draws_its_control_share_uniformly_before_choosing_the_rest() -> None:
    candidates = pool(problems=20)
    by_id = {c.solution_id: c for c in candidates}
    assert active_set(candidates, 2, 0.8, seed=1, control_share=0.0) == active_set(candidates, 2, 0.8, seed=1)
    right = lambda ids: sum(by_id[i].answer_grade == "right" for i in ids)  # noqa: E731
    # Chosen picks are all wrong answers at a wrong share of 1; a control slice is drawn blind.
    assert right(active_set(candidates, 2, 1.0, seed=1)) == 0
    mixed = active_set(candidates, 2, 1.0, seed=1, control_share=0.5)
    assert len(set(mixed)) == 40 and set(per_problem(mixed, candidates).values()) == {2}
    assert 5 <= right(mixed) <= 15
    # Over many seeds a quarter of a half-control set is a right answer: half the pool is right.
    shares = [right(active_set(candidates, 2, 1.0, seed=s, control_share=0.5)) / 40 for s in range(200)]
    assert abs(sum(shares) / len(shares) - 0.25) < 0.03


def test_the_uniform_set_draws_per_problem_nested_across_rungs_and_varies_with_the_seed() -> None:
    candidates = pool()
    small, large = uniform_set(candidates, 2, seed=3), uniform_set(candidates, 4, seed=3)
    assert len(set(large)) == len(large) == 24 and set(per_problem(large, candidates).values()) == {4}
    assert set(small) <= set(large)
    assert set(uniform_set(candidates, 4, seed=4)) != set(large)
    # Uniform, not by score: over many draws every candidate comes up about equally often.
    counts = Counter(i for s in range(400) for i in uniform_set(candidates, 2, seed=s))
    assert len(counts) == len(candidates) and max(counts.values()) < 2.2 * min(counts.values())


def test_the_uncertainty_set_takes_the_least_certain_candidates_per_problem() -> None:
    candidates = pool()
    uncertainty = [((c.solution_id * 7) % 10) / 10 for c in candidates]
    ids = uncertainty_set(candidates, uncertainty, 3, seed=0)
    assert len(set(ids)) == 18 and set(per_problem(ids, candidates).values()) == {3}
    for c in candidates:
        peers = [uncertainty[o.solution_id] for o in candidates if o.problem_id == c.problem_id]
        if uncertainty[c.solution_id] > sorted(peers)[-4]:
            assert c.solution_id in ids
    assert step_uncertainty([0.99, 0.5, None]) == 1.0 and step_uncertainty([1.0, 0.0]) == 0.0
    assert step_uncertainty([0.9]) == pytest.approx(0.2)


def curve(labels: list[int], quality) -> list[dict]:
    return [{"labels": n, "best_of_n": quality(n)} for n in labels]


def test_the_fitted_ratio_reads_how_many_more_labels_uniform_needs() -> None:
    labels = [100, 200, 400, 800, 1600]
    uniform = curve(labels, lambda n: 0.3 + 0.05 * math.log(n))
    active = curve(labels, lambda n: 0.3 + 0.05 * math.log(3 * n))
    assert fitted_ratio([active], [uniform], "best_of_n") == pytest.approx(3.0)
    assert fitted_ratio([uniform], [active], "best_of_n") == pytest.approx(1 / 3)
    # Pooled over seeds with their own offsets, the shared line still gives 3x.
    shifted = [curve(labels, lambda n, d=d: 0.3 + d + 0.05 * math.log(3 * n)) for d in (-0.02, 0.02)]
    plain = [curve(labels, lambda n, d=d: 0.3 + d + 0.05 * math.log(n)) for d in (-0.02, 0.02)]
    assert fitted_ratio(shifted, plain, "best_of_n") == pytest.approx(3.0)
    flat = curve(labels, lambda n: 0.5)
    assert fitted_ratio([flat], [flat], "best_of_n") is None
    assert fitted_ratio([active[:1]], [uniform], "best_of_n") is None
    # The first full run: lines all but flat and the active arm 0.04 above; its ratio overflowed
    # a float. Beyond a millionfold a ratio only says the lines are flat.
    nearly_flat = curve(labels, lambda n: 0.44 + 1e-6 * math.log(n))
    above = curve(labels, lambda n: 0.48 + 1e-6 * math.log(n))
    assert fitted_ratio([above], [nearly_flat], "best_of_n") is None
    assert fitted_ratio([nearly_flat], [above], "best_of_n") is None


def test_the_bootstrap_gives_an_interval_around_the_ratio_over_seeds_and_problems() -> None:
    rng = random.Random(0)
    labels = [10, 20, 40, 80, 160]

    def outcomes(quality: float) -> list[int]:
        return [int(rng.random() < quality) for _ in range(200)]

    def noisy(shift: float) -> list[dict]:
        points = []
        for n in labels:
            got = outcomes(min(0.95, 0.2 + 0.1 * math.log(shift * n)))
            points.append({"labels": n, "best_of_n": sum(got) / len(got), "outcomes": got})
        return points

    active = {s: noisy(2.0) for s in range(4)}
    uniform = {s: noisy(1.0) for s in range(4)}
    result = bootstrap_ratio(active, uniform, "best_of_n", samples=300, seed=1)
    lo, hi = result["ci95"]
    assert result["seeds"] == 4 and lo <= result["ratio"] <= hi and lo < hi
    assert 1.0 < result["ratio"] < 4.0 and result["extrapolated"] is False
    far = {s: [{**p, "best_of_n": p["best_of_n"] + 0.5} for p in uniform[s]] for s in uniform}
    assert bootstrap_ratio(far, uniform, "best_of_n", samples=50)["extrapolated"] is True
    # One seed: nothing to resample, so no interval.
    single = bootstrap_ratio({0: active[0]}, {0: uniform[0]}, "best_of_n", samples=300)
    assert single["ci95"] is None and single["ratio"] is not None


def test_metrics_other_than_best_of_n_are_resampled_from_their_own_values() -> None:
    # Points carry best-of-N outcomes; a step-AUROC interval drawn from them would be best-of-N's
    # (the second full run's JSON gave all three metrics one interval).
    def curve(seed: int, gain: float) -> list[dict]:
        return [{"labels": n, "best_of_n": 0.5, "outcomes": [1, 0] * 50,
                 "step_auroc": 0.5 + gain * math.log(n) + 0.01 * seed} for n in (100, 200, 400)]

    active = {s: curve(s, 0.1) for s in range(3)}
    uniform = {s: [{**p, "step_auroc": p["step_auroc"] - 0.05} for p in curve(s, 0.1)] for s in range(3)}
    result = bootstrap_ratio(active, uniform, "step_auroc", samples=200, seed=2)
    # Every seed gives the same lines, 0.05 apart at slope 0.1: every resample finds exp(0.5).
    assert result["ratio"] == pytest.approx(math.exp(0.5))
    assert result["ci95"] == pytest.approx([math.exp(0.5)] * 2)
    # Best-of-N is flat in these curves: no ratio, whatever the outcomes say.
    assert bootstrap_ratio(active, uniform, "best_of_n", samples=50)["ratio"] is None


def test_the_config_refuses_what_cannot_run() -> None:
    for bad in ({"ladder": "2,1"}, {"ladder": "1,128"}, {"arms": "active,random"}, {"score": "mean"},
                {"metric": "accuracy"}, {"errors": "carry,typo"}, {"device": "tpu"}, {"seeds": 0},
                {"arms": "uniform,warm", "warm_labels": 3}, {"arms": "uniform,warm", "warm_labels": 4}):
        with pytest.raises(ValueError):
            ExperimentConfig(**bad)
    assert ExperimentConfig().rungs == (1, 2, 4) and ExperimentConfig().pool_size == 64
    # warm_labels is judged only when the warm arm runs.
    assert ExperimentConfig(pool_size=2, ladder="1,2").warm_labels == 4


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Training, scoring and measuring replaced, so the bookkeeping runs in a moment."""
    calls: dict[str, list] = {"train": [], "score": []}

    def fake_train(config, base, seed, records, probe, output: Path) -> Path:
        output.mkdir(parents=True)
        calls["train"].append((output.name, len(records)))
        return output

    def fake_score(config, checkpoint: Path, pool) -> PoolScores:
        calls["score"].append(checkpoint.name)
        rng = random.Random(checkpoint.name)
        return PoolScores([rng.random() for _ in pool], [rng.random() for _ in pool], [rng.random() for _ in pool])

    def fake_measure(config, checkpoint: Path, test) -> dict:
        quality = 0.4 + 0.01 * len(calls["train"])
        return {"step_auroc": quality, "step_f1": 0.5, "first_error_f1": 0.3, "best_of_n": quality,
                "majority": 0.5, "outcomes": [1, 0] * (config.test_problems // 2)}

    monkeypatch.setattr(experiment, "_train_prm", fake_train)
    monkeypatch.setattr(experiment, "_score_pool", fake_score)
    monkeypatch.setattr(experiment, "_measure", fake_measure)
    monkeypatch.setattr(experiment, "_pretrained_base", lambda config, seed, work: config.base)
    return calls


def test_the_fixed_selector_scores_the_pool_once_a_seed(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(arms="active,uniform,uncertainty", ladder="1,2,4", seeds=3)
    results = run_experiment(config)
    assert stand_ins["score"] == ["selector"] * 3
    # The selector learns from one label per problem; every (arm, rung) trains its own PRM.
    assert ("selector", config.pool_problems) in stand_ins["train"]
    for arm in ("active", "uniform", "uncertainty"):
        assert [p["labels"] for p in results["arms"][arm]["0"]] == [6, 12, 24]
    # Stand-in quality rises with every model trained, so the lines rise and a ratio exists.
    efficiency = results["data_efficiency"]
    assert efficiency["ratio"] > 0 and set(efficiency["by_arm"]) == {"active", "uncertainty"}
    assert "active/uniform data efficiency" in experiment.summary(results)
    svg = experiment.experiment_svg(results)
    assert svg.count("<polyline") == 9 and f'ratio {efficiency["ratio"]:.2f}x' in svg


def test_a_run_without_the_active_arm_headlines_the_mixed_one(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(arms="uniform,mixed", ladder="1,2,4", seeds=2, control_share=0.5)
    results = run_experiment(config)
    efficiency = results["data_efficiency"]
    assert efficiency["arm"] == "mixed" and efficiency["ratio"] > 0 and "a_mixed" in efficiency["formula"]
    assert "mixed/uniform data efficiency" in experiment.summary(results)
    svg = experiment.experiment_svg(results)
    assert "mixed (50% uniform first)" in svg and "best_of_n mixed/uniform ratio" in svg


def test_the_retrain_arm_retrains_its_selector_between_rungs_on_its_labels(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(arms="active,retrain", ladder="1,2,4", seeds=1)
    results = run_experiment(config)
    assert stand_ins["score"] == ["selector", "retrain-selector-2", "retrain-selector-4"]
    trained = dict(stand_ins["train"])
    # Its selector's labels so far: the selector's one a problem and the arm's 1, then 2 (a
    # candidate the selector learnt from may also be picked, so the union can be smaller).
    assert config.pool_problems < trained["retrain-selector-2"] <= 2 * config.pool_problems
    assert 2 * config.pool_problems <= trained["retrain-selector-4"] <= 3 * config.pool_problems
    # The first rung is the fixed selector's pick, the same set as the active arm's: one model.
    assert "retrain-1" not in trained
    assert results["arms"]["retrain"]["0"][0]["best_of_n"] == results["arms"]["active"]["0"][0]["best_of_n"]
    assert [p["labels"] for p in results["arms"]["retrain"]["0"]] == [6, 12, 24]


def test_ablations_run_in_each_seed_and_train_only_what_they_change(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(arms="active,uniform", ladder="1,2,4", seeds=2)
    results = run_experiment(config, ablations=list(experiment.ABLATIONS))
    trained = [name for name, _ in stand_ins["train"]]
    # Per seed: the main selector, one trained on 4 labels a problem, one on the 16-candidate pool.
    assert trained.count("selector") == 6 and len(stand_ins["score"]) == 6
    # The uniform arm is retrained only on the other pool: the same labels make the same model.
    assert sum(name.startswith("uniform-") for name in trained) == 2 * (3 + 3)
    assert set(results["ablations"]) == set(experiment.ABLATIONS)
    for name, ablation in results["ablations"].items():
        assert ablation["overrides"] == {"arms": "active,uniform", **experiment.ABLATIONS[name]}
        assert set(ablation["arms"]) == set(ablation["overrides"]["arms"].split(","))
        assert set(ablation["arms"]["uniform"]) == {"0", "1"}
        assert set(ablation["data_efficiency"]) >= {"ratio", "ci95", "seeds"}
    same_pool = results["ablations"]["minimum_score"]["arms"]["uniform"]
    assert [p["best_of_n"] for p in same_pool["0"]] == [p["best_of_n"] for p in results["arms"]["uniform"]["0"]]
    assert "ablation pool_16: active/uniform ratio" in experiment.summary(results)
    assert "ablation control_half: mixed/uniform ratio" in experiment.summary(results)
    # The plot draws every ablation's arms beside the main ones; a same-pool ablation's uniform
    # arm is the main one and is drawn once, the other pool's is its own.
    svg = experiment.experiment_svg(results)
    assert "active [minimum_score]" in svg and "mixed [control_half]" in svg and "[pool_16] " in svg
    assert "uniform [minimum_score]" not in svg and "uniform [pool_16]" in svg


def test_device_and_base_reach_pretraining_and_training(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = {}
    monkeypatch.setattr(experiment, "pretrain", lambda settings, data: seen.setdefault("pretrain", settings) and tmp_path / "base")
    monkeypatch.setattr(experiment, "train", lambda settings, records, probe: seen.setdefault("train", settings))
    config = ExperimentConfig.quick().replace(device="cuda", base="100m", train_steps=7)
    base = experiment._pretrained_base(config, 5, tmp_path)
    experiment._train_prm(config, base, 5, [], [], tmp_path / "prm")
    assert (seen["pretrain"].base, seen["pretrain"].device, seen["pretrain"].seed) == ("100m", "cuda", 5)
    settings = seen["train"]
    assert (settings.base, settings.device, settings.steps, settings.seed) == (str(tmp_path / "base"), "cuda", 7, 5)
    assert settings.step_token_labels and settings.lm_loss_weight == 1.0


def test_kept_bases_are_pretrained_once_per_seed_and_settings(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    made = []

    def fake_pretrain(settings, data) -> Path:
        Path(settings.output).mkdir(parents=True)
        made.append(settings.output)
        return Path(settings.output)

    monkeypatch.setattr(experiment, "pretrain", fake_pretrain)
    config = ExperimentConfig.quick().replace(bases=str(tmp_path / "bases"))
    first = experiment._pretrained_base(config, 3, tmp_path / "run-1")
    assert experiment._pretrained_base(config, 3, tmp_path / "run-2") == first
    assert experiment._pretrained_base(config, 4, tmp_path / "run-2") != first
    assert experiment._pretrained_base(config.replace(pretrain_steps=2), 3, tmp_path / "run-2") != first
    # A preset's pretraining rate shapes its base too (3e-3 sent the 100m preset to NaN).
    slower = dataclasses.replace(experiment.PRESETS["tiny"], pretrain_learning_rate=1e-4)
    monkeypatch.setitem(experiment.PRESETS, "tiny", slower)
    assert experiment._pretrained_base(config, 3, tmp_path / "run-2") != first
    assert len(made) == 4 and all(Path(m).parent == tmp_path / "bases" for m in made)
    # Without `bases`, a base lives in the run's own directory and goes with it.
    plain = experiment._pretrained_base(config.replace(bases=""), 3, tmp_path / "run-3")
    assert Path(plain) == tmp_path / "run-3" / "base" and len(made) == 5


def finite(value) -> bool:
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def test_a_quick_paper_protocol_run_writes_results_and_a_plot(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from app.cli import cli

    output = tmp_path / "active_learning.json"
    # Two jobs: the seeds run in processes of their own and come back in order.
    done = CliRunner().invoke(cli, ["simulate", "--protocol", "paper", "--quick", "--jobs", "2", "--output", str(output)])
    assert done.exit_code == 0, done.output[-3000:]
    results = json.loads(output.read_text())
    assert set(results) >= {"data_efficiency", "arms", "config", "ablations"}
    efficiency = results["data_efficiency"]
    assert set(efficiency) >= {"ratio", "ci95", "seeds", "protocol", "metric"}
    assert efficiency["protocol"] == "paper" and efficiency["seeds"] == 2 and efficiency["metric"] == "best_of_n"
    assert results["environment"]["jobs"] == 2
    assert set(results["arms"]) == {"active", "uniform", "retrain", "uncertainty"}
    for arm, seeds in results["arms"].items():
        assert set(seeds) == {"0", "1"}
        for points in seeds.values():
            assert [p["per_problem"] for p in points] == [1, 2]
            assert [p["labels"] for p in points] == [6, 12]
            for p in points:
                assert 0 <= p["best_of_n"] <= 1 and len(p["outcomes"]) == results["config"]["test_problems"]
                assert p["step_auroc"] is None or 0 <= p["step_auroc"] <= 1
    assert finite(results)
    # Convincing wrong answers are what the active arm asks for.
    wrong = lambda arm: sum(p["wrong_answer_labels"] for s in results["arms"][arm].values() for p in s)  # noqa: E731
    assert wrong("active") > wrong("uniform")
    for seeds in results["arms"].values():
        for p in (p for points in seeds.values() for p in points):
            assert p["clean_labels"] + p["wrong_answer_labels"] <= p["labels"]
    svg = output.with_suffix(".svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 12 and "log scale" in svg
    assert "best_of_n:" in done.output and "uniform mean best_of_n" in done.output


@pytest.mark.parametrize(("args", "message"), [
    (["--protocol", "paper", "--ladder", "4,2"], "ladder: increasing"),
    (["--protocol", "paper", "--arms", "active,random"], "arms: choose from"),
    (["--protocol", "paper", "--ablations", "pool_16,bigger"], "ablations: choose from"),
    (["--protocol", "paper", "--rounds", "3"], "not an option of --protocol paper: --rounds"),
    (["--pool-size", "8"], "not an option of --protocol iterative: --pool-size"),
    (["--bases", "somewhere"], "not an option of --protocol iterative: --bases"),
    (["--warm-labels", "2"], "not an option of --protocol iterative: --warm-labels"),
])
def test_simulate_flags_are_checked_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    from click.testing import CliRunner

    from app.cli import cli

    output = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["simulate", "--quick", "--output", str(output), *args])
    assert result.exit_code != 0 and message in result.output
    assert not output.exists()


def test_simulate_passes_the_paper_flags_to_the_experiment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from app.cli import cli

    seen = {}

    def fake_report(config, output, ablations, log):
        seen.update(config=config, output=output, ablations=ablations)
        return "done"

    monkeypatch.setattr(experiment, "run_and_report", fake_report)
    result = CliRunner().invoke(cli, [
        "simulate", "--protocol", "paper", "--output", str(tmp_path / "r.json"), "--seed", "4",
        "--pool-size", "32", "--ladder", "1,4", "--seeds", "5", "--arms", "uniform,warm", "--warm-labels", "1",
        "--device", "cuda", "--base", "100m", "--score", "minimum", "--ablations", "pool_16",
        "--bases", str(tmp_path / "bases")])
    assert result.exit_code == 0, result.output
    config = seen["config"]
    assert (config.seed, config.pool_size, config.rungs, config.seeds, config.arm_names) == (
        4, 32, (1, 4), 5, ("uniform", "warm"))
    assert config.warm_labels == 1
    assert (config.device, config.base, config.score, config.bases) == ("cuda", "100m", "minimum", str(tmp_path / "bases"))
    assert seen["ablations"] == ["pool_16"] and config.train_steps == ExperimentConfig().train_steps


def test_simulate_ends_a_diverged_run_with_the_trainers_message(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    from click.testing import CliRunner

    from active_learning.train import TrainingDiverged
    from app.cli import cli

    def diverge(*args, **kwargs):
        raise TrainingDiverged("training diverged by step 3 (mean loss nan) with peak learning rate 1e+30")

    monkeypatch.setattr(experiment, "run_experiment", diverge)
    done = CliRunner().invoke(cli, ["simulate", "--protocol", "paper", "--quick", "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 1 and "Error: training diverged by step 3" in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert not (tmp_path / "r.json").exists()


def test_the_warm_arm_is_the_uniform_draw_then_picks_by_a_selector_trained_on_it(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(arms="uniform,warm", ladder="1,2,4", warm_labels=2, seeds=1)
    results = run_experiment(config)
    # No arm asks the one-label selector; the warm selector is the uniform arm's 2-a-problem PRM,
    # trained once: it scores the pool and is that rung's point for both arms.
    assert stand_ins["score"] == ["warm-selector"]
    trained = [name for name, _ in stand_ins["train"]]
    assert trained == ["uniform-1", "warm-selector", "uniform-4", "warm-4"]
    uniform, warm = results["arms"]["uniform"]["0"], results["arms"]["warm"]["0"]
    assert [p["best_of_n"] for p in warm[:2]] == [p["best_of_n"] for p in uniform[:2]]
    assert warm[2]["best_of_n"] != uniform[2]["best_of_n"]
    assert [p["labels"] for p in warm] == [6, 12, 24]
    assert results["data_efficiency"]["arm"] == "warm"
    assert "warm (uniform to 2 a problem, then active)" in experiment.experiment_svg(results)


def test_the_warm_set_holds_the_uniform_draw_and_picks_only_among_the_rest(stand_ins: dict[str, list]) -> None:
    config = ExperimentConfig.quick().replace(warm_labels=2)
    run = experiment._Seed(config, 0, Path("unused"), base="tiny")
    drawn = experiment.uniform_set(run.candidates, 2, 1)
    warm = experiment._warm_set(run, config, 5, seed=0)
    assert warm[:len(drawn)] == drawn and len(set(warm)) == len(warm) == 5 * config.pool_problems


def test_an_interrupted_run_keeps_the_points_it_finished(stand_ins: dict[str, list], monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    measured = experiment._measure

    def stopped_at_the_fourth(config, checkpoint: Path, test) -> dict:
        if len(stand_ins["train"]) > 4:  # the selector, then three arm-rungs
            raise KeyboardInterrupt
        return measured(config, checkpoint, test)

    monkeypatch.setattr(experiment, "_measure", stopped_at_the_fourth)
    config = ExperimentConfig.quick().replace(arms="active,uniform", ladder="1,2,4", seeds=2)
    summary = experiment.run_and_report(config, tmp_path / "r.json")
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["stopped"] is True and summary.startswith("STOPPED before the end")
    # Seed 0 finished rung 1 of both arms and rung 2 of the active arm alone, which is left out:
    # the arms are compared on the rungs both reached. Seed 1 never started.
    assert [p["per_problem"] for p in results["arms"]["active"]["0"]] == [1]
    assert [p["per_problem"] for p in results["arms"]["uniform"]["0"]] == [1]
    assert results["arms"]["active"]["1"] == results["arms"]["uniform"]["1"] == []
    assert "STOPPED early" in (tmp_path / "r.svg").read_text()


def test_a_time_limits_sigterm_stops_the_experiment_and_keeps_its_points(tmp_path: Path) -> None:
    # Seeds in worker processes, and the SIGTERM to the parent alone: the workers stop with it.
    output = tmp_path / "r.json"
    run = subprocess.Popen([sys.executable, "bench/simulate_active_learning.py", "--protocol", "paper", "--quick",
                            "--jobs", "2", "--ladder", "1,2,4", "--output", str(output)], cwd=ROOT,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    for line in run.stderr:
        if "/problem:" in line:  # a first point is finished
            run.send_signal(signal.SIGTERM)
            break
    run.communicate(timeout=120)
    assert run.returncode == 0
    results = json.loads(output.read_text())
    assert results["stopped"] is True
    rungs = [len(points) for seeds in results["arms"].values() for points in seeds.values()]
    assert max(rungs) < 3  # stopped well before the ladder's end
