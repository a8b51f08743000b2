"""PRM training and scoring throughput against a naive baseline measured in the same run.

Ours: length-bucketed batches (training: `epoch_batches`; scoring: `iter_scores` under a token
budget), torch.inference_mode for scoring, and on CUDA bf16 (autocast for training, bf16 weights
for scoring) with SDPA attention. Naive: one solution at a time, fp32, in file order.
Tokens are real (non-padding) tokens. Writes bench/results/prm_throughput.json.

    python bench/prm_throughput.py                          # CPU, tiny preset, small sizes
    python bench/prm_throughput.py --base 500m --device cuda --solutions 4096 --train-steps 60
"""

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

import torch

from active_learning.data import load_examples, load_solutions, tokenize_example
from active_learning.model import load_base, marker_id
from active_learning.score import iter_scores, pad_batch, token_batches
from active_learning.synthetic import iter_candidates, to_prm800k
from active_learning.train import epoch_batches

RESULTS = Path(__file__).parent / "results" / "prm_throughput.json"
# Dense bf16 tensor-core peaks, for model FLOP utilisation.
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _train_step(model, optimizer, features, batch, pad_id, device, bf16) -> int:
    """One optimizer step on `batch`; returns its real tokens."""
    inputs = pad_batch([features[j] for j in batch], pad_id, device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
        loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return int(inputs["attention_mask"].sum())


def _train_tokens_per_s(model, features, batches, pad_id, device, bf16) -> float:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    tokens = 0
    for i, batch in enumerate(batches):
        if i == 1:  # the first step pays for allocator and kernel warm-up
            _sync(device)
            start, tokens = time.perf_counter(), 0
        tokens += _train_step(model, optimizer, features, batch, pad_id, device, bf16)
    _sync(device)
    return tokens / (time.perf_counter() - start)


def _timed(work, device: str) -> float:
    _sync(device)
    started = time.perf_counter()
    work()
    _sync(device)
    return time.perf_counter() - started


def _profile(work, device: str, rows: int = 12) -> dict:
    """Where one call of `work` spends its time, after a warm-up call: the share of the wall
    time the GPU is busy (low means the host, not the GPU, sets the pace: launches, Python,
    synchronisation) and the operations that take the most of it."""
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
        "top": [{"name": e.key, "self_s": round(busy(e) / 1e6, 5), "calls": e.count} for e in top],
    }


def _naive_scoring(model, tokenizer, solutions, device) -> float:
    """Seconds to score `solutions` one at a time in fp32 without bucketing."""
    marker = marker_id(tokenizer)
    model.eval()
    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        for s in solutions:
            f = tokenize_example(tokenizer, marker, s.prompt, s.steps, None, 2048)
            ids = torch.tensor([f["input_ids"]], device=device)
            model(input_ids=ids).logits[0, [m for m in f["markers"] if m >= 0]].softmax(-1).tolist()
    _sync(device)
    return time.perf_counter() - start


def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="tiny", help="Preset (tiny, 100m, 500m) or directory.")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda.")
    parser.add_argument("--solutions", type=int, default=512, help="Solutions scored by our scorer.")
    parser.add_argument("--naive-solutions", type=int, default=128, help="Solutions scored naively.")
    parser.add_argument("--train-steps", type=int, default=12, help="Batched training steps timed.")
    parser.add_argument("--batch-size", type=int, default=16, help="Training sequences per step.")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="Scoring token budget per batch.")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's).")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one training step and one scoring batch (torch.profiler) into the JSON")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    bf16 = device == "cuda"

    records = [to_prm800k(c) for c in iter_candidates(max(args.solutions, 64) // 4 + 1, 4, seed=0)]
    solutions = load_solutions(records)[:args.solutions]
    torch.manual_seed(0)
    model, tokenizer = load_base(args.base)
    model.to(device)
    params = sum(p.numel() for p in model.parameters())
    marker = marker_id(tokenizer)
    examples = load_examples(records)
    features = [tokenize_example(tokenizer, marker, e.prompt, e.steps, e.labels, 2048) for e in examples]
    lengths = [len(f["input_ids"]) for f in features]

    # Training: bucketed batches (+ bf16 on CUDA) against one fp32 sequence at a time.
    batched = epoch_batches(lengths, args.batch_size, seed=0)[:args.train_steps + 1]
    train_ours = _train_tokens_per_s(model, features, batched, tokenizer.pad_token_id, device, bf16)
    single = [[i] for i in range(args.train_steps * 2 + 1)]
    train_naive = _train_tokens_per_s(model, features, single, tokenizer.pad_token_id, device, False)
    profiles = {}
    if args.profile:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        profiles["train_step"] = _profile(lambda: _train_step(
            model, optimizer, features, batched[0], tokenizer.pad_token_id, device, bf16), device)

    # Scoring: ours with the weights as load_checkpoint would give them (bf16 on CUDA).
    score_lengths = [len(tokenize_example(tokenizer, marker, s.prompt, s.steps, None, 2048)["input_ids"])
                     for s in solutions]
    naive_s = _naive_scoring(model, tokenizer, solutions[:args.naive_solutions], device)
    naive_tokens = sum(score_lengths[:args.naive_solutions])
    if bf16:
        model.to(torch.bfloat16)
    list(iter_scores(model, tokenizer, solutions[:32], batch_tokens=args.batch_tokens))  # warm-up
    _sync(device)
    start = time.perf_counter()
    list(iter_scores(model, tokenizer, solutions, batch_tokens=args.batch_tokens))
    _sync(device)
    ours_s = time.perf_counter() - start
    score_tokens = sum(score_lengths)
    if args.profile:
        # The middle batch of the timed run's grouping, tokenising and reading back included.
        batches = list(token_batches(score_lengths, args.batch_tokens))
        one_batch = [solutions[i] for i in batches[len(batches) // 2]]
        profiles["score_batch"] = _profile(
            lambda: list(iter_scores(model, tokenizer, one_batch, batch_tokens=args.batch_tokens)), device)

    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if gpu and k in gpu), None)
    result = {
        "benchmark": "prm_throughput",
        "date": time.strftime("%Y-%m-%d"),
        "device": gpu or f"CPU ({torch.get_num_threads()} threads, {platform.machine()})",
        "load_average_1m": round(os.getloadavg()[0], 1),
        "base": args.base, "parameters": params, "precision": "bf16" if bf16 else "fp32",
        "settings": vars(args),
        "train_tokens_per_s": round(train_ours), "train_tokens_per_s_naive": round(train_naive),
        "train_speedup": round(train_ours / train_naive, 2),
        "score_tokens_per_s": round(score_tokens / ours_s),
        "score_tokens_per_s_naive": round(naive_tokens / naive_s),
        "score_solutions_per_s": round(len(solutions) / ours_s, 1),
        "score_solutions_per_s_naive": round(args.naive_solutions / naive_s, 1),
        "score_speedup": round((score_tokens / ours_s) / (naive_tokens / naive_s), 2),
        "peak_memory_mb": round(_peak_memory_mb(device)),
        "peak_memory_kind": "max allocated on the GPU" if device == "cuda" else "max RSS of the process",
        # 6 FLOPs per parameter per token to train (forward + backward), 2 to score.
        "train_mfu": round(6 * params * train_ours / peak, 4) if peak else None,
        "score_mfu": round(2 * params * score_tokens / ours_s / peak, 4) if peak else None,
        **({"profiles": profiles} if profiles else {}),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
