"""PRM training and scoring throughput against a naive baseline measured in the same run.

Ours: length-bucketed batches (training: `epoch_batches`; scoring: `iter_scores` under a token
budget), torch.inference_mode for scoring, and on CUDA bf16 (autocast for training, bf16 weights
for scoring) with SDPA attention and fused AdamW. Naive: one solution at a time, fp32, in file
order. Tokens are real (non-padding) tokens. Writes bench/results/prm_throughput.json.

Ours is measured in several settings the product offers, one after another on the same model:
training at `--batch-size` sequences a step (the default) and at `--train-batch-tokens` tokens a
step (`prm train --batch-tokens`), scoring at `--batch-tokens` (the CPU default) and at
`--large-batch-tokens` (the CUDA default), each eager and then with the repeated layer compiled (`--compile`). The
headline figures are the best setting's, named in `train_best` and `score_best`.

    python bench/prm_throughput.py                          # CPU, tiny preset, small sizes
    python bench/prm_throughput.py --base 500m --device cuda --solutions 4096 --train-steps 60
"""

import argparse
import itertools
import json
import os
import platform
import resource
import time
import warnings
from pathlib import Path

import torch
from torch._dynamo.utils import counters  # private, but the only count of compiled graphs

from active_learning.config import TrainConfig
from active_learning.data import load_examples, load_solutions, tokenize_example
from active_learning.model import compile_layers, load_base, marker_id, needs_padding_mask, resolve_device
from active_learning.score import iter_scores, pad_batch, token_batches
from active_learning.synthetic import iter_candidates, to_prm800k
from active_learning.threads import use_cpu_threads
from active_learning.train import process_batches
from bench_results import write_results

RESULTS = Path(__file__).parent / "results" / "prm_throughput.json"
# Dense bf16 tensor-core peaks, for model FLOP utilisation.
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}


def bf16_peak(gpu: str | None) -> float | None:
    """The card's dense bf16 peak in FLOP/s, by its name; None for a CPU or a card not listed."""
    return next((v for k, v in PEAK_BF16_FLOPS.items() if gpu and k in gpu), None)


def sync_device(device: str | torch.device) -> None:
    """Until the GPU has done all it was given; nothing to wait for on a CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _train_step(model, optimizer, features, batch, pad_id, device, bf16, padding_mask: bool) -> int:
    """One optimizer step on `batch`, as `train` takes it; returns its real tokens, counted on
    the host so that the GPU is never waited for."""
    inputs = pad_batch([features[j] for j in batch], pad_id, device, padding_mask)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
        loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return sum(len(features[j]["input_ids"]) for j in batch)


def _optimizer(model, device):
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")


# Steps or batches run before timing a compiled model: the first compiles, and a later shape may
# compile again (a guard on a size); compiles while timed are counted in the results.
COMPILED_WARMUP = 3
# Solutions of the streamed scoring profile: chunks of 256, 512 and 256 (score.FIRST_CHUNK).
STREAM_SOLUTIONS = 1024


def _batches(lengths: list[int], batch_size: int, count: int, batch_tokens: int | None = None) -> list[list[int]]:
    """`count` training batches as one training process draws them, over as many epochs as it takes."""
    config = TrainConfig(output="-", batch_size=batch_size, batch_tokens=batch_tokens)
    return list(itertools.islice(process_batches(lengths, config, world=1, rank=0, start_step=0), count))


def _compiles() -> int:
    return counters["stats"]["unique_graphs"]


def _train_tokens_per_s(model, features, batches, pad_id, device, bf16, warmup: int = 1) -> tuple[float, float, int]:
    """(tokens a second, seconds of warm-up, compiles while timed): the first `warmup` steps pay
    for allocation and kernel selection, and a compiled model's for compiling."""
    optimizer = _optimizer(model, device)
    padding_mask = needs_padding_mask(model)
    model.train()
    sync_device(device)
    started = time.perf_counter()
    for batch in batches[:warmup]:
        _train_step(model, optimizer, features, batch, pad_id, device, bf16, padding_mask)
    sync_device(device)
    start, compiles = time.perf_counter(), _compiles()
    tokens = sum(_train_step(model, optimizer, features, batch, pad_id, device, bf16, padding_mask) for batch in batches[warmup:])
    sync_device(device)
    return tokens / (time.perf_counter() - start), start - started, _compiles() - compiles


def _timed(work, device: str) -> float:
    sync_device(device)
    started = time.perf_counter()
    work()
    sync_device(device)
    return time.perf_counter() - started


def _host_waits(work) -> int:
    """How many times one call of `work` makes the host wait for the GPU (a read-back, `.item()`,
    a tensor's truth value): PyTorch warns at each while its sync debug mode is on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            work()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchronizing" in str(w.message) for w in caught)


def _profile(work, device: str, rows: int = 12) -> dict:
    """Where one call of `work` spends its time, after a warm-up call: the share of the wall
    time the GPU is busy (low means the host, not the GPU, sets the pace: launches, Python,
    synchronisation), the operations that take the most of it, and on CUDA how often the host
    waited for the GPU."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    work()
    # The profiler slows the host down, not the kernels: the share is of a call timed without it.
    wall = _timed(work, device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        profiled_wall = _timed(work, device)
    # On CUDA the kernels themselves (operators' device time would count them twice, and a user
    # annotation such as the optimizer's step spans kernels counted already); on CPU the
    # operators' own time.
    kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    events = [e for e in prof.key_averages()
              if e.device_type == kind and not getattr(e, "is_user_annotation", False)]
    busy = (lambda e: e.self_device_time_total) if cuda else (lambda e: e.self_cpu_time_total)
    top = sorted(events, key=busy, reverse=True)[:rows]
    return {
        "wall_s": round(wall, 4),
        "profiled_wall_s": round(profiled_wall, 4),
        "timeline": "GPU kernels" if cuda else "CPU operators",
        "busy_share": round(sum(busy(e) for e in events) / 1e6 / wall, 3),
        "launches": sum(e.count for e in events),
        "host_waits": _host_waits(work) if cuda else None,
        "top": [{"name": e.key, "self_s": round(busy(e) / 1e6, 5), "calls": e.count} for e in top],
    }


def _naive_scoring(model, tokenizer, solutions, device) -> float:
    """Seconds to score `solutions` one at a time in fp32 without bucketing."""
    marker = marker_id(tokenizer)
    model.eval()
    sync_device(device)
    start = time.perf_counter()
    with torch.no_grad():
        for s in solutions:
            f = tokenize_example(tokenizer, marker, s.prompt, s.steps, None, 2048)
            ids = torch.tensor([f["input_ids"]], device=device)
            model(input_ids=ids).logits[0, [m for m in f["markers"] if m >= 0]].softmax(-1).tolist()
    sync_device(device)
    return time.perf_counter() - start


def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _reset_peak_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def _figures(tokens_per_s: float, flops_per_token: float, peak: float | None, device: str, **extra) -> dict:
    return {"tokens_per_s": round(tokens_per_s),
            "mfu": round(flops_per_token * tokens_per_s / peak, 4) if peak else None,
            "peak_memory_mb": round(_peak_memory_mb(device)), **extra}


def _best(settings: dict) -> str:
    return max(settings, key=lambda name: settings[name]["tokens_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="tiny", help="Preset (tiny, 100m, 500m) or directory.")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda.")
    parser.add_argument("--solutions", type=int, default=512, help="Solutions scored by our scorer.")
    parser.add_argument("--naive-solutions", type=int, default=128, help="Solutions scored naively.")
    parser.add_argument("--train-steps", type=int, default=12, help="Batched training steps timed at --batch-size.")
    parser.add_argument("--batch-size", type=int, default=16, help="Training sequences per step (train's default).")
    parser.add_argument("--train-batch-tokens", type=int, default=24576,
                        help="Training tokens per step in the token-budget setting; it runs as many steps "
                             "as make about the same tokens as the --batch-size setting, at least 4.")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="Scoring token budget per batch (score's default on CPU).")
    parser.add_argument("--large-batch-tokens", type=int, default=65536, help="Scoring token budget, the larger setting (score's default on CUDA).")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure every setting with the repeated layer compiled")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch and the tokenizer (default: torch's choice, and every "
                             "core for the tokenizer).")
    parser.add_argument("--profile", action="store_true",
                        help="also profile (torch.profiler) a training step and a scoring batch of the default "
                             "settings, eager and compiled, into the JSON")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    if args.threads:
        use_cpu_threads(args.threads)
    device = resolve_device(args.device)
    bf16 = device == "cuda"

    records = [to_prm800k(c) for c in iter_candidates(max(args.solutions, 64) // 4 + 1, 4, seed=0)]
    solutions = load_solutions(records)[:args.solutions]
    torch.manual_seed(0)
    model, tokenizer = load_base(args.base)
    model.to(device)
    params = sum(p.numel() for p in model.parameters())
    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    peak = bf16_peak(gpu)
    marker = marker_id(tokenizer)
    pad_id = tokenizer.pad_token_id
    examples = load_examples(records)
    features = [tokenize_example(tokenizer, marker, e.prompt, e.steps, e.labels, 2048) for e in examples]
    lengths = [len(f["input_ids"]) for f in features]
    score_lengths = [len(tokenize_example(tokenizer, marker, s.prompt, s.steps, None, 2048)["input_ids"])
                     for s in solutions]
    score_tokens = sum(score_lengths)

    # Training: 6 FLOPs per parameter per token (forward + backward).
    by_size = _batches(lengths, args.batch_size, args.train_steps + COMPILED_WARMUP)
    size_tokens = sum(lengths[i] for batch in by_size[COMPILED_WARMUP:] for i in batch)
    by_tokens = _batches(lengths, args.batch_size, COMPILED_WARMUP + max(4, round(size_tokens / args.train_batch_tokens)),
                         args.train_batch_tokens)
    train_runs = {f"batch_{args.batch_size}": by_size, f"tokens_{args.train_batch_tokens}": by_tokens}
    train: dict[str, dict] = {}
    score: dict[str, dict] = {}
    failed: dict[str, str] = {}
    profiles: dict[str, dict] = {}
    checks: dict[str, dict] = {}
    naive: dict[str, float] = {}
    compiled_layers = None

    def write() -> dict:
        """The results so far, written whole after every setting: a run stopped at its time limit
        keeps what it measured."""
        result = {
            "benchmark": "prm_throughput",
            "date": time.strftime("%Y-%m-%d"),
            "device": gpu or f"CPU ({torch.get_num_threads()} threads, {platform.machine()})",
            "load_average_1m": round(os.getloadavg()[0], 1),
            "base": args.base, "parameters": params, "precision": "bf16" if bf16 else "fp32",
            "settings": vars(args), "compiled_layers": compiled_layers,
            "train": train, "score": score, "failed": failed,
            "peak_memory_kind": "max allocated on the GPU" if device == "cuda" else "max RSS of the process",
            "peak_memory_mb": max((v["peak_memory_mb"] for v in [*train.values(), *score.values()]), default=None),
            "score_checks": checks,
            **({"profiles": profiles} if profiles else {}),
        }
        for part, settings in (("train", train), ("score", score)):
            best = _best(settings) if settings else None
            rate = settings[best]["tokens_per_s"] if best else None
            result |= {f"{part}_best": best, f"{part}_tokens_per_s": rate,
                       f"{part}_tokens_per_s_naive": round(naive[part]) if part in naive else None,
                       f"{part}_speedup": round(rate / naive[part], 2) if best and part in naive else None,
                       f"{part}_mfu": settings[best]["mfu"] if best else None}
        if score:
            result["score_solutions_per_s"] = score[result["score_best"]]["solutions_per_s"]
        if "score_solutions_per_s" in naive:
            result["score_solutions_per_s_naive"] = round(naive["score_solutions_per_s"], 1)
        write_results(Path(args.output), result)
        return result

    def attempt(name: str, work) -> None:
        """Run one setting; one that runs out of GPU memory (a large batch on a smaller card) or
        that the compiler fails on is recorded as failed, and the others still run."""
        try:
            work()
        except Exception as e:  # noqa: BLE001 - recorded in the results, which the suite reads
            failed[name] = f"{type(e).__name__}: {e}"[:1000]
            model.zero_grad(set_to_none=True)
            if device == "cuda":
                torch.cuda.empty_cache()
        write()

    def measure_training(name: str, batches: list, warmup: int) -> None:
        _reset_peak_memory(device)
        rate, warm_s, compiles = _train_tokens_per_s(model, features, batches[COMPILED_WARMUP - warmup:],
                                                     pad_id, device, bf16, warmup)
        train[name] = _figures(rate, 6 * params, peak, device, steps=len(batches) - COMPILED_WARMUP,
                               warmup_s=round(warm_s, 1), compiles_while_timed=compiles)

    def profile_training(key: str) -> None:
        optimizer = _optimizer(model, device)
        padding_mask = needs_padding_mask(model)
        profiles[key] = _profile(lambda: _train_step(model, optimizer, features, by_size[0], pad_id, device, bf16,
                                                     padding_mask), device)

    def measure_scoring(name: str, budget: int) -> None:
        _reset_peak_memory(device)
        # A warm-up, or a compile.
        warm_s = _timed(lambda: list(iter_scores(model, tokenizer, solutions[:64], batch_tokens=budget)), device)
        compiles = _compiles()
        seconds = _timed(lambda: list(iter_scores(model, tokenizer, solutions, batch_tokens=budget)), device)
        # 2 FLOPs per parameter per token.
        score[name] = _figures(score_tokens / seconds, 2 * params, peak, device,
                               solutions_per_s=round(len(solutions) / seconds, 1), warmup_s=round(warm_s, 1),
                               compiles_while_timed=_compiles() - compiles)

    def profile_scoring(key: str) -> None:
        # The middle batch of the default budget's grouping, tokenising and reading back included.
        batches = list(token_batches(score_lengths, args.batch_tokens))
        one_batch = [solutions[i] for i in batches[len(batches) // 2]]
        profiles[key] = _profile(lambda: list(iter_scores(model, tokenizer, one_batch, batch_tokens=args.batch_tokens)),
                                 device)

    def profile_stream(key: str) -> None:
        # Several chunks at the device's default budget: whether the host's tokenising of the
        # next chunk keeps pace with the GPU, which one batch alone cannot show.
        stream = solutions[:STREAM_SOLUTIONS]
        profiles[key] = _profile(lambda: list(iter_scores(model, tokenizer, stream)), device)

    def check_scoring(key: str) -> None:
        # The streamed path (chunks of 16, so that several chunks are copied back while later ones
        # are queued) against each solution scored alone: a read-back of a copy not yet done, or
        # of another chunk's, would be far off; bf16 batching moves a probability by under 0.01.
        sample = solutions[:64]
        streamed = list(iter_scores(model, tokenizer, sample, chunk_size=16))
        alone = [next(iter_scores(model, tokenizer, [s])) for s in sample]
        gaps = [abs(a - b) for x, y in zip(streamed, alone) for pa, pb in zip(x.step_probs, y.step_probs)
                if pa is not None and pb is not None for a, b in zip(pa, pb)]
        checks[key] = {"solutions": len(sample), "probabilities": len(gaps),
                       "max_gap_to_scored_alone": round(max(gaps), 5)}

    def as_trained() -> None:
        # fp32 weights: autocast keeps fp32 master weights, as train does.
        model.to(torch.float32)
        model.train()

    def as_scored() -> None:
        # As load_checkpoint gives them: bf16 on CUDA.
        if bf16:
            model.to(torch.bfloat16)
        model.eval()

    def measure_all(suffix: str, warmup: int) -> None:
        """Every setting, training then scoring; the profiles are of a training step of 16
        solutions, a scoring batch of `--batch-tokens` and a stream of STREAM_SOLUTIONS at the
        device's default budget, eager and compiled alike."""
        as_trained()
        for name, batches in train_runs.items():
            attempt(name + suffix, lambda: measure_training(name + suffix, batches, warmup))
        if args.profile:
            attempt("train_step" + suffix, lambda: profile_training("train_step" + suffix))
        if not suffix:
            # The naive baselines, fp32 one solution at a time, on the eager model.
            single = [[i] for i in range(args.train_steps * 2 + 1)]
            naive["train"] = _train_tokens_per_s(model, features, single, pad_id, device, False)[0]
            naive_s = _naive_scoring(model, tokenizer, solutions[:args.naive_solutions], device)
            naive["score"] = sum(score_lengths[:args.naive_solutions]) / naive_s
            naive["score_solutions_per_s"] = args.naive_solutions / naive_s
        as_scored()
        for budget in (args.batch_tokens, args.large_batch_tokens):
            attempt(f"tokens_{budget}{suffix}", lambda: measure_scoring(f"tokens_{budget}{suffix}", budget))
        if args.profile:
            attempt("score_batch" + suffix, lambda: profile_scoring("score_batch" + suffix))
            attempt("score_stream" + suffix, lambda: profile_stream("score_stream" + suffix))
        attempt("score_check" + suffix, lambda: check_scoring("score_check" + suffix))

    # Eager and compiled time the same batches, after one warm-up step and COMPILED_WARMUP.
    measure_all("", warmup=1)
    if args.compile:
        compiled_layers = compile_layers(model)
        measure_all("_compiled", warmup=COMPILED_WARMUP)
    print(json.dumps(write(), indent=2))


if __name__ == "__main__":
    main()
