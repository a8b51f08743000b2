"""Pretrain a backbone on unlabeled solutions with next-token prediction, as a base for the PRM.

Lightman et al. fine-tuned PRMs from a base model that had already read a great deal of
mathematics; a backbone built from a config has read nothing. One rating per step is too sparse a
signal to teach it arithmetic as well, while predicting every token of right solutions is dense:
each result, each carried value and each remainder is a target. Pretraining on reference (or
otherwise trusted) solutions first, then training the PRM from the pretrained directory, is the
order the paper used.

The text is tokenised by the trainer's own `tokenize_example`, step markers included, so the
backbone reads solutions exactly as the PRM will. The output is a plain `save_pretrained`
directory (a causal LM and its tokenizer) that `stepwise prm train --base DIR` starts from; like
a PRM checkpoint it is written under `<output>.partial/` and renamed only when complete.
"""

import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from active_learning.config import PretrainConfig
from active_learning.data import encode_solutions, load_solutions, tokenize_example
from active_learning.model import (META_FILE, PRESETS, marker_id, needs_padding_mask, preset_config,
                                   resolve_device, save_tokenizer)
from active_learning.score import pad_batch
from active_learning.tokenizer import build_byte_tokenizer
from active_learning.train import TrainingDiverged, scheduled_learning_rate


LOG_EVERY = 50


def _mean_loss(loss_sum: torch.Tensor, losses: int, step: int, peak: float) -> tuple[float, torch.Tensor, int]:
    """The mean loss of the steps since the last reading, and the sum and count started afresh.
    Once a step is not finite every weight after it is NaN: stop before saving a base that would
    train nothing, and say what to change."""
    mean = (loss_sum / losses).item()
    if not math.isfinite(mean):
        raise TrainingDiverged(f"pretraining diverged by step {step} (mean loss {mean}) with peak learning "
                               f"rate {peak:g}: lower the learning rate (--learning-rate)")
    return mean, torch.zeros_like(loss_sum), 0


def pretrain(config: PretrainConfig, source: str | Path | Iterable[dict]) -> Path:
    """Train a preset backbone on the solutions in `source` (any format `load_solutions` reads)
    and write it to `config.output`; returns its path."""
    if config.base not in PRESETS:
        raise ValueError(f"pretraining builds a preset ({', '.join(PRESETS)}), not {config.base!r}")
    config.check()
    device = torch.device(resolve_device(config.device))
    cuda = device.type == "cuda"
    output = Path(config.output)
    if output.exists():
        raise FileExistsError(f"{output} exists; checkpoints are never overwritten")
    solutions = load_solutions(source)
    if not solutions:
        raise ValueError("no solutions to pretrain on")
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    tokenizer = build_byte_tokenizer()
    model = AutoModelForCausalLM.from_config(preset_config(PRESETS[config.base], tokenizer)).to(device)
    marker = marker_id(tokenizer)
    padding_mask = needs_padding_mask(model)
    features = []
    for s, ids in zip(solutions, encode_solutions(tokenizer, ((x.prompt, x.steps) for x in solutions))):
        feature = tokenize_example(tokenizer, marker, s.prompt, s.steps, None, config.max_length, ids)
        # Every token is a target; HF shifts labels by one inside the model.
        features.append({"input_ids": feature["input_ids"], "labels": feature["input_ids"]})
    peak = config.learning_rate or PRESETS[config.base].pretrain_learning_rate
    # Fused on CUDA: one kernel for every tensor's update instead of several a tensor.
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=0.01, fused=cuda)
    rng = random.Random(config.seed)
    order: list[int] = []
    model.train()
    started, step, loss_value = time.monotonic(), 0, math.nan
    # Summed on the device and read every LOG_EVERY steps: .item() every step would make the host
    # wait for the GPU, which then idles while the next step is prepared.
    loss_sum, losses = torch.zeros((), device=device), 0
    while step < config.steps:
        elapsed = time.monotonic() - started
        progress = step / config.steps
        if config.time_budget_s is not None:
            progress = max(progress, elapsed / config.time_budget_s)
        if progress >= 1:
            break
        for group in optimizer.param_groups:
            group["lr"] = scheduled_learning_rate(peak, 0.05, progress)
        if len(order) < config.batch_size:
            order += rng.sample(range(len(features)), len(features))
        batch, order = order[:config.batch_size], order[config.batch_size:]
        inputs = pad_batch([features[i] for i in batch], tokenizer.pad_token_id, device, padding_mask)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            # No key-value cache while training; the saved base keeps it on for generating.
            loss = model(**inputs, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        loss_sum, losses = loss_sum + loss.detach().float(), losses + 1
        if step % LOG_EVERY == 0:
            loss_value, loss_sum, losses = _mean_loss(loss_sum, losses, step, peak)
            print(json.dumps({"step": step, "loss": round(loss_value, 4)}), file=sys.stderr, flush=True)
    if losses:
        loss_value, _, _ = _mean_loss(loss_sum, losses, step, peak)

    work = output.with_name(output.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(work)
    save_tokenizer(tokenizer, work)
    meta = {"format": 1, "kind": "pretrained base", "config": config.to_dict() | {"learning_rate": peak},
            "solutions": len(solutions), "steps": step,
            # The mean of the steps since the last log line (up to LOG_EVERY).
            "last_loss": round(loss_value, 4),
            "train_seconds": round(time.monotonic() - started, 1)}
    (work / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    os.rename(work, output)
    return output
