"""One real tiny training run, driven the way users drive it: the CLI, a kill, torchrun."""

import importlib.util
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForTokenClassification, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from active_learning.cli import prm
from active_learning.config import PretrainConfig, TrainConfig
from active_learning.data import load_examples, snapshot_hash
from active_learning.model import compile_layers
from active_learning.tokenizer import build_byte_tokenizer
from active_learning.train import (TrainingStopped, batches_per_epoch, epoch_batches, mixed_precision, process_batches,
                                   train)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# One thread per process, as in conftest.py: spin-waiting OpenMP threads crawl on shared cores.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
FAST = ["--epochs", "1", "--batch-size", "8", "--max-length", "256", "--log-every", "5"]


def _cli(*args) -> str:
    result = CliRunner().invoke(prm, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("prm")
    _cli("synth", "--output", root / "train.jsonl", "--problems", 60, "--seed", 1)
    _cli("synth", "--output", root / "eval.jsonl", "--problems", 12, "--seed", 2)
    return root


@pytest.fixture(scope="module")
def checkpoint(files):
    output = files / "model"
    _cli("train", "--train", files / "train.jsonl", "--eval", files / "eval.jsonl",
         "--output", output, *FAST, "--epochs", "2")
    return output


def test_train_writes_a_complete_checkpoint(checkpoint):
    assert not checkpoint.with_name("model.partial").exists()
    meta = json.loads((checkpoint / "stepwise.json").read_text())
    assert meta["base"] == "tiny" and meta["data_hash"] and meta["steps"] > 0
    assert meta["config"]["max_length"] == 256
    assert meta["lm_loss_weight"] == 1.0  # a preset learns next tokens too
    assert {"step_auroc", "step_f1", "first_error_f1", "n_steps"} <= set(meta["metrics"])
    # Plain transformers, nothing of ours:
    model = AutoModelForTokenClassification.from_pretrained(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    ids = tokenizer("Start with 2. Add 3.\n\n$2 + 3 = 5$.<|step|>", return_tensors="pt")["input_ids"]
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], 3)


def test_train_keeps_its_loss_and_evaluation_history_beside_the_checkpoint(checkpoint):
    log = json.loads((checkpoint / "training_log.json").read_text())
    steps = json.loads((checkpoint / "stepwise.json").read_text())["steps"]
    train = log["train"]
    assert log["total_steps"] == steps and train[-1]["step"] == steps
    assert [e["step"] for e in train] == sorted({e["step"] for e in train})
    assert all(e["loss"] > 0 and e["lr"] > 0 for e in train)
    assert train[-1]["loss"] < train[0]["loss"]
    # A preset learns next tokens too: the PRM's own step loss is kept apart from the sum.
    assert all(0 < e["step_loss"] < e["loss"] for e in train)
    [evaluation] = log["eval"]
    assert evaluation["step"] == steps and 0 <= evaluation["metrics"]["step_auroc"] <= 1


def test_train_reports_to_tensorboard_when_it_is_installed(checkpoint):
    pytest.importorskip("tensorboard")
    assert list((checkpoint / "logs" / "model").glob("events.out.tfevents.*"))


def test_report_to_none_still_keeps_the_training_log(files, tmp_path):
    output = tmp_path / "untracked"
    _cli("train", "--train", files / "train.jsonl", "--output", output, *FAST, "--steps", 3,
         "--report-to", "none")
    assert [e["step"] for e in json.loads((output / "training_log.json").read_text())["train"]] == [3]
    assert not (output / "logs").exists()


def _phase_1_record(n: int) -> dict:
    """A phase-1 record as Stepwise's PRM800K export writes one: each step's alternatives rated,
    the chosen one's index, or the labeler's own step (rated) where none was good."""
    def completion(text, rating):
        return {"text": text, "rating": rating, "flagged": False}
    human = {"text": f"${n} + {n} = {2 * n}$.", "rating": 1, "source": "human", "flagged": False,
             "corrected_rating": None}
    steps = [
        {"completions": [completion(f"Add {n} to {n}.", 1), completion(f"Multiply {n} by {n}.", -1)],
         "human_completion": None, "chosen_completion": 0},
        {"completions": [completion(f"${n} + {n} = {2 * n + 1}$.", -1), completion(f"${n} + {n} = {n}$.", -1)],
         "human_completion": human, "chosen_completion": None},
        {"completions": [completion(f"# Answer\n\n{2 * n}", 1)], "human_completion": None, "chosen_completion": 0},
    ]
    return {"labeler": "l", "timestamp": "2026-01-01T00:00:00", "generation": None,
            "is_quality_control_question": False, "is_initial_screening_question": False,
            "question": {"problem": f"What is {n} + {n}?", "ground_truth_answer": str(2 * n)},
            "label": {"steps": steps, "total_time": 1000, "finish_reason": "solution"}}


def test_train_learns_from_every_alternative_and_written_step_of_phase_1_labels(tmp_path):
    train, held_out = tmp_path / "phase1.jsonl", tmp_path / "held_out.jsonl"
    train.write_text("".join(json.dumps(_phase_1_record(n)) + "\n" for n in range(1, 9)))
    held_out.write_text("".join(json.dumps(_phase_1_record(n)) + "\n" for n in range(20, 23)))
    output = tmp_path / "model"
    _cli("train", "--train", train, "--eval", held_out, "--output", output, *FAST, "--steps", 2,
         "--report-to", "none")
    meta = json.loads((output / "stepwise.json").read_text())
    examples = load_examples(train)
    # Per label: its path (the written step labeled +1), and three alternatives rated -1.
    assert meta["train_examples"] == len(examples) == 8 * 4
    assert meta["data_hash"] == snapshot_hash(examples)
    assert sum(e.labels == [1, 1, 1] for e in examples) == 8
    assert sum(e.labels[-1] == -1 for e in examples) == 8 * 3


def test_a_file_too_small_to_hold_a_problem_out_still_trains_and_says_so(tmp_path):
    # Three problems, none of which falls in the default 10% held out (the split hashes problems).
    train = tmp_path / "small.jsonl"
    train.write_text("".join(json.dumps(_phase_1_record(n)) + "\n" for n in range(3, 6)))
    output = tmp_path / "model"
    result = CliRunner().invoke(prm, ["train", "--train", str(train), "--output", str(output), *FAST,
                                      "--steps", "2", "--report-to", "none"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "no problem of 3 fell in the held-out share" in result.output
    metrics = json.loads((output / "stepwise.json").read_text())["metrics"]
    assert metrics["n_labels"] == 0 and metrics["step_auroc"] is None and metrics["first_error_f1"] is None
    assert "No held-out labels" in (output / "README.md").read_text()


def test_a_file_without_labels_is_refused_and_leaves_nothing(tmp_path):
    unlabeled = tmp_path / "unlabeled.jsonl"
    unlabeled.write_text(json.dumps({"prompt": "P", "completions": [], "labels": []}) + "\n")
    result = CliRunner().invoke(prm, ["train", "--train", str(unlabeled), "--output", str(tmp_path / "model")])
    assert result.exit_code == 1 and "no labeled steps to train on" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unlabeled.jsonl"]


@pytest.mark.parametrize("content, message", [
    ("", "no labeled steps to evaluate on"),
    ('{"prompt": "P", "completions": ["a", "b"], "labels": [true]}\n', "held_out.jsonl:1: a TRL record, but it has 1 labels"),
])
def test_a_bad_eval_file_is_refused_before_training(files, tmp_path, content, message):
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text(content)
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"), "--eval", str(held_out),
                                      "--output", str(tmp_path / "model")])
    assert result.exit_code == 1 and message in result.output
    assert '"step"' not in result.output  # not a step trained
    assert sorted(p.name for p in tmp_path.iterdir()) == ["held_out.jsonl"]


@pytest.mark.parametrize("command", [["score", "--output", "{tmp}/scores.jsonl", "--input"], ["eval"],
                                     ["eval", "--format", "processbench"]])
def test_an_empty_file_is_refused_by_score_and_eval(checkpoint, tmp_path, command):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    options = [option.format(tmp=tmp_path) for option in command[1:]]
    result = CliRunner().invoke(prm, [command[0], "--model", str(checkpoint), *options, str(empty)])
    assert result.exit_code == 1
    assert re.search(r"Error: .*no (solutions|labeled steps|ProcessBench records)", result.output), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


@pytest.mark.parametrize(("problem", "steps", "message"), [
    ("2+3?", [], "no steps to score"), ("2+3?", ["a", "  "], "step 2 of 2 is blank"),
    (" \n", ["2+3=5"], "the problem is blank"),
])
def test_score_refuses_a_solution_with_no_step_or_a_blank_one(checkpoint, tmp_path, problem, steps, message):
    # Scored, a solution with no steps would rank first: the product over no steps is 1.
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text(json.dumps({"problem": "2+3?", "steps": ["2+3=5"]}) + "\n"
                          + json.dumps({"problem": problem, "steps": steps}) + "\n")
    result = CliRunner().invoke(prm, ["score", "--model", str(checkpoint), "--input", str(candidates),
                                      "--output", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 1 and f"{candidates}:2: a candidate record, but {message}" in result.output, result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_score_refuses_a_batch_of_no_tokens(files, checkpoint, tmp_path):
    result = CliRunner().invoke(prm, ["score", "--model", str(checkpoint), "--input", str(files / "eval.jsonl"),
                                      "--output", str(tmp_path / "s.jsonl"), "--batch-tokens", "0"])
    assert result.exit_code == 2 and "--batch-tokens" in result.output and "x>=1" in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_score_refuses_to_write_over_its_input(checkpoint, tmp_path):
    candidates = tmp_path / "candidates.jsonl"
    kept = json.dumps({"problem": "2+3?", "steps": ["2+3=5"]}) + "\n"
    candidates.write_text(kept)
    result = CliRunner().invoke(prm, ["score", "--model", str(checkpoint), "--input", str(candidates),
                                      "--output", str(tmp_path / "." / "candidates.jsonl")])
    assert result.exit_code == 1 and "is the input file" in result.output, result.output
    assert candidates.read_text() == kept


def test_train_names_the_line_of_a_bad_record(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_phase_1_record(1)) + "\n"
                   + json.dumps({"prompt": "P", "completions": ["a"], "labels": "yes"}) + "\n")
    result = CliRunner().invoke(prm, ["train", "--train", str(bad), "--output", str(tmp_path / "model")])
    assert result.exit_code == 1 and f"{bad}:2: a TRL record, but `labels`" in result.output


def test_held_out_records_in_memory_may_hold_no_label_yet(tmp_path):
    # A round's held-out problems may have only give-ups so far: it trains, and says nothing was measured.
    give_up = _phase_1_record(30)
    give_up["label"]["finish_reason"] = "give_up"
    output = tmp_path / "model"
    train(TrainConfig(output=str(output), base="tiny", steps=2, batch_size=8, max_length=256, report_to="none"),
          [_phase_1_record(n) for n in range(1, 5)], iter([give_up]))
    assert json.loads((output / "stepwise.json").read_text())["metrics"]["n_labels"] == 0


def test_a_stop_asked_for_ends_training_at_the_next_step_and_serves_nothing(tmp_path):
    asked = itertools.count()
    output = tmp_path / "model"
    config = TrainConfig(output=str(output), base="tiny", steps=50, batch_size=2, max_length=256, report_to="none")
    with pytest.raises(TrainingStopped, match="stopped at step 3 of 50"):
        train(config, [_phase_1_record(n) for n in range(1, 9)], stop=lambda: next(asked) == 3)
    assert not output.exists()


def test_a_tracker_that_is_not_installed_is_refused_before_training(files, tmp_path):
    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    output = tmp_path / "never"
    refused = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                       "--output", str(output), *FAST, "--report-to", "wandb"])
    assert refused.exit_code == 1
    assert "--report-to wandb needs the wandb package" in refused.output
    assert "pip install wandb" in refused.output
    assert not output.exists() and not output.with_name("never.partial").exists()
    unknown = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                       "--output", str(output), "--report-to", "comet"])
    assert unknown.exit_code == 2 and "'comet' is not one of" in unknown.output


def test_mixed_precision_follows_the_flag_then_accelerate_config(monkeypatch):
    flagged = TrainConfig(output="m", mixed_precision="fp16")
    assert mixed_precision(flagged, cuda=True) == "fp16"
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert mixed_precision(TrainConfig(output="m"), cuda=True) == "bf16"
    assert mixed_precision(TrainConfig(output="m"), cuda=False) == "no"
    # `accelerate launch` sets it from `accelerate config`; Accelerator reads it when given None.
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    assert mixed_precision(TrainConfig(output="m"), cuda=True) is None
    assert mixed_precision(flagged, cuda=True) == "fp16"


def test_refuses_to_overwrite(files, checkpoint):
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                      "--output", str(checkpoint), *FAST])
    assert result.exit_code != 0 and "exists" in result.output


def test_steps_replace_epochs(files, tmp_path):
    output = tmp_path / "three-steps"
    _cli("train", "--train", files / "train.jsonl", "--output", output, *FAST, "--steps", 3)
    assert json.loads((output / "stepwise.json").read_text())["steps"] == 3
    refused = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                       "--output", str(tmp_path / "never"), *FAST, "--steps", "-1"])
    assert refused.exit_code != 0 and "steps must be 0" in refused.output
    assert not (tmp_path / "never").exists() and not (tmp_path / "never.partial").exists()


def test_token_budget_batches_pack_similar_lengths_under_the_budget():
    lengths = [random.Random(n).randint(20, 400) for n in range(500)] + [900]
    for seed in range(5):
        batches = epoch_batches(lengths, 16, seed, batch_tokens=800)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        for batch in batches:
            # Only a sequence longer than the budget makes a batch past it, alone.
            assert max(lengths[i] for i in batch) * len(batch) <= 800 or len(batch) == 1
        assert batches == epoch_batches(lengths, 16, seed, batch_tokens=800)
    padded = sum(max(lengths[i] for i in b) * len(b) for b in epoch_batches(lengths, 16, 0, batch_tokens=800))
    assert padded < 1.15 * sum(lengths)  # sorted within windows: little padding


@pytest.mark.parametrize("budget", [None, 800])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_processes_share_every_epochs_batches_and_resume_in_place(budget, world):
    lengths = [random.Random(n).randint(20, 400) for n in range(203)]
    config = TrainConfig(output="x", batch_size=16, batch_tokens=budget, seed=4)
    epochs = [epoch_batches(lengths, 16, 4000 + e, budget) for e in range(3)]
    stream = [batch for epoch in epochs for batch in epoch]
    steps = len(stream) // world
    taken = [list(itertools.islice(process_batches(lengths, config, world, rank, 0), steps)) for rank in range(world)]
    # Step by step, the processes take the stream's batches in turn: no batch of an epoch is left out.
    assert [b for step in zip(*taken) for b in step] == stream[:steps * world]
    # A run resumed at a step takes the batches an uninterrupted one would have.
    for rank in range(world):
        resumed = process_batches(lengths, config, world, rank, steps // 2)
        assert list(itertools.islice(resumed, steps - steps // 2)) == taken[rank][steps // 2:]
    assert batches_per_epoch(lengths, config) == len(epochs[0])


def test_more_processes_than_an_epochs_batches_still_step_together():
    lengths, config = [50, 60, 70], TrainConfig(output="x", batch_size=2, seed=1)  # two batches an epoch
    stream = [b for e in range(6) for b in epoch_batches(lengths, 2, 1000 + e)]
    taken = [list(itertools.islice(process_batches(lengths, config, 3, rank, 0), 3)) for rank in range(3)]
    assert [b for step in zip(*taken) for b in step] == stream[:9]


def test_train_takes_a_token_budget_and_compiles(files, tmp_path, monkeypatch):
    import active_learning.train as training

    compiled = []
    monkeypatch.setattr(training, "compile_layers", lambda model: compiled.append(compile_layers(model)))
    output = tmp_path / "budget"
    # One epoch under a budget that holds every sequence (at most 256 tokens each) is one step,
    # where the batch size of 8 would take dozens.
    _cli("train", "--train", files / "train.jsonl", "--output", output, *FAST, "--batch-tokens", 100_000,
         "--compile")
    meta = json.loads((output / "stepwise.json").read_text())
    assert meta["steps"] == 1 and meta["config"]["batch_tokens"] == 100_000 and meta["config"]["compile"] is True
    assert compiled == [4]  # the tiny preset's layers, compiled before training
    assert AutoModelForTokenClassification.from_pretrained(output).config.use_cache is False
    refused = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"), "--output",
                                       str(tmp_path / "never"), *FAST, "--batch-tokens", "0"])
    assert refused.exit_code != 0 and "--batch-tokens must be 1 or more, not 0" in refused.output
    assert not list(tmp_path.glob("never*"))


def test_eval_prints_metrics(files, checkpoint):
    metrics = json.loads(_cli("eval", "--model", checkpoint, "--data", files / "eval.jsonl"))
    assert 0 <= metrics["step_auroc"] <= 1 and 0 <= metrics["first_error_f1"] <= 1
    assert metrics["n_steps"] > 0
    assert metrics["best_of_n"]["problems"] == 12 and metrics["best_of_n"]["n"] == 4
    assert 0 <= metrics["best_of_n"]["majority_accuracy"] <= 1


def test_score_writes_a_line_per_solution(files, checkpoint):
    _cli("score", "--model", checkpoint, "--input", files / "eval.jsonl", "--output", files / "s.jsonl",
         "--neutral-as-wrong")
    rows = [json.loads(line) for line in (files / "s.jsonl").read_text().splitlines()]
    records = (files / "eval.jsonl").read_text().splitlines()
    assert len(rows) == len(records) == 48
    first, record = rows[0], json.loads(records[0])
    assert len(first["step_probs"]) == len(record["question"]["pre_generated_steps"])
    assert first["minimum"] == min(first["step_scores"])
    assert first["step_scores"][0] == pytest.approx(first["step_probs"][0][2])


def _train_command(files, output, *extra):
    return [sys.executable, "-m", "active_learning.cli", "train", "--train", str(files / "train.jsonl"),
            "--output", str(output), *FAST, *extra]


def test_killed_run_resumes(files):
    output = files / "resumed"
    command = _train_command(files, output, "--epochs", "4", "--save-every", "4")
    progress = output.with_name("resumed.partial") / "progress.json"
    run = subprocess.Popen(command, cwd=REPO, stderr=subprocess.DEVNULL, env=ENV)
    while not progress.exists() and run.poll() is None:
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert not output.exists()

    subprocess.run(command, cwd=REPO, check=True, capture_output=True, env=ENV)
    meta = json.loads((output / "stepwise.json").read_text())
    assert meta["resumed_from_step"] >= 4
    assert not output.with_name("resumed.partial").exists()
    # Steps logged after the snapshot were trained again, and are in the log once.
    steps = [e["step"] for e in json.loads((output / "training_log.json").read_text())["train"]]
    assert steps == sorted(set(steps)) and steps[-1] == meta["steps"]


def test_two_process_training_with_gloo(files):
    output = files / "ddp"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", "29533", "-m", "active_learning.cli", "train",
               "--train", str(files / "train.jsonl"), "--output", str(output), *FAST]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((output / "stepwise.json").read_text())
    assert meta["world_size"] == 2 and meta["steps"] > 0
    assert json.loads((output / "training_log.json").read_text())["train"][-1]["step"] == meta["steps"]
    AutoModelForTokenClassification.from_pretrained(output)


@pytest.mark.heavy
# Two pretrainings and two trainings on one thread: about half an hour on a quiet machine.
@pytest.mark.timeout(3600)
def test_content_beats_position_only(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    from prm_learning import blank, records

    from active_learning.config import PretrainConfig, TrainConfig
    from active_learning.data import load_examples
    from active_learning.pretrain import pretrain
    from active_learning.train import train

    # The recipe of bench/prm_learning.py at fixed step counts, never a time budget: a loaded
    # machine then trains as much, only slower. Miscopied values and false remarks; the
    # synthetic data gives a step's place and length no hint of its rating, so the position-only
    # model stays near chance.
    kinds = ("carry", "remark")
    reference = records(3200, 1, seed=3, errors=kinds, error_rate=0.0)
    train_records = records(250, 4, seed=1, errors=kinds)
    eval_records = records(100, 4, seed=2, errors=kinds)
    # Many passes over few labels at 384 tokens, as in a simulated round (active_learning.simulate).
    # One pass over 4,800 records cut at 256 tokens, after 300 pretraining steps, left the
    # content model at chance (0.53).
    epochs, batch_size, max_length = 5, 16, 384
    auroc, steps = {}, {}
    for name, transform in [("content", lambda r: r), ("position", blank)]:
        base = pretrain(PretrainConfig(output=str(tmp_path / f"{name}-base"), steps=400, seed=0,
                                       max_length=max_length), map(transform, reference))
        config = TrainConfig(output=str(tmp_path / name), base=str(base), epochs=epochs,
                             batch_size=batch_size, learning_rate=1e-3, max_length=max_length,
                             seed=0, lm_loss_weight=1.0, step_token_labels=True, save_every=10**9)
        train(config, [transform(r) for r in train_records], [transform(r) for r in eval_records])
        meta = json.loads((tmp_path / name / "stepwise.json").read_text())
        auroc[name], steps[name] = meta["metrics"]["step_auroc"], meta["steps"]
    assert steps["content"] == steps["position"] == epochs * (len(load_examples(train_records)) // batch_size)
    assert auroc["position"] < 0.56, auroc
    assert auroc["content"] > auroc["position"] + 0.1, auroc


def test_language_targets_leave_out_the_wrong_step():
    from active_learning.data import IGNORE_INDEX, tokenize_example
    from active_learning.tokenizer import STEP_MARKER, build_byte_tokenizer
    from active_learning.train import language_targets

    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    feature = tokenize_example(tokenizer, marker, "Q?", ["ab", "cd"], [1, -1], max_length=64)
    ids, targets = feature["input_ids"], language_targets(feature)
    first, second = feature["markers"]
    # Each token of the problem and of the +1 step (its marker included) is predicted ...
    assert targets[:first] == ids[1:first + 1]
    # ... and none of the -1 step's, nor anything past the end.
    assert targets[first:] == [IGNORE_INDEX] * (second - first + 1)
    assert tokenizer.decode(ids[first + 1:second]) == "cd"


def test_step_token_labels_give_every_token_of_a_rated_step_its_rating():
    from active_learning.data import IGNORE_INDEX, tokenize_example
    from active_learning.tokenizer import STEP_MARKER, build_byte_tokenizer
    from active_learning.train import spread_step_labels

    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    feature = tokenize_example(tokenizer, marker, "Q?", ["ab", "cd", "ef"], [None, 1, -1], max_length=64)
    spread_step_labels(feature)
    labels, (first, second, third) = feature["labels"], feature["markers"]
    assert labels[:first + 1] == [IGNORE_INDEX] * (first + 1)  # problem and the unrated step
    assert labels[first + 1:second + 1] == [2] * (second - first)  # "cd" and its marker: +1
    assert labels[second + 1:third + 1] == [0] * (third - second)  # "ef" and its marker: -1


def test_pretrained_base_reads_like_the_prm_and_trains_one(files, tmp_path):
    from transformers import AutoModelForCausalLM

    reference = tmp_path / "reference.jsonl"
    _cli("synth", "--output", reference, "--problems", 30, "--solutions-per-problem", 1,
         "--error-rate", 0, "--seed", 3)
    records = [json.loads(line) for line in reference.read_text().splitlines()]
    assert len(records) == 30 and all(r["label"]["finish_reason"] == "solution" for r in records)
    base = tmp_path / "base"
    out = json.loads(_cli("pretrain", "--data", reference, "--output", base,
                          "--steps", 3, "--batch-size", 4, "--max-length", 256))
    assert out["output"] == str(base) and not base.with_name("base.partial").exists()
    meta = json.loads((base / "stepwise.json").read_text())
    assert meta["kind"] == "pretrained base" and meta["steps"] == 3
    lm = AutoModelForCausalLM.from_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    ids = tokenizer("Start with 2.\n\n$2 + 3 = 5$.<|step|>", return_tensors="pt")["input_ids"]
    assert lm(input_ids=ids).logits.shape == (1, ids.shape[1], len(tokenizer))

    prm_dir = tmp_path / "prm"
    _cli("train", "--train", files / "train.jsonl", "--eval", files / "eval.jsonl", "--output", prm_dir,
         "--base", base, "--step-token-labels", "--lm-loss-weight", 1, *FAST)
    prm_meta = json.loads((prm_dir / "stepwise.json").read_text())
    assert prm_meta["base"] == base.name and prm_meta["config"]["step_token_labels"] is True
    assert prm_meta["lm_loss_weight"] == 1.0
    # The PRM's backbone starts from the pretrained one: same shapes, weights carried over.
    prm_model = AutoModelForTokenClassification.from_pretrained(prm_dir)
    assert prm_model.config.hidden_size == lm.config.hidden_size


def test_pretrain_refuses_what_it_cannot_build(files, tmp_path, monkeypatch):
    existing = tmp_path / "taken"
    existing.mkdir()
    taken = CliRunner().invoke(prm, ["pretrain", "--data", str(files / "train.jsonl"), "--output", str(existing)])
    assert taken.exit_code != 0 and "never overwritten" in taken.output
    hub = CliRunner().invoke(prm, ["pretrain", "--data", str(files / "train.jsonl"),
                                   "--output", str(tmp_path / "x"), "--base", "org/model"])
    assert hub.exit_code != 0 and "preset" in hub.output
    bogus = CliRunner().invoke(prm, ["pretrain", "--data", str(files / "train.jsonl"),
                                     "--output", str(tmp_path / "x"), "--device", "gpu1"])
    assert bogus.exit_code == 1 and "--device must be auto, cpu, cuda or cuda:N, not gpu1" in bogus.output
    # One process on one device, so any GPU may be named: refused only where there is none.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    absent = CliRunner().invoke(prm, ["pretrain", "--data", str(files / "train.jsonl"),
                                      "--output", str(tmp_path / "x"), "--device", "cuda:1"])
    assert absent.exit_code == 1 and "torch sees no CUDA GPU here" in absent.output
    assert not (tmp_path / "x").exists()


def test_a_diverging_run_stops_with_what_to_change_and_saves_nothing(files, tmp_path):
    # A peak learning rate no model survives: the loss is NaN within a few steps.
    reference = tmp_path / "reference.jsonl"
    _cli("synth", "--output", reference, "--problems", 30, "--solutions-per-problem", 1, "--error-rate", 0)
    base = CliRunner().invoke(prm, ["pretrain", "--data", str(reference), "--output", str(tmp_path / "base"),
                                    "--steps", "6", "--batch-size", "4", "--max-length", "256",
                                    "--learning-rate", "1e30"])
    assert base.exit_code != 0 and "pretraining diverged by step" in base.output
    assert "lower the learning rate (--learning-rate)" in base.output and not list(tmp_path.glob("base*"))
    trained = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"), "--eval",
                                       str(files / "eval.jsonl"), "--output", str(tmp_path / "prm"),
                                       *FAST, "--learning-rate", "1e30"])
    assert trained.exit_code != 0 and "training diverged by step" in trained.output
    # Nothing to resume either: a rerun at a lower rate starts afresh.
    assert not list(tmp_path.glob("prm*"))


def test_pretraining_takes_its_presets_learning_rate_unless_given_one(tmp_path):
    from active_learning.model import PRESETS

    # Larger presets need lower rates: 3e-3 sent the 100m preset to NaN on a GPU.
    rates = [PRESETS[name].pretrain_learning_rate for name in ("tiny", "100m", "500m")]
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == 3
    # The option's help names them, so it must follow the presets.
    shown = PretrainConfig.__dataclass_fields__["learning_rate"].metadata["help"]
    named = {name: float(rate) for name, rate in re.findall(r"(\w+) (\d[\d.]*e-\d+)", shown)}
    assert named == {name: preset.pretrain_learning_rate for name, preset in PRESETS.items()}
    reference = tmp_path / "reference.jsonl"
    _cli("synth", "--output", reference, "--problems", 10, "--solutions-per-problem", 1, "--error-rate", 0)
    for name, given in (("default", []), ("given", ["--learning-rate", "1e-4"])):
        _cli("pretrain", "--data", reference, "--output", tmp_path / name, "--steps", 1, "--batch-size", 2,
             "--max-length", 128, *given)
    recorded = {name: json.loads((tmp_path / name / "stepwise.json").read_text())["config"]["learning_rate"]
                for name in ("default", "given")}
    assert recorded == {"default": PRESETS["tiny"].pretrain_learning_rate, "given": 1e-4}


@pytest.mark.parametrize("flags, message", [
    (["--epochs", "0"], "--epochs must be above 0 (or give --steps), not 0.0"),
    (["--batch-size", "0"], "--batch-size must be 1 or more, not 0"),
    (["--save-every", "0"], "--save-every must be 1 or more, not 0"),
    (["--log-every", "0"], "--log-every must be 1 or more, not 0"),
    (["--learning-rate", "nan"], "--learning-rate must be a number above 0, not nan"),
    (["--eval-fraction", "2"], "--eval-fraction must be from 0 up to, not including, 1, not 2.0"),
    (["--lm-loss-weight", "-1"], "--lm-loss-weight must be 0 or more, not -1.0"),
    (["--time-budget-s", "-1"], "--time-budget-s must be a number of seconds above 0, not -1.0"),
    (["--max-length", "0"], "--max-length must be 1 or more, not 0"),
    (["--device", "bogus"], "--device must be auto, cpu or cuda (for one GPU of several, set "
                            "CUDA_VISIBLE_DEVICES=N; for several, `accelerate launch`), not bogus"),
    (["--device", "cuda:1"], "set CUDA_VISIBLE_DEVICES=N"),
])
def test_a_setting_that_cannot_train_is_refused_by_its_flag_and_leaves_nothing(files, tmp_path, flags, message):
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                      "--output", str(tmp_path / "model"), "--report-to", "none", *flags])
    assert result.exit_code == 1 and message in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_training_on_a_missing_gpu_is_refused_rather_than_run_on_the_cpu(files, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                      "--output", str(tmp_path / "model"), "--device", "cuda"])
    assert result.exit_code == 1 and "torch sees no CUDA GPU here" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_max_length_no_step_fits_in_says_so(files, tmp_path):
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"),
                                      "--output", str(tmp_path / "model"), "--max-length", "4"])
    assert result.exit_code == 1 and "fits in --max-length 4 tokens: raise it" in result.output


def test_examples_no_labeled_step_of_fits_are_left_out_and_said(files, tmp_path):
    # Left out without a word, they were counted as trained on (the round's label count, the
    # card) and overstated the round's planned steps.
    records = [json.loads(line) for line in (files / "train.jsonl").read_text().splitlines()]
    for record in records[:10]:
        # The question keeps half the window; a first step longer than the rest leaves no rated one.
        long = "Think about it. " * 100
        record["question"]["pre_generated_steps"][0] = long + record["question"]["pre_generated_steps"][0]
        for completion in record["label"]["steps"][0]["completions"]:
            completion["text"] = long + completion["text"]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(prm, ["train", "--train", str(tmp_path / "long.jsonl"), "--output",
                                      str(tmp_path / "model"), *map(str, FAST), "--steps", "1", "--eval-fraction", "0"])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "model" / "stepwise.json").read_text())
    assert meta["train_examples_left_out"] == 10 and meta["train_examples"] == len(records) - 10
    assert (f"10 of {len(records)} examples have no labeled step within --max-length 256 tokens: left out; "
            "raise it to train on them") in result.output
    assert (f"{len(records) - 10} labeled examples (10 more left out: no labeled step within its max_length)"
            in (tmp_path / "model" / "README.md").read_text())


def test_a_max_length_beyond_the_bases_positions_trains_at_them_and_says_so(files, tmp_path):
    from active_learning.bases import PRESETS

    positions = PRESETS["tiny"].max_positions
    result = CliRunner().invoke(prm, ["train", "--train", str(files / "train.jsonl"), "--output", str(tmp_path / "model"),
                                      *map(str, FAST), "--steps", "1", "--max-length", str(positions * 2)])
    assert result.exit_code == 0, result.output
    assert f"--max-length {positions * 2} is beyond the base's {positions} positions; training at {positions}" in result.output
    meta = json.loads((tmp_path / "model" / "stepwise.json").read_text())
    assert meta["config"]["max_length"] == positions
    assert f"solutions of up to {positions:,} tokens" in (tmp_path / "model" / "README.md").read_text()


def test_score_and_eval_read_in_the_window_the_checkpoint_was_trained_at(checkpoint):
    # The card's metrics were measured at the training --max-length: eval reproduces them by default.
    from active_learning.cli import _load

    assert _load(str(checkpoint), "cpu", None)[2] == 256
    assert _load(str(checkpoint), "cpu", 512)[2] == 512


def _broken(checkpoint: Path, tmp_path: Path, damage) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    damage(copy)
    return copy


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "tokenizer.json").unlink(), "has no tokenizer files"),
    (lambda d: (d / "config.json").unlink(), "is not a checkpoint: it has no config.json"),
    (lambda d: (d / "model.safetensors").write_bytes(b"\x01\x02"), "cannot load the checkpoint"),
    (lambda d: (d / "stepwise.json").write_text("{"), "cannot load the checkpoint"),
    # A config whose head no longer matches its weights: said, not transformers' size advice.
    (lambda d: (d / "config.json").write_text(json.dumps(
        {**json.loads((d / "config.json").read_text()), "id2label": {"0": "a", "1": "b"}, "label2id": {"a": 0, "b": 1}})),
     "is not a PRM checkpoint: its head has 2 classes, not 3"),
])
def test_scoring_refuses_a_checkpoint_it_cannot_read_whole(files, checkpoint, tmp_path, damage, message):
    broken = _broken(checkpoint, tmp_path, damage)
    for command in (["score", "--input", files / "eval.jsonl", "--output", tmp_path / "scores.jsonl"],
                    ["eval", files / "eval.jsonl"]):
        result = CliRunner().invoke(prm, [str(a) for a in [*command, "--model", broken]])
        assert result.exit_code == 1 and message in result.output, result.output
        assert not (tmp_path / "scores.jsonl").exists()


def test_scoring_refuses_a_language_model_for_a_prm(files, tmp_path):
    tokenizer = build_byte_tokenizer()
    lm = tmp_path / "lm"
    Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)).save_pretrained(lm)
    tokenizer.save_pretrained(lm)
    result = CliRunner().invoke(prm, ["eval", str(files / "eval.jsonl"), "--model", str(lm)])
    assert result.exit_code == 1 and "is not a PRM checkpoint: its head has 2 classes, not 3" in result.output


@pytest.mark.parametrize("flags, message", [
    (["--device", "bogus"], "unknown device 'bogus'"),
    (["--max-length", "0"], "Invalid value for '--max-length'"),
    (["--output", "/no/such/dir/scores.jsonl"], "cannot write /no/such/dir/scores.jsonl: no directory /no/such/dir"),
    (["--output", "-"], "writing to standard output is not supported: name a file"),
])
def test_scoring_refuses_bad_flags_before_loading(files, checkpoint, tmp_path, flags, message):
    output = ["--output", str(tmp_path / "scores.jsonl")] if "--output" not in flags else []
    result = CliRunner().invoke(prm, ["score", "--model", str(checkpoint), "--input", str(files / "eval.jsonl"),
                                      *output, *flags])
    assert result.exit_code in (1, 2) and message in result.output, result.output
    assert "Traceback" not in result.output


def test_scoring_that_fails_partway_leaves_the_earlier_output_as_it_was(files, checkpoint, tmp_path, monkeypatch):
    import active_learning.score as score

    def failing(*args, **kwargs):
        yield next(real(*args, **kwargs))
        raise RuntimeError("CUDA out of memory")

    real = score.iter_scores
    monkeypatch.setattr(score, "iter_scores", failing)
    output = tmp_path / "scores.jsonl"
    output.write_text("earlier scores\n")
    result = CliRunner().invoke(prm, ["score", "--model", str(checkpoint), "--input", str(files / "eval.jsonl"),
                                      "--output", str(output)])
    assert isinstance(result.exception, RuntimeError)
    assert output.read_text() == "earlier scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.jsonl"]


@pytest.mark.parametrize("output, message", [
    ("-", "writing to standard output is not supported: name a file"),
    (".", "is a directory"),
])
def test_synth_refuses_an_output_that_is_not_a_file_to_write(tmp_path, monkeypatch, output, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(prm, ["synth", "--output", output, "--problems", "2"])
    assert result.exit_code in (1, 2) and message in result.output, result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("counts", [["--problems", "0"], ["--problems", "-3"], ["--solutions-per-problem", "0"]])
def test_synth_refuses_counts_that_make_nothing(tmp_path, counts):
    result = CliRunner().invoke(prm, ["synth", "--output", str(tmp_path / "s.jsonl"), *counts])
    assert result.exit_code == 2 and f"Invalid value for '{counts[0]}'" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_a_max_length_beyond_the_models_positions_is_cut_to_them_and_said(files, checkpoint, tmp_path):
    positions = json.loads((checkpoint / "config.json").read_text())["max_position_embeddings"]
    runner = CliRunner()
    result = runner.invoke(prm, ["score", "--model", str(checkpoint), "--input", str(files / "eval.jsonl"),
                                 "--output", str(tmp_path / "scores.jsonl"), "--max-length", str(positions * 50)])
    assert result.exit_code == 0, result.output
    assert f"beyond the model's {positions} positions; windows are {positions} tokens" in result.output


@pytest.mark.parametrize("command", [["train", "--train"], ["pretrain", "--data"]])
def test_a_checkpoint_is_not_written_to_standard_output(files, tmp_path, monkeypatch, command):
    # `-` made a checkpoint directory named "-" in the working directory.
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(prm, [*command, str(files / "train.jsonl"), "--output", "-"])
    assert result.exit_code == 1 and "a checkpoint is a directory, not standard output: name one" in result.output
    assert list(tmp_path.iterdir()) == []
