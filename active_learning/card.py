"""A checkpoint's model card (`README.md`): what the Hugging Face Hub shows, and how to score with
plain transformers exactly as `stepwise prm score` does.

The scoring snippet is the contract: tests run it, taken from the card itself, in a process that
never imports Stepwise, and compare its numbers with `score_solutions`.
"""

import json

from active_learning.data import PROMPT_END
from active_learning.tokenizer import STEP_MARKER

# Metrics worth a row in the card, in the order shown, with what each means.
_METRICS = {
    "step_auroc": "step AUROC (wrong steps against the rest)",
    "step_f1": "step F1 (finding wrong steps, P(correct) < 0.5)",
    "step_accuracy": "step accuracy",
    "first_error_f1": "first-error F1 (ProcessBench)",
    "first_error_acc_erroneous": "first error found, on solutions with an error",
    "first_error_acc_correct": "no error claimed, on correct solutions",
}

_SNIPPET = '''import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

path = {path}  # this directory, or its id on the Hub
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForTokenClassification.from_pretrained(path).eval()
marker = tokenizer.convert_tokens_to_ids({marker})

def step_scores(problem, steps):
    """P(step is correct) for each step: p(0) + p(+1) at the marker after it."""
    def text(t):  # the marker's text in the input is dropped, until none is left
        while {marker} in t:
            t = t.replace({marker}, "")
        return t
    ids = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    ids += tokenizer.encode(text(problem) + {prompt_end}, add_special_tokens=False)
    for step in steps:
        ids += tokenizer.encode(text(step), add_special_tokens=False) + [marker]
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([ids])).logits[0].float().softmax(-1)
    at_markers = probs[torch.tensor(ids) == marker]  # one row a step: p(-1), p(0), p(+1)
    return (at_markers[:, 1] + at_markers[:, 2]).tolist()
'''


def prompt_format(tokenizer) -> dict:
    """How a solution is laid out for the model; `stepwise.json` keeps it beside the weights."""
    return {
        "template": "{bos}{problem}" + PROMPT_END + "{step_1}" + STEP_MARKER + "{step_2}" + STEP_MARKER + "...",
        "prompt_end": PROMPT_END,
        "marker": STEP_MARKER,
        "bos": tokenizer.bos_token,
        # Encoding the pieces one by one keeps a marker from merging with the text beside it.
        "encoding": "BOS if the tokenizer has one, then the problem with prompt_end and each step "
                    "encoded on its own without special tokens (the marker's text dropped from them), "
                    "each step followed by the marker's id",
    }


def scoring_snippet(name: str) -> str:
    return _SNIPPET.format(path=json.dumps(name), marker=json.dumps(STEP_MARKER),
                           prompt_end=json.dumps(PROMPT_END))


def _value(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def _metrics_table(metrics: dict) -> str:
    intervals = metrics.get("ci95") or {}
    rows = ["| metric | value | 95% interval |", "|---|---|---|"]
    for key, meaning in _METRICS.items():
        if key in metrics:
            low_high = intervals.get(key)
            interval = f"{low_high[0]:.3f} – {low_high[1]:.3f}" if low_high else "—"
            rows.append(f"| {meaning} | {_value(metrics[key])} | {interval} |")
    best = metrics.get("best_of_n")
    if best:
        low_high = best.get("prm_accuracy_ci95")
        interval = f"{low_high[0]:.3f} – {low_high[1]:.3f}" if low_high else "—"
        rows.append(f"| best-of-{best['n']} accuracy over {best['problems']} problems "
                    f"(majority voting: {best['majority_accuracy']:.3f}) | "
                    f"{_value(best['prm_accuracy'])} | {interval} |")
    counts = ", ".join(f"{metrics[k]} {label}" for k, label in
                       (("n_labels", "labels"), ("n_steps", "rated steps"), ("n_solutions", "whole solutions"))
                       if k in metrics)
    if metrics.get("n_labels") == 0:
        return "\n".join(rows) + ("\n\nNo held-out labels: no problem fell in the held-out share, so "
                                  "nothing was measured; train with `--eval FILE` or a larger "
                                  "`--eval-fraction`.")
    undefined = any(key in metrics and metrics[key] is None for key in _METRICS)
    # A round measures as its project's settings say; `prm eval` gives the same numbers only so.
    how = metrics.get("neutral_as_correct")
    measured = "" if how is None else (
        " A neutral step (0) counted as " + ("correct" if how else "wrong (`prm eval --neutral-as-wrong`)")
        + (f", solutions read in windows of {metrics['max_length']:,} tokens (`--max-length`)"
           if isinstance(metrics.get("max_length"), int) else "") + ".")
    return "\n".join(rows) + (f"\n\nMeasured on held-out labels: {counts}.{measured}" if counts else "") + (
        "\n\nA value shown as — is undefined, not 0: the held-out labels lack a class the metric needs "
        "(a wrong step, a right one, a solution with an error or one without)." if undefined else "")


def model_card(meta: dict, name: str) -> str:
    """The README.md of a checkpoint named `name`, from its `stepwise.json` contents."""
    base = meta.get("base") or "unknown"
    metrics = meta.get("metrics")
    front = ["---", "library_name: transformers", "pipeline_tag: token-classification",
             "tags:", "- process-reward-model", "- math", "- stepwise"]
    if "/" in base:  # a hub id: the Hub links the card to its base
        front.append(f"base_model: {base}")
    front.append("---")
    trained = []
    if "train_examples" in meta:
        left_out = meta.get("train_examples_left_out")
        trained.append(f"{meta['train_examples']} labeled examples"
                       + (f" ({left_out} more left out: no labeled step within its max_length)" if left_out else ""))
    if "steps" in meta:
        trained.append(f"{meta['steps']} optimizer steps")
    max_length = (meta.get("config") or {}).get("max_length")
    if isinstance(max_length, int):
        # Scoring reads longer solutions in windows (prm score's own limit may differ).
        trained.append(f"solutions of up to {max_length:,} tokens")
    return "\n".join(front) + f"""

# {name}

A process reward model (PRM) trained with Stepwise: it reads a step-by-step math
solution and rates every step, so that a wrong step is found where it is written.

- **Base model**: `{base}`
- **Training data**: label snapshot `{meta.get('data_hash', 'unknown')}`{' (' + ', '.join(trained) + ')' if trained else ''}
- **Head**: `AutoModelForTokenClassification`, 3 classes, read at the `{STEP_MARKER}` token after each step

## Labels

The classes are PRM800K's step ratings: class 0 is **−1** (the step is wrong: a mistake, or
reasoning that cannot lead anywhere), class 1 is **0** (neutral: correct but not helpful), class 2
is **+1** (correct and helpful). A step's score is P(correct) = p(0) + p(+1) by default; with
`--neutral-as-wrong` it is p(+1). A solution's score is the product of its step scores (and the
weakest step is their minimum).

## Metrics

{_metrics_table(metrics) if metrics else 'No held-out evaluation was recorded with this checkpoint.'}

## Intended use

Ranking candidate solutions to math problems (best-of-N), finding the first wrong step of a
solution, and choosing which solutions human labelers should check next. It is trained on the
labels of one project and reads solutions laid out as below; other layouts, other domains, or
solutions much longer than those it was trained on give scores with no known accuracy. A score
is a probability learnt from labels, not a proof: it does not replace checking the answer.

## Prompt format

BOS (when the tokenizer has one), the problem, `{json.dumps(PROMPT_END)[1:-1]}`, then each step
followed by `{STEP_MARKER}`; the problem and each step are encoded on their own, without special
tokens, and with the marker's own text dropped from them. `stepwise.json` records this format, the base, the data hash, the training settings and
the metrics.

## Scoring with transformers

This gives the scores `stepwise prm score --model {name}` gives for the same problem and steps
(of a PRM800K record, `prm score` reads `question.pre_generated_steps`), for a solution that fits
in its `--max-length`, by default the one this model was trained at:

```python
{scoring_snippet(name)}```

With Stepwise: `stepwise prm score --model {name} --input solutions.jsonl --output scores.jsonl`.
"""
