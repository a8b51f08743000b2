"""Host-side operators of one training step and one scoring forward pass of a preset's shape.

On a GPU every operator is a trip through Python and the dispatcher before any kernel runs, so
the count bounds how fast a small batch can go whatever the GPU. It depends on the depth and the
code path, not on the width: the preset's layers are built at a width of 64 so that this runs on
a CPU in seconds. The training step is bench/prm_throughput.py's (bf16 autocast, no gradient
clipping, no auxiliary head, no padding), its optimizer step counted apart: AdamW with foreach on
CPU still calls operators per tensor, where CUDA runs a few multi-tensor kernels, so that count
is an upper bound of a GPU's. Scoring is a forward pass with bf16 weights in inference mode, as
iter_scores runs it. Writes bench/results/host_operators.json.

    .venv/bin/python bench/host_operators.py --base 500m
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForTokenClassification

from active_learning.model import PRESETS, preset_config
from active_learning.tokenizer import build_byte_tokenizer

RESULTS = Path(__file__).parent / "results" / "host_operators.json"


def _operators(work) -> int:
    work()  # the first call allocates optimizer state and caches
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    return sum(e.count for e in prof.key_averages())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="500m", choices=sorted(PRESETS))
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=225, help="tokens a sequence (the synthetic mean)")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = build_byte_tokenizer()
    narrow = dataclasses.replace(PRESETS[args.base], hidden=64, heads=2)
    config = preset_config(narrow, tokenizer)
    config._attn_implementation = "sdpa"
    model = AutoModelForTokenClassification.from_config(config)
    ids = torch.randint(5, len(tokenizer), (args.sequences, args.tokens))
    mask, labels = torch.ones_like(ids), torch.randint(0, 3, ids.shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def forward_backward() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()

    def optimizer_step() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    training = _operators(forward_backward)
    forward_backward()  # gradients for the optimizer to read
    stepping = _operators(optimizer_step)
    model.to(torch.bfloat16).eval()

    def score() -> None:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)

    result = {
        "benchmark": "host_operators", "date": time.strftime("%Y-%m-%d"), "base": args.base,
        "layers": narrow.layers, "parameter_tensors": len(list(model.parameters())),
        "settings": vars(args),
        "forward_backward_operators": training, "optimizer_step_operators_upper_bound": stepping,
        "scoring_forward_operators": _operators(score),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
