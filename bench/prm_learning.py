"""Learning, shown: does the PRM read the content of steps, or only where they are?

Trains two models the same way, in the same run, on synthetic verifiable data
(active_learning.synthetic): the PRM on the real text, and a position-only baseline on the same
examples with every character of the problem and of each step replaced by "x", so it sees only
each step's index and length. Each model is first pretrained by next-token prediction on
error-free solutions of other problems (active_learning.pretrain: the base model the paper
started from had read mathematics; ours has read nothing), then trained on the step labels with
targets at every token of a step and the auxiliary next-token loss. Both are scored on held-out
problems; the gap in step AUROC is what the model learned from content. Writes
bench/results/prm_learning.json.

    python bench/prm_learning.py                        # tiny on CPU, 10 minutes per model
    python bench/prm_learning.py --base 100m --budget-s 1800 --device cuda   # the GPU check
    python bench/prm_learning.py --base 100m --pretrain-steps 600 --train-steps 300 --device cuda
"""

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

import torch

from active_learning.config import PretrainConfig, TrainConfig
from active_learning.pretrain import pretrain
from active_learning.synthetic import ERRORS, error_kinds, iter_candidates, to_prm800k
from active_learning.threads import use_cpu_threads
from active_learning.train import train
from bench_results import write_results

RESULTS = Path(__file__).parent / "results" / "prm_learning.json"


def blank(record: dict) -> dict:
    """The record with its text replaced by runs of "x" of the same length; ratings kept."""
    hide = lambda text: "x" * len(text)  # noqa: E731
    question = record["question"]
    steps = [{**s, "completions": [{**c, "text": hide(c["text"])} for c in s["completions"]]}
             for s in record["label"]["steps"]]
    return {**record,
            "question": {**question, "problem": hide(question["problem"]),
                         "pre_generated_steps": [hide(t) for t in question["pre_generated_steps"]]},
            "label": {**record["label"], "steps": steps}}


def records(problems: int, per_problem: int, seed: int, errors: tuple[str, ...],
            error_rate: float = 0.6) -> list[dict]:
    return [to_prm800k(c) for c in iter_candidates(problems, per_problem, seed, error_rate, errors)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="tiny", help="Backbone preset or directory.")
    parser.add_argument("--budget-s", type=float, default=600,
                        help="Training seconds per model, pretraining included (unused with step counts).")
    parser.add_argument("--pretrain-share", type=float, default=0.6,
                        help="Share of the budget spent pretraining (0 skips it).")
    parser.add_argument("--pretrain-steps", type=int, default=None,
                        help="Pretrain this many steps instead of a share of the budget.")
    parser.add_argument("--train-steps", type=int, default=None,
                        help="Train on labels this many steps instead of the rest of the budget. With "
                             "both step counts the budget is unused, and a GPU shared with other work "
                             "costs time rather than learning.")
    parser.add_argument("--pretrain-problems", type=int, default=20000,
                        help="Problems whose error-free solutions the base is pretrained on.")
    parser.add_argument("--train-problems", type=int, default=20000)
    parser.add_argument("--eval-problems", type=int, default=300)
    parser.add_argument("--solutions-per-problem", type=int, default=4)
    parser.add_argument("--epochs", type=float, default=20, help="Upper bound; the budget usually ends first.")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--errors", default="carry,remark",
                        help=f"Kinds of injected mistakes, comma-separated, from {','.join(ERRORS)}. "
                             "Leaving out remark makes every remark right, which its length gives away; "
                             "result and operand slips need arithmetic and reading the problem, which "
                             "ten CPU minutes do not teach a model built from a config.")
    parser.add_argument("--lm-loss-weight", type=float, default=1.0,
                        help="Auxiliary next-token loss weight while training on labels.")
    parser.add_argument("--marker-only", action="store_true",
                        help="Targets at step markers only, not at every token of a step.")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch and the tokenizer (default: torch's choice, and every "
                             "core for the tokenizer).")
    parser.add_argument("--workdir", default="runs/prm_learning")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    if args.threads:
        use_cpu_threads(args.threads)
    try:
        errors = error_kinds(args.errors)
    except ValueError as e:
        parser.error(str(e))
    for flag, value in (("--pretrain-steps", args.pretrain_steps), ("--train-steps", args.train_steps)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be 1 or more")
    if args.pretrain_steps and not args.train_steps:
        # Training would get what pretraining left of the budget, which it may have used up.
        parser.error("--pretrain-steps needs --train-steps")

    train_records = records(args.train_problems, args.solutions_per_problem, args.seed, errors)
    # Another seed draws other problems; check that none of them leaked into training.
    eval_records = records(args.eval_problems, args.solutions_per_problem, args.seed + 10_000, errors)
    seen = {r["question"]["problem"] for r in train_records}
    eval_records = [r for r in eval_records if r["question"]["problem"] not in seen]

    # Error-free solutions of problems drawn from a third seed: what the base reads before labels.
    pretrain_records = records(args.pretrain_problems, 1, args.seed + 20_000, errors, error_rate=0.0)
    eval_problems = {r["question"]["problem"] for r in eval_records}
    pretrain_records = [r for r in pretrain_records if r["question"]["problem"] not in eval_problems]

    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    results = {}
    for name, transform in [("content", lambda r: r), ("position_only", blank)]:
        base, pretrain_seconds = args.base, 0.0
        if args.pretrain_steps or args.pretrain_share > 0:
            started = time.monotonic()
            base = str(pretrain(PretrainConfig(
                output=str(workdir / f"{name}-base"), base=args.base, steps=args.pretrain_steps or 10**9,
                time_budget_s=None if args.pretrain_steps else args.budget_s * args.pretrain_share,
                seed=args.seed, device=args.device), map(transform, pretrain_records)))
            pretrain_seconds = time.monotonic() - started
        config = TrainConfig(output=str(workdir / name), base=base, epochs=args.epochs, steps=args.train_steps or 0,
                             learning_rate=args.learning_rate, batch_size=args.batch_size,
                             seed=args.seed, device=args.device,
                             time_budget_s=None if args.train_steps else args.budget_s - pretrain_seconds,
                             lm_loss_weight=args.lm_loss_weight,
                             step_token_labels=not args.marker_only, save_every=10**9, log_every=100)
        train(config, map(transform, train_records), [transform(r) for r in eval_records])
        meta = json.loads((workdir / name / "stepwise.json").read_text())
        results[name] = {"metrics": meta["metrics"], "steps": meta["steps"],
                         "pretrain_seconds": round(pretrain_seconds, 1),
                         "train_seconds": meta["train_seconds"]}
        # After each model: a run stopped at a time limit keeps the content model's figure.
        summary = _summary(args, results, len(train_records), len(eval_records))
    print(json.dumps({k: summary[k] for k in ("content_step_auroc", "position_only_step_auroc", "auroc_gain")}))


def _summary(args, results: dict, train_records: int, eval_records: int) -> dict:
    """The results so far, written whole to `args.output` (never half a file)."""
    cuda = torch.cuda.is_available() and args.device != "cpu"
    auroc = {name: results[name]["metrics"]["step_auroc"] if name in results else None
             for name in ("content", "position_only")}
    summary = {
        "benchmark": "prm_learning",
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({torch.get_num_threads()} threads, {platform.machine()})",
        "load_average_1m": round(os.getloadavg()[0], 1),
        "base": args.base,
        "settings": vars(args),
        "train_records": train_records,
        "eval_records": eval_records,
        "content_step_auroc": auroc["content"],
        "position_only_step_auroc": auroc["position_only"],
        "auroc_gain": None if None in auroc.values() else auroc["content"] - auroc["position_only"],
        "models": results,
    }
    write_results(Path(args.output), summary)
    return summary


if __name__ == "__main__":
    main()
