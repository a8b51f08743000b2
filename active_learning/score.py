"""Scoring solutions with a trained PRM: per-step class probabilities and solution scores.

Built for pools of millions: solutions stream through in chunks; inside a chunk they are sorted
by length and packed into batches under a token budget, so padding stays small and a batch of
short solutions is as large as the budget allows. Results come back in input order.

A solution longer than the model's limit is read in several windows (`scoring_windows`), each
step with as much of what comes before it as fits, so every step gets a score unless it alone is
longer than the limit.
"""

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from active_learning.data import IGNORE_INDEX, Solution, scoring_windows
from active_learning.model import marker_id, needs_padding_mask


@dataclass
class SolutionScore:
    step_probs: list[list[float] | None]  # [p(-1), p(0), p(+1)] per step; None if unscored
    step_scores: list[float | None]  # probability that the step is correct
    product: float  # the paper's solution score: every step correct
    minimum: float  # the weakest step
    truncated: bool  # some step alone is longer than max_length and was not scored


def correct_probability(probs: list[float], neutral_as_correct: bool = True) -> float:
    """P(step is correct). A neutral step is correct-but-unhelpful, so by default it counts as
    correct, as in the paper's PRM scoring."""
    return probs[2] + probs[1] if neutral_as_correct else probs[2]


def _summarise(step_probs: list, neutral_as_correct: bool) -> SolutionScore:
    scores = [None if p is None else correct_probability(p, neutral_as_correct) for p in step_probs]
    known = [s for s in scores if s is not None]
    return SolutionScore(step_probs, scores, math.prod(known), min(known, default=1.0),
                         len(known) < len(scores))


def token_batches(lengths: list[int], batch_tokens: int) -> Iterator[list[int]]:
    """Indices grouped so that (longest in batch) * (batch size) <= batch_tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batch: list[int] = []
    for i in order:
        if batch and lengths[i] * (len(batch) + 1) > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def pad_batch(features: list[dict], pad_id: int, device, padding_mask: bool = True) -> dict:
    """Right-padded tensors, with the padding mask unless `padding_mask` is False (a causal
    backbone's, `model.needs_padding_mask`): either way padding changes nothing at the markers."""
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    # Per-token targets: the head's labels, and the trainer's next-token targets when present.
    targets = {key: torch.full((len(features), width), IGNORE_INDEX, dtype=torch.long)
               for key in ("labels", "lm_labels") if key in features[0]}
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        ids[row, :n] = torch.tensor(f["input_ids"])
        mask[row, :n] = 1
        for key, tensor in targets.items():
            tensor[row, :n] = torch.tensor(f[key])
    masks = {"attention_mask": to_device(mask, device)} if padding_mask else {}
    return {"input_ids": to_device(ids, device), **masks,
            **{key: to_device(tensor, device) for key, tensor in targets.items()}}


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor on `device`. To CUDA from pinned memory, so that the copy runs beside the
    host, which goes on queueing work; from pageable memory the host would wait for the GPU."""
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


@torch.inference_mode()
def _queue_chunk(model, tokenizer, chunk: list[Solution], max_length: int, batch_tokens: int,
                 padding_mask: bool) -> tuple[list[tuple[int, int]], list[torch.Tensor]]:
    """Queues the chunk's forward passes; returns each marker read's (solution, step) and the
    reads' class probabilities, batch by batch, still on the model's device."""
    marker = marker_id(tokenizer)
    windows, owners = [], []
    for index, s in enumerate(chunk):
        for window in scoring_windows(tokenizer, marker, s.prompt, s.steps, max_length):
            windows.append(window)
            owners.append(index)
    device = next(model.parameters()).device
    reads: list[tuple[int, int]] = []
    probs: list[torch.Tensor] = []
    for batch in token_batches([len(w["input_ids"]) for w in windows], batch_tokens):
        inputs = pad_batch([windows[i] for i in batch], tokenizer.pad_token_id, device, padding_mask)
        marks = [(owners[i], step, row, position)
                 for row, i in enumerate(batch) for step, position in windows[i]["reads"]]
        rows = to_device(torch.tensor([m[2] for m in marks]), device)
        positions = to_device(torch.tensor([m[3] for m in marks]), device)
        logits = model(**inputs).logits  # [B, T, 3]
        # Only the markers' logits are kept.
        probs.append(logits[rows, positions].float().softmax(-1))
        reads += [(owner, step) for owner, step, _, _ in marks]
    return reads, probs


def _read_back(chunk: list[Solution], reads: list[tuple[int, int]], probs: list[torch.Tensor],
               neutral_as_correct: bool) -> list[SolutionScore]:
    step_probs: list[list] = [[None] * len(s.steps) for s in chunk]
    for (owner, step), p in zip(reads, torch.cat(probs).tolist() if probs else []):
        step_probs[owner][step] = p
    return [_summarise(p, neutral_as_correct) for p in step_probs]


def iter_scores(model, tokenizer, solutions: Iterable[Solution], *, max_length: int = 2048,
                batch_tokens: int = 16384, chunk_size: int = 4096,
                neutral_as_correct: bool = True) -> Iterator[SolutionScore]:
    """Scores in input order, holding one chunk of solutions in memory at a time, and the next.

    A chunk's batches are queued one after another without reading anything back, and the chunk
    comes back in one copy once the next chunk is queued behind it: the host pads each batch while
    the GPU computes the one before, and tokenises the next chunk while it computes the chunk's
    last. (transformers itself still waits for the GPU once a forward pass, reading a flag of the
    batch's positions, so the host is at most about a batch ahead.)
    """
    model.eval()
    padding_mask = needs_padding_mask(model)
    solutions = iter(solutions)
    queued = None  # (chunk, reads, probabilities): on the device, not yet read back
    while True:
        try:
            chunk = list(itertools.islice(solutions, chunk_size))
            launched = (chunk, *_queue_chunk(model, tokenizer, chunk, max_length, batch_tokens,
                                             padding_mask)) if chunk else None
        except BaseException:
            # A bad record, an out-of-memory or Ctrl-C in this chunk: the chunk before it, scored
            # already, still comes out first.
            if queued is not None:
                yield from _read_back(*queued, neutral_as_correct)
            raise
        if queued is not None:
            yield from _read_back(*queued, neutral_as_correct)
        if launched is None:
            return
        queued = launched


def score_solutions(model, tokenizer, solutions: Iterable[Solution], **options) -> list[SolutionScore]:
    return list(iter_scores(model, tokenizer, solutions, **options))
