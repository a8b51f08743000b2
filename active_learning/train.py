"""Train a PRM on step labels: one process on CPU, or many through `accelerate launch`/`torchrun`.

Crash safety: everything is written under `<output>.partial/`; a resumable snapshot of the
training state (weights, optimizer, RNG) lands there every `save_every` steps, and the finished
checkpoint is renamed to `<output>` only once it is complete and evaluated. Running the same
command again after a kill resumes from the last snapshot; a reader never sees half a model.
"""

import dataclasses
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration, set_seed

from active_learning.config import BOOTSTRAP_SAMPLES, TrainConfig
from active_learning.data import (DEFAULT_SOURCE_WEIGHTS, IGNORE_INDEX, Example, PlacedRecords, encode_solutions,
                                  load_examples, load_solutions, parse_source_weights, placed_records,
                                  snapshot_hash, split_by_problem, tokenize_example)
from active_learning.evaluate import evaluate, evaluate_examples
from active_learning.files import replace_whole
from active_learning.grading import GRADER_VERSION
from active_learning.model import (LABEL2ID, compile_layers, is_preset, load_base, marker_id, needs_padding_mask,
                                   resolve_device, save_checkpoint)
from active_learning.score import pad_batch, to_device, token_batches, within_positions
from active_learning.tokenizer import STEP_MARKER
from active_learning.tracking import TRAINING_LOG_FILE, TrainingLog, resolve_report_to, scalars

PROGRESS_FILE = "progress.json"
# The run's plan, written before its first step: the steps it will take and the examples it
# trains on, which a caller's own count (labels, before any is found too long) only estimates.
PLAN_FILE = "plan.json"
LOGS_DIR = "logs"  # the tracker's files (TensorBoard events), inside the checkpoint at the end


def epoch_batches(lengths: list[int], batch_size: int, seed: int,
                  batch_tokens: int | None = None) -> list[list[int]]:
    """Shuffled batches of similar length: sort within windows of about 50 batches, so padding is
    small but the order stays random. `batch_size` sequences a batch, or with `batch_tokens` as
    many as fit that many tokens, padding included. Deterministic in `seed`, which makes
    resuming exact."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    if batch_tokens is None:
        window = batch_size * 50
    else:
        window = max(1, 50 * batch_tokens * len(lengths) // max(1, sum(lengths)))
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window], key=lengths.__getitem__)
        if batch_tokens is None:
            batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        else:
            batches += [[chunk[i] for i in batch]
                        for batch in token_batches([lengths[i] for i in chunk], batch_tokens)]
    rng.shuffle(batches)
    return batches


def batches_per_epoch(lengths: list[int], config: TrainConfig) -> int:
    """Batches in the first epoch, which sets the steps that `epochs` means (with token budgets
    a later epoch may pack into a batch more or fewer)."""
    return len(epoch_batches(lengths, config.batch_size, config.seed * 1000, config.batch_tokens))


def planned_steps(config: TrainConfig, epoch_batches: int, world: int = 1) -> int:
    """The optimizer steps a run takes: `steps`, or `epochs` passes over an epoch of
    `epoch_batches` batches shared by `world` processes."""
    return config.steps or math.ceil(config.epochs * max(1, epoch_batches) / world)


def process_batches(lengths: list[int], config: TrainConfig, world: int, rank: int,
                    start_step: int) -> Iterator[list[int]]:
    """This process's batches from `start_step` on, endlessly. The epochs' batches follow one
    another in one stream, and process `rank` takes every `world`-th from its own place: at each
    step every process has a batch (so gradient all-reduce never waits for one without), no batch
    of any epoch is left out, and a resumed run picks up the stream where the snapshot left it."""
    local = start_step * world + rank  # the stream position, counted from this epoch's start
    epoch = 0
    while True:
        batches = epoch_batches(lengths, config.batch_size, config.seed * 1000 + epoch, config.batch_tokens)
        yield from batches[local::world]
        # Where this process's next batch lies in the next epoch.
        local = (local - len(batches)) % world if local < len(batches) else local - len(batches)
        epoch += 1


def scheduled_learning_rate(peak: float, warmup_fraction: float, progress: float) -> float:
    """Linear warm-up, then linear decay to zero at progress 1."""
    if progress < warmup_fraction:
        return peak * max(progress / warmup_fraction, 0.01)
    return peak * max(0.0, 1 - progress) / (1 - warmup_fraction)


def mixed_precision(config: TrainConfig, cuda: bool) -> str | None:
    """The flag when given; else None, for Accelerator to read what `accelerate launch` hands
    over from `accelerate config` (ACCELERATE_MIXED_PRECISION); else bf16 autocast on CUDA,
    which keeps fp32 master weights, so small updates are not rounded away."""
    if config.mixed_precision is not None:
        return config.mixed_precision
    if "ACCELERATE_MIXED_PRECISION" in os.environ:
        return None
    return "bf16" if cuda else "no"


def _write_json(path: Path, payload: dict) -> None:
    replace_whole(path, json.dumps(payload, indent=2, default=str) + "\n")


def _save_snapshot(accelerator: Accelerator, work: Path, step: int, seconds: float,
                   fingerprint: dict) -> None:
    state = work / f"state-{step}"
    accelerator.save_state(state)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        _write_json(work / PROGRESS_FILE, {"step": step, "seconds": seconds, "state": state.name,
                                           **fingerprint})
        for old in work.glob("state-*"):
            if old != state:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def _resume(accelerator: Accelerator, work: Path, fingerprint: dict) -> tuple[int, float]:
    """(steps done, seconds spent) of the last snapshot, after loading its state."""
    progress_path = work / PROGRESS_FILE
    if not progress_path.exists():
        return 0, 0.0
    progress = json.loads(progress_path.read_text())
    if any(progress[key] != value for key, value in fingerprint.items()):
        raise ValueError(f"{work} holds a run with other data or settings; remove it to start over")
    accelerator.load_state(work / progress["state"])
    return progress["step"], progress["seconds"]


def language_loss_weight(config: TrainConfig) -> float:
    if config.lm_loss_weight is not None:
        return config.lm_loss_weight
    return 1.0 if is_preset(config.base) else 0.0


def language_targets(feature: dict) -> list[int]:
    """Next-token targets for the auxiliary loss: every token of the problem and of each step
    not rated -1 is predicted from the ones before it. A -1 step's tokens are left out, so that
    the model never learns a wrong step as the way a solution goes on."""
    ids, labels = feature["input_ids"], feature["labels"]
    targets = ids[1:] + [IGNORE_INDEX]
    start = feature["prompt_length"]
    for marker in feature["markers"]:
        if marker < 0:
            break
        if labels[marker] == LABEL2ID["-1"]:
            # targets[t] is token t + 1: these are the tokens start..marker.
            targets[start - 1:marker] = [IGNORE_INDEX] * (marker - start + 1)
        start = marker + 1
    return targets


def spread_step_labels(feature: dict) -> None:
    """Give every token of a rated step its step's class (see TrainConfig.step_token_labels)."""
    labels, start = feature["labels"], feature["prompt_length"]
    for marker in feature["markers"]:
        if marker < 0:
            break
        if labels[marker] != IGNORE_INDEX:
            labels[start:marker] = [labels[marker]] * (marker - start)
        start = marker + 1


class TrainingStopped(RuntimeError):
    """The caller's `stop` asked for it (a cancelled round): training ends where it stands,
    its work folder kept for whoever may resume it."""


class TrainingDiverged(RuntimeError):
    """The loss went NaN or infinite: every weight after it is NaN, so nothing is saved."""


def _stop_if_diverged(mean_loss: float, step: int, config: TrainConfig, work: Path, main: bool) -> None:
    """Fail with what to change rather than write a checkpoint that scores NaN (read at log
    time only, to keep the GPU unsynchronised). The work folder goes too: its snapshots may be
    NaN already, and a rerun with another rate could not resume from them anyway."""
    if not math.isfinite(mean_loss):
        if main:
            shutil.rmtree(work, ignore_errors=True)
        raise TrainingDiverged(f"training diverged by step {step} (mean loss {mean_loss}) with peak learning rate "
                           f"{config.learning_rate:g}: lower the learning rate (--learning-rate), or check the base for NaN weights")


def weighted_step_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labeled tokens, each token counting its example's weight, divided
    by the weights counted: with every weight 1, the token-classification model's own mean."""
    per_token = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX,
                                reduction="none").view_as(labels)
    token_weights = weights[:, None] * (labels != IGNORE_INDEX)
    return (per_token * token_weights).sum() / token_weights.sum().clamp_min(1e-12)


def _features(examples: list[Example], tokenizer, config: TrainConfig, language: bool) -> list[dict]:
    marker = marker_id(tokenizer)
    encoded = encode_solutions(tokenizer, ((e.prompt, e.steps) for e in examples))
    features = [tokenize_example(tokenizer, marker, e.prompt, e.steps, e.labels, config.max_length, ids)
                | {"weight": e.weight} for e, ids in zip(examples, encoded)]
    features = [f for f in features if any(t != IGNORE_INDEX for t in f["labels"])]
    if not features:
        labeled = sum(any(label is not None for label in e.labels) for e in examples)
        raise ValueError("no labeled steps to train on" if not labeled else
                         f"no labeled step of {labeled} solutions fits in --max-length {config.max_length} "
                         "tokens: raise it")
    if config.step_token_labels:
        for f in features:
            spread_step_labels(f)
    if language:
        for f in features:
            f["lm_labels"] = language_targets(f)
    return features


def train(config: TrainConfig, train_source: str | Path | Iterable[dict],
          eval_source: str | Path | Iterable[dict] | None = None,
          stop: Callable[[], bool] | None = None) -> Path:
    """Train and write a checkpoint directory to `config.output`; returns its path.

    Sources are PRM800K or TRL JSONL paths, or in-memory record dicts. Without `eval_source`,
    `config.eval_fraction` of the problems are held out for validation. `stop`, asked before
    every optimizer step, raises TrainingStopped once it answers true; it is for one-process
    callers, since processes that stopped apart would wait for each other forever.
    """
    config.check()
    cuda = resolve_device(config.device).startswith("cuda")
    tracker = resolve_report_to(config.report_to)
    output = Path(config.output)
    if output.exists():
        raise FileExistsError(f"{output} exists; checkpoints are never overwritten")
    work = output.with_name(output.name + ".partial")
    accelerator = Accelerator(
        cpu=not cuda, mixed_precision=mixed_precision(config, cuda), log_with=tracker,
        project_config=ProjectConfiguration(project_dir=str(work), logging_dir=str(work / LOGS_DIR)))
    set_seed(config.seed)

    weights = parse_source_weights(config.source_weights) if config.source_weights is not None else None
    examples = load_examples(train_source, DEFAULT_SOURCE_WEIGHTS if weights is None else weights)
    if not any(label is not None for e in examples for label in e.labels):
        named = f"{train_source}: " if isinstance(train_source, (str, Path)) else ""
        raise ValueError(f"{named}no labeled steps to train on")
    held_out, eval_records = [], None
    if eval_source is None:
        examples, held_out = split_by_problem(examples, config.eval_fraction, config.seed)
    else:
        placed = PlacedRecords(placed_records(eval_source))
        eval_records = [record for _, record in placed]
        if isinstance(eval_source, (str, Path)):
            # Read now as the evaluation will: a bad file must not cost a training first. (A
            # round's held-out records come from the database, and may hold no label yet.)
            if not load_examples(placed):
                raise ValueError(f"{eval_source}: no labeled steps to evaluate on")
            load_solutions(placed)
    # Before anything is written: a base that cannot be read (no tokenizer, say) leaves no trace.
    model, tokenizer = load_base(config.base)
    positions = within_positions(model, config.max_length)
    if positions < config.max_length:
        # Past the base's positions learned ones fail and rotary ones are read where they never
        # were in pretraining: cut to them, as scoring does, and say so (the card says so too).
        if accelerator.is_main_process:
            print(json.dumps({"note": f"--max-length {config.max_length} is beyond the base's {positions} "
                                      f"positions; training at {positions}"}), file=sys.stderr, flush=True)
        config = dataclasses.replace(config, max_length=positions)
    lm_weight = language_loss_weight(config)
    features = _features(examples, tokenizer, config, lm_weight > 0)
    work.mkdir(parents=True, exist_ok=True)
    # Equal weights keep the model's own loss, which the weighted one then equals anyway.
    weighted = any(f["weight"] != 1.0 for f in features)
    lengths = [len(f["input_ids"]) for f in features]
    world, rank = accelerator.num_processes, accelerator.process_index
    epoch_batches_count = batches_per_epoch(lengths, config)
    epoch_steps = epoch_batches_count / world
    total_steps = planned_steps(config, epoch_batches_count, world)
    fingerprint = {"data_hash": snapshot_hash(examples), "config": config.fingerprint(), "world": world}
    left_out = len(examples) - len(features)
    if accelerator.is_main_process:
        _write_json(work / PLAN_FILE, {"steps": total_steps, "examples": len(features), "left_out": left_out})

    # The auxiliary next-token head reads the backbone's last hidden states, caught by a hook so
    # that the model's own forward (and DDP's gradient sync) stays the one that runs.
    hidden: dict[str, torch.Tensor] = {}
    lm_head, hook = None, None
    parameters = list(model.parameters())
    if lm_weight > 0:
        lm_head = torch.nn.Linear(model.config.get_text_config().hidden_size, len(tokenizer), bias=False)
        parameters += list(lm_head.parameters())
        hook = model.base_model.register_forward_hook(
            lambda _module, _args, out: hidden.__setitem__("last", out.last_hidden_state))
    padding_mask = needs_padding_mask(model)
    if config.compile:
        compile_layers(model)
    # Fused on CUDA: one kernel for every tensor's update instead of several a tensor.
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate,
                                  weight_decay=config.weight_decay, fused=cuda)
    if lm_head is None:
        model, optimizer = accelerator.prepare(model, optimizer)
    else:
        model, lm_head, optimizer = accelerator.prepare(model, lm_head, optimizer)
    start_step, spent = _resume(accelerator, work, fingerprint)
    log = print if accelerator.is_main_process else (lambda *a, **k: None)
    if eval_source is None and not held_out:
        log(json.dumps({"warning": f"no problem of {len({e.problem_id for e in examples})} fell in the held-out "
                                   f"share ({config.eval_fraction}); the checkpoint will have no held-out "
                                   "metrics: give --eval FILE or a larger --eval-fraction"}),
            file=sys.stderr, flush=True)
    if left_out:
        log(json.dumps({"warning": f"{left_out} of {len(examples)} examples have no labeled step within "
                                   f"--max-length {config.max_length} tokens: left out; raise it to train on them"}),
            file=sys.stderr, flush=True)
    if start_step:
        log(json.dumps({"resumed_from_step": start_step}), file=sys.stderr, flush=True)
    history = TrainingLog(work / TRAINING_LOG_FILE, total_steps, start_step)
    accelerator.init_trackers(output.name, config={k: v for k, v in config.published().items()
                                                   if v is not None})

    model.train()
    started, tokens, step = time.monotonic() - spent, 0, start_step
    # Summed on the device and read at log time only: .item() every step would sync the GPU.
    loss_sum, losses = torch.zeros((), device=accelerator.device), 0
    # With the auxiliary next-token loss on, the step loss alone is kept too: it is the PRM's
    # own objective, and the sum, mostly next-token loss, says little about how steps are rated.
    step_loss_sum = torch.zeros((), device=accelerator.device)
    for batch in process_batches(lengths, config, world, rank, start_step):
        if stop is not None and stop():
            raise TrainingStopped(f"training stopped at step {step} of {total_steps}")
        elapsed, progress = time.monotonic() - started, step / total_steps
        if config.time_budget_s is not None:
            if world > 1:
                # Processes must agree on the clock, or their learning rates and their decision to
                # stop would differ (a process left alone would wait forever in all-reduce). One
                # process skips it: reading the result back would wait for the GPU every step.
                elapsed = accelerator.reduce(torch.tensor(elapsed, device=accelerator.device), "max").item()
            progress = max(progress, elapsed / config.time_budget_s)
        if progress >= 1:
            break
        for group in optimizer.param_groups:
            group["lr"] = scheduled_learning_rate(config.learning_rate, config.warmup_fraction, progress)
        inputs = pad_batch([features[i] for i in batch], tokenizer.pad_token_id, accelerator.device, padding_mask)
        targets = inputs.pop("lm_labels", None)
        if weighted:
            labels = inputs.pop("labels")
            example_weights = to_device(torch.tensor([features[i]["weight"] for i in batch]), accelerator.device)
            loss = weighted_step_loss(model(**inputs).logits, labels, example_weights)
        else:
            loss = model(**inputs).loss
        if lm_head is not None:
            step_loss_sum = step_loss_sum + loss.detach().float()
            logits = lm_head(hidden.pop("last"))
            loss = loss + lm_weight * F.cross_entropy(
                logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        # Counted from the lengths on the host: reading the mask back would wait for the GPU.
        tokens += sum(lengths[i] for i in batch) * world
        loss_sum, losses = loss_sum + loss.detach().float(), losses + 1
        if step % config.log_every == 0 or step == total_steps:
            # The mean since the last entry, over every process (all reach this step together).
            mean_loss = accelerator.reduce(loss_sum / losses, "mean").item()
            _stop_if_diverged(mean_loss, step, config, work, accelerator.is_main_process)
            entry = {"step": step, "epoch": round(step / epoch_steps, 2),
                     "loss": round(mean_loss, 4), "lr": optimizer.param_groups[0]["lr"]}
            if lm_head is not None:
                entry["step_loss"] = round(accelerator.reduce(step_loss_sum / losses, "mean").item(), 4)
            loss_sum, step_loss_sum, losses = torch.zeros_like(loss_sum), torch.zeros_like(step_loss_sum), 0
            log(json.dumps({**entry, "of": total_steps,
                            "tokens_per_s": round(tokens / (time.monotonic() - started - spent))}),
                file=sys.stderr, flush=True)
            accelerator.log({"train/loss": mean_loss, "train/learning_rate": entry["lr"],
                             "train/epoch": entry["epoch"],
                             **({"train/step_loss": entry["step_loss"]} if "step_loss" in entry else {})},
                            step=step)
            if accelerator.is_main_process:
                history.add("train", entry)
        if step % config.save_every == 0 and step < total_steps:
            _save_snapshot(accelerator, work, step, time.monotonic() - started, fingerprint)

    if losses:
        _stop_if_diverged(accelerator.reduce(loss_sum / losses, "mean").item(), step, config, work,
                          accelerator.is_main_process)
    if hook is not None:
        hook.remove()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        model = accelerator.unwrap_model(model).eval()
        with accelerator.autocast():
            # With intervals, which the model card shows beside each metric.
            if eval_records is not None:
                metrics = evaluate(model, tokenizer, eval_records, max_length=config.max_length,
                                   bootstrap=BOOTSTRAP_SAMPLES)
            else:
                metrics = evaluate_examples(model, tokenizer, held_out, max_length=config.max_length,
                                            bootstrap=BOOTSTRAP_SAMPLES)
        history.add("eval", {"step": step, "metrics": metrics})
        accelerator.log(scalars(metrics, "eval/"), step=step)
        # Not accelerator.end_training(): that also tears down the process group, which the
        # other processes still need below, and which a caller training again keeps using.
        for tracker_run in accelerator.trackers:
            tracker_run.finish()
        meta = {
            "format": 1, "base": config.base_label(), "step_marker": STEP_MARKER,
            "data_hash": fingerprint["data_hash"], "config": config.published(), "metrics": metrics,
            "train_examples": len(features), "train_examples_left_out": left_out,
            "steps": step, "resumed_from_step": start_step,
            "stopped_by_time_budget": step < total_steps, "world_size": world,
            "lm_loss_weight": lm_weight,
            "train_seconds": round(time.monotonic() - started, 1), "grader_version": GRADER_VERSION,
        }
        final = work / "model"
        shutil.rmtree(final, ignore_errors=True)
        save_checkpoint(model, tokenizer, final, meta, name=output.name)
        # Copied, not moved: a kill before the rename below leaves a run that resumes whole.
        shutil.copy2(work / TRAINING_LOG_FILE, final / TRAINING_LOG_FILE)
        if (work / LOGS_DIR).exists():
            shutil.copytree(work / LOGS_DIR, final / LOGS_DIR)
        os.rename(final, output)
        shutil.rmtree(work)
        log(json.dumps({"output": str(output), "metrics": metrics}), flush=True)
    accelerator.wait_for_everyone()
    return output
