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
- `device_bound_N`: the forward passes alone over batches padded and on the GPU beforehand, the
  rate the product's path would reach if the host never made the GPU wait.

Each scores the same 8,192 synthetic solutions once after a warm-up; MFU counts real tokens at 2
FLOPs a parameter, as bench/prm_throughput.py does.
"""

import argparse
import gc
import json
import time
from pathlib import Path

import torch

import active_learning.score as score
from active_learning.data import load_solutions
from active_learning.model import compile_layers, load_base, needs_padding_mask
from active_learning.synthetic import iter_candidates, to_prm800k
from bench_results import run_header, write_results
from prm_throughput import bf16_peak

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

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids=input_ids, attention_mask={"full_attention": None})


class CollectorAsBefore:
    """`gc` as `iter_scores` sees it, freezing nothing."""

    freeze = unfreeze = staticmethod(lambda: None)


def pretokenized(model, tokenizer, solutions, batch_tokens):
    """`iter_scores`' queueing and read-back over chunks tokenised beforehand, the older objects
    frozen as it freezes them."""
    chunks = [solutions[i:i + CHUNK] for i in range(0, len(solutions), CHUNK)]
    laid_out = [score._windows(tokenizer, chunk, 2048) for chunk in chunks]
    torch.cuda.synchronize()
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
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    gc.unfreeze()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", type=int, default=8192)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA GPU; bench/prm_throughput.py measures scoring on a CPU")
    records = [to_prm800k(c) for c in iter_candidates(args.solutions // 4 + 1, 4, seed=0)]
    solutions = load_solutions(records)[:args.solutions]
    torch.manual_seed(0)
    model, tokenizer = load_base("500m")
    model.to("cuda", torch.bfloat16).eval()
    compile_layers(model)
    params = sum(p.numel() for p in model.parameters())
    windows, _ = score._windows(tokenizer, solutions, 2048)
    real = sum(len(w["input_ids"]) for w in windows)
    gpu = torch.cuda.get_device_name()
    peak = bf16_peak(gpu)
    results: dict = {**run_header("score_variants"), "device": gpu,
                     "torch": torch.__version__, "solutions": len(solutions), "real_tokens": real, "variants": {}}

    def record(name: str, seconds: float, **extra) -> None:
        results["variants"][name] = {"seconds": round(seconds, 3), "tokens_per_s": round(real / seconds),
                                     "mfu": round(2 * params * real / seconds / peak, 4) if peak else None, **extra}
        print(name, results["variants"][name], flush=True)
        write_results(args.output, results)

    def timed_stream(scorer, budget: int) -> float:
        list(score.iter_scores(scorer, tokenizer, solutions[:512], batch_tokens=budget))  # new shapes, warm
        torch.cuda.synchronize()
        started = time.perf_counter()
        list(score.iter_scores(scorer, tokenizer, solutions, batch_tokens=budget))
        torch.cuda.synchronize()
        return time.perf_counter() - started

    list(score.iter_scores(model, tokenizer, solutions[:256]))  # compiles
    product = {"FIRST_CHUNK": score.FIRST_CHUNK, "token_batches": score.token_batches, "gc": score.gc}
    no_ramp = {"FIRST_CHUNK": CHUNK}
    variants = {  # (what scores, its batch budget, what changes in active_learning.score)
        "as_is": (model, 65536, {}),
        "no_ramp": (model, 65536, no_ramp),
        "ramp_length_1.2": (model, 65536, {"token_batches": length_capped(1.2)}),
        "no_ramp_131072": (model, 131072, no_ramp),
        "no_ramp_length_1.2_131072": (model, 131072, no_ramp | {"token_batches": length_capped(1.2)}),
        "no_mask_check": (WithoutMaskCheck(model), 65536, no_ramp),
        "collector_as_before": (model, 65536, no_ramp | {"gc": CollectorAsBefore}),
    }
    try:
        for name, (scorer, budget, changes) in variants.items():
            for attribute, value in (product | changes).items():
                setattr(score, attribute, value)
            record(name, timed_stream(scorer, budget))
        for attribute, value in product.items():
            setattr(score, attribute, value)
        record("pretokenized", pretokenized(model, tokenizer, solutions, 65536))
    finally:
        for attribute, value in product.items():
            setattr(score, attribute, value)
    padding_mask = needs_padding_mask(model)
    for budget in (65536, 131072):
        inputs = []
        for start in range(0, len(windows), CHUNK):
            chunk = windows[start:start + CHUNK]
            for batch in score.token_batches([len(w["input_ids"]) for w in chunk], budget):
                inputs.append(score.pad_batch([chunk[i] for i in batch], tokenizer.pad_token_id, "cuda", padding_mask))
        padded = sum(batch["input_ids"].numel() for batch in inputs)
        with torch.inference_mode():
            for batch in inputs[:3]:
                model(**batch)
            torch.cuda.synchronize()
            started = time.perf_counter()
            for batch in inputs:
                model(**batch)
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        record(f"device_bound_{budget}", seconds, padded_tokens=padded,
               mfu_of_padded=round(2 * params * padded / seconds / peak, 4) if peak else None)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
