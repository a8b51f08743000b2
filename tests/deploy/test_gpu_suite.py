"""The GPU suite's wiring, run at tiny sizes on CPU: every part runs its benchmark, writes its
JSON, and the summary reads each goal from it. The figures themselves need a GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import process_alive

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _suite(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "--smoke", "--results-dir",
                           str(results), *args], capture_output=True, text=True, cwd=ROOT, timeout=900)


def test_every_part_writes_its_results_and_the_summary_reads_the_goals(tmp_path: Path) -> None:
    done = _suite(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "gpu_suite.json").read_text())
    assert set(summary["parts"]) == {"learning", "throughput", "active_learning"}
    for name, part in summary["parts"].items():
        assert part["returncode"] == 0 and part["smoke"] is True
        results = json.loads((tmp_path / part["results"]).read_text())
        for goal in part["goals"]:
            value = results
            for key in goal["metric"].split("."):
                value = value[key]
            assert goal["value"] == value
            assert goal["met"] is (None if value is None else value >= goal["goal"])
    # Where the time goes, for the next lease to read: one training step and one scoring batch,
    # eager and compiled, and every setting measured.
    throughput = json.loads((tmp_path / "gpu_throughput.json").read_text())
    profiles = throughput["profiles"]
    assert set(profiles) == {"train_step", "score_batch", "score_stream", "train_step_compiled", "score_batch_compiled",
                             "score_stream_compiled"}
    assert set(throughput["train"]) == {"batch_16", "tokens_24576", "batch_16_compiled", "tokens_24576_compiled"}
    assert set(throughput["score"]) == {"tokens_16384", "tokens_65536", "tokens_16384_compiled", "tokens_65536_compiled"}
    assert all(s["tokens_per_s"] > 0 and s["steps"] > 0 for s in throughput["train"].values())
    assert throughput["train_best"] in throughput["train"] and throughput["score_best"] in throughput["score"]
    assert all(p["launches"] > 0 and p["top"] and 0 < p["busy_share"] for p in profiles.values())
    # The streamed path against each solution scored alone, eager and compiled: on a GPU this reads
    # back copies made while later chunks are queued.
    checks = throughput["score_checks"]
    assert set(checks) == {"score_check", "score_check_compiled"}
    assert all(c["probabilities"] > 0 and c["max_gap_to_scored_alone"] < 0.01 for c in checks.values())
    metrics = {g["metric"] for p in summary["parts"].values() for g in p["goals"]}
    assert metrics == {"content_step_auroc", "score_mfu", "train_mfu", "score_speedup", "data_efficiency.ratio"}
    # The summary ends the output, one line a part, after the benchmarks' own lines.
    assert [line.split(" on ")[0] for line in done.stdout.splitlines()[-3:]] == ["learning", "throughput", "active_learning"]
    leftovers = {p.name for p in tmp_path.iterdir()}
    assert leftovers == {"gpu_suite.json", "gpu_learning.json", "gpu_throughput.json", "gpu_active_learning.json",
                         "gpu_active_learning.svg"}

    # One part again (the quickest): the others' figures stay in the summary.
    again = _suite(tmp_path, "--only", "active_learning")
    assert again.returncode == 0, again.stderr[-3000:]
    assert set(json.loads((tmp_path / "gpu_suite.json").read_text())["parts"]) == set(summary["parts"])


def test_an_unknown_part_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = _suite(tmp_path, "--only", "learning,speed")
    assert done.returncode == 2 and "--only: choose from learning, throughput, active_learning" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["--timeout-s", "--deadline-s"])
def test_a_part_past_its_time_limit_is_stopped_and_said_so(tmp_path: Path, flag: str) -> None:
    # A device lease ends at a fixed time; a part that overruns must not take the others with it.
    done = _suite(tmp_path, "--only", "throughput", flag, "0.5")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].startswith("throughput: STOPPED at its time limit after")
    part = json.loads((tmp_path / "gpu_suite.json").read_text())["parts"]["throughput"]
    assert part["returncode"] == "timeout" and part["goals"] == []


def test_host_operators_are_counted_for_a_presets_depth(tmp_path: Path) -> None:
    output = tmp_path / "ops.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "host_operators.py"), "--base", "tiny",
                           "--sequences", "2", "--tokens", "16", "--output", str(output)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(output.read_text())
    assert result["layers"] == 4
    # Backward and the optimizer add to the forward pass: a step is several forward passes' worth.
    assert result["forward_backward_operators"] > 2 * result["scoring_forward_operators"] > 0
    assert result["optimizer_step_operators_upper_bound"] > 0


def test_a_stopped_part_takes_its_child_processes_with_it(tmp_path: Path) -> None:
    # The experiment runs its seeds in child processes; left running they would load the GPU
    # under the next part.
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    pid_file = tmp_path / "child.pid"
    parent = ("import subprocess, sys, time; child = subprocess.Popen(['sleep', '120']); "
              "open(sys.argv[1], 'w').write(str(child.pid)); time.sleep(120)")
    assert gpu_suite._run_within([sys.executable, "-c", parent, str(pid_file)], 3) == "timeout"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process_alive(child):
        time.sleep(0.1)
    assert not process_alive(child)



def test_a_stopped_part_reports_what_it_wrote_before_its_limit_and_not_an_earlier_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Throughput rewrites its JSON after every setting, the experiment after a SIGTERM: a part cut
    # off by a lease's clock still gives what it measured.
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    script = tmp_path / "slow.py"
    script.write_text("import json, sys, time\n"
                      "out = sys.argv[sys.argv.index('--output') + 1]\n"
                      "json.dump({'device': 'test card', 'score_mfu': 0.3}, open(out, 'w'))\n"
                      "time.sleep(60)\n")
    monkeypatch.setitem(gpu_suite.PARTS, "throughput", {"script": str(script), "smoke": [], "gpu": [], "limit_s": 5})
    part = gpu_suite.run_part("throughput", tmp_path, smoke=True, limit=3)
    assert part["returncode"] == "timeout" and part["results"] == "gpu_throughput.json"
    assert {g["metric"]: g["value"] for g in part["goals"]}["score_mfu"] == 0.3
    [line] = gpu_suite.summary_lines({"parts": {"throughput": part}})
    assert re.match(r"throughput: STOPPED at its time limit after \d+ s; what it finished, on test card: score_mfu 0.3",
                    line)

    # Stopped before it wrote anything, the file left by an earlier run is not taken for its own.
    script.write_text("import time\ntime.sleep(60)\n")
    stale = gpu_suite.run_part("throughput", tmp_path, smoke=True, limit=2)
    assert stale["returncode"] == "timeout" and stale["goals"] == [] and "results" not in stale
    # Exit status 0 without results of this run is a failure, said so.
    script.write_text("pass\n")
    silent = gpu_suite.run_part("throughput", tmp_path, smoke=True, limit=30)
    assert silent["returncode"] == "no results"
    assert gpu_suite.summary_lines({"parts": {"throughput": silent}})[0].startswith(
        "throughput: FAILED, exit 0 but no results written")


def test_the_learning_bench_refuses_pretraining_steps_without_training_steps(tmp_path: Path) -> None:
    # Training would get what pretraining left of the wall-clock budget, which may be nothing.
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "prm_learning.py"), "--pretrain-steps", "5",
                           "--output", str(tmp_path / "out.json")], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 2 and "--pretrain-steps needs --train-steps" in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_the_scoring_variants_refuse_a_machine_without_a_gpu(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "score_variants.py"), "--output", str(tmp_path / "v.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr
    assert not (tmp_path / "v.json").exists()


def test_every_scoring_variant_runs_at_a_tiny_size_on_cpu(tmp_path: Path) -> None:
    """The wiring of bench/score_variants.py, checked before a lease spends minutes on it: each
    variant scores and records its figures, none records an error."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "score_variants.py"), "--smoke",
                           "--output", str(tmp_path / "v.json")], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "v.json").read_text())
    assert results["smoke"] is True and results["device"] == "cpu"
    variants = results["variants"]
    assert set(variants) == {
        "as_is", "no_ramp", "ramp_length_1.2", "no_ramp_131072", "no_ramp_length_1.2_131072", "no_mask_check",
        "collector_as_before", "packed_sdpa_2048", "packed_flex_2048", "packed_flex_8192", "pretokenized",
        "device_bound_65536", "device_bound_131072", "device_bound_packed_flex_8192"}
    assert all("error" not in v and v["tokens_per_s"] > 0 for v in variants.values()), variants
    assert variants["packed_flex_2048"]["padding"] < variants["no_ramp"]["padding"]


@pytest.mark.parametrize("attention", ["sdpa", "flex_attention"])
def test_the_packed_scoring_variant_reads_what_the_product_reads(attention: str) -> None:
    """The variant the next GPU lease measures against padding gives each step the probabilities
    the product gives it: packing must not let one solution attend to another."""
    sys.path.insert(0, str(ROOT / "bench"))
    import score_variants
    import torch

    import active_learning.score as score
    from active_learning.data import load_solutions
    from active_learning.model import load_base
    from active_learning.synthetic import iter_candidates, to_prm800k

    solutions = load_solutions([to_prm800k(c) for c in iter_candidates(12, 4, seed=3)])
    torch.manual_seed(0)
    model, tokenizer = load_base("tiny", attn=attention)
    model.eval()
    windows, owners = score._windows(tokenizer, solutions, 2048)
    lengths = [len(w["input_ids"]) for w in windows]
    row_tokens = 2 * max(lengths)
    rows = score_variants.packed_rows(lengths, row_tokens)
    assert sorted(i for row in rows for i in row) == list(range(len(windows)))
    assert all(sum(lengths[i] for i in row) <= row_tokens for row in rows)
    assert max(len(row) for row in rows) > 1  # solutions do share rows

    product = score._queue_chunk(model, tokenizer.pad_token_id, solutions, windows, owners, 4096, False)
    packed = score_variants.packed_queue(row_tokens)(model, tokenizer.pad_token_id, solutions, windows, owners,
                                                     4096, False)
    assert sorted(packed.reads) == sorted(product.reads)
    by_read = dict(zip(packed.reads, packed.probs))
    expected = torch.stack([by_read[read] for read in product.reads])
    assert torch.allclose(expected, product.probs, atol=1e-5)
    assert 0 <= score_variants.padding_share(windows, 4096, row_tokens) < score_variants.padding_share(windows, 4096)
