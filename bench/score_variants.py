"""Where compiled scoring loses time on a GPU: the product's path (`iter_scores`) against
variants that each change one thing, and the forward passes alone. For the 50% MFU goal of
issue 20, with the 500m preset in bf16 and the repeated layer compiled:

    python bench/score_variants.py --output bench/results/gpu_score_variants.json

- `as_is`: `iter_scores` at 65,536 tokens a batch, chunks of 256 doubling to 4,096;
- `no_ramp`: every chunk 4,096 (the ramp's small chunks each fit one batch spanning all lengths);
- `ramp_length_1.2`: a batch also closes at 1.2 times its shortest row's length (less padding,
  smaller batches); `no_ramp_131072`, `no_ramp_length_1.2_131072`: twice the budget;
- `pretokenized`: `no_ramp` with every chunk tokenised beforehand, so no thread tokenises beside
  the GPU (the tokenising thread's share of the gap);
- `no_mask_check`: `no_ramp` with transformers' packed-sequence check skipped (it reads a flag
  back from the GPU at every forward pass, so the host runs at most a batch ahead); Qwen2 takes a
  ready mask mapping, and none means plain causal attention, the same scores;
- `collector_as_before`: `no_ramp` with the garbage collector walking the whole process again
  (`iter_scores` freezes the older objects while it streams);
- `packed_sdpa_R`, `packed_flex_R`: `no_ramp` with no padding between solutions: each batch's
  windows laid end to end in rows of R tokens (first fit, longest first; only a row's tail is
  padding), each starting its positions again at 0. transformers reads the restarts as packed
  sequences and keeps each solution's attention to itself: a block-diagonal mask for SDPA (no
  flash kernel, and every row's whole R x R computed), a block mask for FlexAttention (blocks of
  other solutions skipped). The padding the product pays (`padding`, beside each variant) against
  attention that costs more;
- `device_bound_N`: the forward passes alone over batches padded and on the GPU beforehand, the
  rate the product's path would reach if the host never made the GPU wait;
  `device_bound_packed_flex_8192` the same for `packed_flex_8192`'s rows.

Each scores the same 8,192 synthetic solutions once after a warm-up; MFU counts real tokens at 2
FLOPs a parameter, as bench/prm_throughput.py does. `--smoke` runs every variant with the tiny
preset on the CPU, uncompiled, so that a lease's minutes are not spent finding a broken one.
"""

import argparse
import gc
import json
import time
from pathlib import Path

import numpy as np
import torch

import active_learning.score as score
from active_learning.data import load_solutions
from active_learning.model import compile_layers, load_base, needs_padding_mask
from active_learning.score import to_device
from active_learning.synthetic import iter_candidates, to_prm800k
from bench_results import run_header, write_results
from prm_throughput import bf16_peak, sync_device

CHUNK = 4096


def length_capped(tolerance: float):
    """`score.token_batches`, closing a batch also once a row is `tolerance` times its first's length."""
    def batches(lengths, batch_tokens):
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        batch: list[int] = []
        for i in order:
            if batch and (lengths[i] * (len(batch) + 1) > batch_tokens or lengths[i] > tolerance * lengths[batch[0]]):
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch
    return batches


class WithoutMaskCheck(torch.nn.Module):
    """The PRM given a ready mask mapping with no mask in it: transformers then builds none and
    skips the check that reads the GPU back."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        # The scorer reads the positions the model was built for from its config.
        self.config = model.config

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids=input_ids, attention_mask={"full_attention": None})


def packed_rows(lengths: list[int], row_tokens: int) -> list[list[int]]:
    """Indices laid into rows of at most `row_tokens` tokens, longest first, each into the first
    row it fits (a window longer than a row gets one of its own)."""
    rows: list[list[int]] = []
    space: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__, reverse=True):
        row = next((r for r, free in enumerate(space) if free >= lengths[i]), None)
        if row is None:
            rows.append([])
            space.append(row_tokens)
            row = len(rows) - 1
        rows[row].append(i)
        space[row] -= lengths[i]
    return rows


def packed_batches(windows: list[dict], pad_id: int, row_tokens: int, batch_tokens: int):
    """(input ids, position ids, marks) per batch: the windows packed into rows of `row_tokens`
    (or the longest window's length), as many rows a batch as `batch_tokens` holds; each mark is
    (window, step, row, position) of a marker read."""
    width = max(row_tokens, max(len(w["input_ids"]) for w in windows))
    rows = packed_rows([len(w["input_ids"]) for w in windows], width)
    per_batch = max(1, batch_tokens // width)
    for start in range(0, len(rows), per_batch):
        batch = rows[start:start + per_batch]
        ids = np.full((len(batch), width), pad_id, dtype=np.int64)
        # Padding at a row's end counts on from 0 too: a sequence of its own, read by nothing.
        positions = np.tile(np.arange(width), (len(batch), 1))
        marks = []
        for r, row in enumerate(batch):
            at = 0
            for i in row:
                tokens = windows[i]["input_ids"]
                ids[r, at:at + len(tokens)] = tokens
                positions[r, at:] = np.arange(width - at)
                marks += [(i, step, r, at + position) for step, position in windows[i]["reads"]]
                at += len(tokens)
        yield ids, positions, marks


def packed_queue(row_tokens: int):
    """`score._queue_chunk` with each batch's windows packed (`packed_batches`); the same reads,
    in another order."""
    @torch.inference_mode()
    def queue_chunk(model, pad_id, chunk, windows, owners, batch_tokens, padding_mask):
        if padding_mask:
            # Without a mask, an encoder would read its neighbours in the row both ways.
            raise ValueError("packing needs a causal backbone; this model takes a padding mask")
        if not windows:
            return score._to_host(chunk, [], [], torch.device("cpu"))
        device = next(model.parameters()).device
        reads, probs = [], []
        for ids, positions, marks in packed_batches(windows, pad_id, row_tokens, batch_tokens):
            logits = model(input_ids=to_device(torch.from_numpy(ids), device),
                           position_ids=to_device(torch.from_numpy(positions), device)).logits
            at_rows = to_device(torch.tensor([m[2] for m in marks]), device)
            at_positions = to_device(torch.tensor([m[3] for m in marks]), device)
            probs.append(logits[at_rows, at_positions].float().softmax(-1))
            reads += [(owners[i], step) for i, step, _, _ in marks]
        return score._to_host(chunk, reads, probs, device)
    return queue_chunk


def padding_share(windows: list[dict], batch_tokens: int, row_tokens: int | None = None) -> float:
    """The share of the tokens computed that are padding, for the chunks and batches that
    `active_learning.score` makes as it stands (a variant's changes in place), or with each batch
    packed into rows of `row_tokens`. (The synthetic solutions each fit one window.)"""
    real = padded = 0
    for chunk in score.in_chunks(windows, CHUNK, first=score.FIRST_CHUNK):
        lengths = [len(w["input_ids"]) for w in chunk]
        real += sum(lengths)
        if row_tokens is None:
            padded += sum(len(b) * max(lengths[i] for i in b) for b in score.token_batches(lengths, batch_tokens))
        else:
            width = max(row_tokens, max(lengths))
            padded += len(packed_rows(lengths, width)) * width
    return round(1 - real / padded, 4)


class CollectorAsBefore:
    """`gc` as `iter_scores` sees it, freezing nothing."""

    get_freeze_count = staticmethod(lambda: 0)
    freeze = unfreeze = staticmethod(lambda: None)


def pretokenized(model, tokenizer, solutions, batch_tokens):
    """`iter_scores`' queueing and read-back over chunks tokenised beforehand, the older objects
    frozen as it freezes them."""
    chunks = [solutions[i:i + CHUNK] for i in range(0, len(solutions), CHUNK)]
    laid_out = [score._windows(tokenizer, chunk, 2048) for chunk in chunks]
    sync_device(next(model.parameters()).device)
    gc.freeze()
    started = time.perf_counter()
    queued = None
    for chunk, (windows, owners) in zip(chunks, laid_out):
        launched = score._queue_chunk(model, tokenizer.pad_token_id, chunk, windows, owners, batch_tokens,
                                      needs_padding_mask(model))
        if queued is not None:
            queued.read_back(True)
        queued = launched
    queued.read_back(True)
    sync_device(next(model.parameters()).device)
    seconds = time.perf_counter() - started
    gc.unfreeze()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", type=int, default=8192)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true",
                        help="Every variant at a tiny size on the CPU, uncompiled, to check the wiring "
                             "before a lease; its figures mean nothing.")
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA GPU; bench/prm_throughput.py measures scoring on a CPU")
    base, device, dtype = ("tiny", "cpu", torch.float32) if args.smoke else ("500m", "cuda", torch.bfloat16)
    if args.smoke:
        args.solutions = min(args.solutions, 48)

    def build(attention: str):
        torch.manual_seed(0)
        built, tokenizer = load_base(base, attn=attention)
        built.to(device, dtype).eval()
        if not args.smoke:
            compile_layers(built)
        return built, tokenizer

    records = [to_prm800k(c) for c in iter_candidates(args.solutions // 4 + 1, 4, seed=0)]
    solutions = load_solutions(records)[:args.solutions]
    model, tokenizer = build("sdpa")
    params = sum(p.numel() for p in model.parameters())
    windows, _ = score._windows(tokenizer, solutions, 2048)
    real = sum(len(w["input_ids"]) for w in windows)
    gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = bf16_peak(gpu)
    results: dict = {**run_header("score_variants"), "device": gpu, "smoke": args.smoke,
                     "torch": torch.__version__, "solutions": len(solutions), "real_tokens": real, "variants": {}}

    def record(name: str, seconds: float, **extra) -> None:
        results["variants"][name] = {"seconds": round(seconds, 3), "tokens_per_s": round(real / seconds),
                                     "mfu": round(2 * params * real / seconds / peak, 4) if peak else None, **extra}
        print(name, results["variants"][name], flush=True)
        write_results(args.output, results)

    def timed_stream(scorer, budget: int) -> float:
        list(score.iter_scores(scorer, tokenizer, solutions[:512], batch_tokens=budget))  # new shapes, warm
        sync_device(device)
        started = time.perf_counter()
        list(score.iter_scores(scorer, tokenizer, solutions, batch_tokens=budget))
        sync_device(device)
        return time.perf_counter() - started

    list(score.iter_scores(model, tokenizer, solutions[:256]))  # compiles
    flex: list = []

    def flex_model():
        """The same preset with FlexAttention, loaded on first use: a card or torch without it
        fails the variants that use it, and only those."""
        if not flex:
            flex.append(build("flex_attention")[0])
        return flex[0]

    product = {"FIRST_CHUNK": score.FIRST_CHUNK, "token_batches": score.token_batches, "gc": score.gc,
               "_queue_chunk": score._queue_chunk}
    no_ramp = {"FIRST_CHUNK": CHUNK}
    variants = {  # (what scores, made on first use, its batch budget, what changes in active_learning.score)
        "as_is": (lambda: model, 65536, {}),
        "no_ramp": (lambda: model, 65536, no_ramp),
        "ramp_length_1.2": (lambda: model, 65536, {"token_batches": length_capped(1.2)}),
        "no_ramp_131072": (lambda: model, 131072, no_ramp),
        "no_ramp_length_1.2_131072": (lambda: model, 131072, no_ramp | {"token_batches": length_capped(1.2)}),
        "no_mask_check": (lambda: WithoutMaskCheck(model), 65536, no_ramp),
        "collector_as_before": (lambda: model, 65536, no_ramp | {"gc": CollectorAsBefore}),
        "packed_sdpa_2048": (lambda: model, 65536, no_ramp | {"_queue_chunk": packed_queue(2048)}),
        "packed_flex_2048": (flex_model, 65536, no_ramp | {"_queue_chunk": packed_queue(2048)}),
        "packed_flex_8192": (flex_model, 65536, no_ramp | {"_queue_chunk": packed_queue(8192)}),
    }
    try:
        for name, (scorer, budget, changes) in variants.items():
            for attribute, value in (product | changes).items():
                setattr(score, attribute, value)
            row_tokens = int(name.rsplit("_", 1)[1]) if name.startswith("packed") else None
            if args.smoke:
                # Compiled afresh: on a CPU, torch 2.13's C++ FlexAttention fails to compile again
                # for another row length (packed_flex_8192 after packed_flex_2048). Nothing else
                # is compiled in --smoke, so nothing else is lost.
                torch._dynamo.reset()
            try:
                seconds = timed_stream(scorer(), budget)
            except Exception as e:  # noqa: BLE001 - one variant failing must not cost the lease the rest
                results["variants"][name] = {"error": f"{type(e).__name__}: {e}"[:1000]}
                print(name, results["variants"][name], flush=True)
                write_results(args.output, results)
                continue
            record(name, seconds, padding=padding_share(windows, budget, row_tokens))
        for attribute, value in product.items():
            setattr(score, attribute, value)
        record("pretokenized", pretokenized(model, tokenizer, solutions, 65536))
    finally:
        for attribute, value in product.items():
            setattr(score, attribute, value)

    def device_bound(name: str, scorer, inputs: list[dict]) -> None:
        padded = sum(batch["input_ids"].numel() for batch in inputs)
        with torch.inference_mode():
            for batch in inputs[:3]:
                scorer(**batch)
            sync_device(device)
            started = time.perf_counter()
            for batch in inputs:
                scorer(**batch)
            sync_device(device)
        seconds = time.perf_counter() - started
        record(name, seconds, padded_tokens=padded,
               mfu_of_padded=round(2 * params * padded / seconds / peak, 4) if peak else None)

    padding_mask = needs_padding_mask(model)
    for budget in (65536, 131072):
        inputs = []
        for start in range(0, len(windows), CHUNK):
            chunk = windows[start:start + CHUNK]
            for batch in score.token_batches([len(w["input_ids"]) for w in chunk], budget):
                inputs.append(score.pad_batch([chunk[i] for i in batch], tokenizer.pad_token_id, device, padding_mask))
        device_bound(f"device_bound_{budget}", model, inputs)
    # The packed rows' kernels alone: what FlexAttention's block mask costs, apart from the host.
    try:
        packed = [{"input_ids": torch.from_numpy(ids).to(device), "position_ids": torch.from_numpy(positions).to(device)}
                  for start in range(0, len(windows), CHUNK)
                  for ids, positions, _ in packed_batches(windows[start:start + CHUNK], tokenizer.pad_token_id,
                                                          8192, 65536)]
        device_bound("device_bound_packed_flex_8192", flex_model(), packed)
    except Exception as e:  # noqa: BLE001 - as the stream variants: recorded, not fatal
        results["variants"]["device_bound_packed_flex_8192"] = {"error": f"{type(e).__name__}: {e}"[:1000]}
        write_results(args.output, results)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
