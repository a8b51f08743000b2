"""Scoring solutions with a trained PRM: per-step class probabilities and solution scores.

Built for pools of millions: solutions stream through in chunks; inside a chunk they are sorted
by length and packed into batches under a token budget, so padding stays small and a batch of
short solutions is as large as the budget allows. Results come back in input order.

A solution longer than the model's limit is read in several windows (`scoring_windows`), each
step after the first window with up to half a window of what comes before it, so every step gets
a score unless it alone is longer than the limit, and a long solution costs about twice its tokens.
"""

import gc
import itertools
import math
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from active_learning.config import BATCH_TOKENS_VARIABLE, batch_tokens_setting
from active_learning.data import IGNORE_INDEX, Solution, encode_solutions, scoring_windows
from active_learning.model import marker_id, needs_padding_mask

# Padded tokens a scoring batch holds when the caller names none. On the H200 (500m preset, bf16)
# 65,536 scored 44% faster than 16,384 eager and 5% faster compiled, in 3.3 GB; on CPU larger
# batches were slower (bench/prm_throughput.py, docs/prm.md).
CUDA_BATCH_TOKENS = 65536
CPU_BATCH_TOKENS = 16384


def default_batch_tokens(device: torch.device | str) -> int:
    """STEPWISE_SCORE_BATCH_TOKENS where set (for the callers with no option of their own: a
    large base on a small card may need less), else the device's default."""
    tokens = batch_tokens_setting(os.environ.get(BATCH_TOKENS_VARIABLE, ""))
    if tokens is not None:
        return tokens
    return CUDA_BATCH_TOKENS if torch.device(device).type == "cuda" else CPU_BATCH_TOKENS


@dataclass
class SolutionScore:
    step_probs: list[list[float] | None]  # [p(-1), p(0), p(+1)] per step; None if unscored
    step_scores: list[float | None]  # probability that the step is correct
    product: float  # the paper's solution score: every step correct
    minimum: float  # the weakest step
    truncated: bool  # some step alone is longer than max_length and was not scored


def within_positions(model, max_length: int) -> int:
    """`max_length`, at most the positions the model was built for: past them a model with
    learned positions fails, and one with rotary positions reads tokens it was never trained at,
    while the scores would claim nothing was cut."""
    positions = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    return min(max_length, positions) if positions else max_length


def correct_probability(probs: list[float], neutral_as_correct: bool = True) -> float:
    """P(step is correct). A neutral step is correct-but-unhelpful, so by default it counts as
    correct, as in the paper's PRM scoring."""
    return probs[2] + probs[1] if neutral_as_correct else probs[2]


def _summarise(step_probs: list, neutral_as_correct: bool) -> SolutionScore:
    scores = [None if p is None else correct_probability(p, neutral_as_correct) for p in step_probs]
    known = [s for s in scores if s is not None]
    return SolutionScore(step_probs, scores, math.prod(known), min(known, default=1.0),
                         len(known) < len(scores))


def best_of_n_order(score: SolutionScore) -> tuple[bool, float]:
    """The key best-of-N picks the greatest of: the product, a candidate with a step too long
    to score ranking below every one read whole (its product lacks that step's factor, and one
    read not at all scores 1, the best there is)."""
    return not score.truncated, score.product


def on_common_steps(a: SolutionScore, b: SolutionScore) -> tuple[SolutionScore, SolutionScore]:
    """Two models' scores of one solution, each restricted to the steps both scored: a step
    one tokenizer makes longer than the window drops a factor from that model's product only,
    which would favour it in a comparison."""
    if not (a.truncated or b.truncated):
        return a, b
    both = [x is not None and y is not None for x, y in zip(a.step_scores, b.step_scores)]
    return _restricted(a, both), _restricted(b, both)


def _restricted(score: SolutionScore, keep: list[bool]) -> SolutionScore:
    probs = [p if k else None for p, k in zip(score.step_probs, keep)]
    scores = [s if k else None for s, k in zip(score.step_scores, keep)]
    known = [s for s in scores if s is not None]
    return SolutionScore(probs, scores, math.prod(known), min(known, default=1.0), len(known) < len(scores))


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
    lengths = np.array([len(f["input_ids"]) for f in features])
    # Filled in one vectorised copy from the rows laid end to end: a row at a time, a 65,536-token
    # batch took 44 ms of this machine's CPU, a third of the time the H200 took to score it.
    filled = np.arange(lengths.max()) < lengths[:, None]

    def padded(key: str, fill: int) -> torch.Tensor:
        tensor = np.full(filled.shape, fill, dtype=np.int64)
        tensor[filled] = np.fromiter(itertools.chain.from_iterable(f[key] for f in features), np.int64,
                                     count=int(lengths.sum()))
        return to_device(torch.from_numpy(tensor), device)

    masks = {"attention_mask": to_device(torch.from_numpy(filled.astype(np.int64)), device)} if padding_mask else {}
    # Per-token targets: the head's labels, and the trainer's next-token targets when present.
    return {"input_ids": padded("input_ids", pad_id), **masks,
            **{key: padded(key, IGNORE_INDEX) for key in ("labels", "lm_labels") if key in features[0]}}


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor on `device`. To CUDA from pinned memory, so that the copy runs beside the
    host, which goes on queueing work; from pageable memory the host would wait for the GPU."""
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def _windows(tokenizer, chunk: list[Solution], max_length: int) -> tuple[list[dict], list[int]]:
    """The chunk's scoring windows, and for each the index of the solution it reads."""
    marker = marker_id(tokenizer)
    windows, owners = [], []
    encoded = encode_solutions(tokenizer, ((c.prompt, c.steps) for c in chunk))
    for index, (s, ids) in enumerate(zip(chunk, encoded)):
        for window in scoring_windows(tokenizer, marker, s.prompt, s.steps, max_length, ids):
            windows.append(window)
            owners.append(index)
    return windows, owners


@dataclass
class _Queued:
    """A chunk whose forward passes are queued: each marker read's (solution, step), and the
    reads' class probabilities on their way to host memory, there once `copied` has passed."""

    chunk: list[Solution]
    reads: list[tuple[int, int]]
    probs: torch.Tensor | None
    copied: torch.cuda.Event | None

    def read_back(self, neutral_as_correct: bool) -> list[SolutionScore]:
        if self.copied is not None:
            self.copied.synchronize()
        step_probs: list[list] = [[None] * len(s.steps) for s in self.chunk]
        for (owner, step), p in zip(self.reads, self.probs.tolist() if self.probs is not None else []):
            step_probs[owner][step] = p
        return [_summarise(p, neutral_as_correct) for p in step_probs]


@torch.inference_mode()
def _queue_chunk(model, pad_id: int, chunk: list[Solution], windows: list[dict], owners: list[int],
                 batch_tokens: int, padding_mask: bool) -> _Queued:
    """Queues the chunk's forward passes and the copy of its probabilities to the host."""
    device = next(model.parameters()).device
    reads: list[tuple[int, int]] = []
    probs: list[torch.Tensor] = []
    for batch in token_batches([len(w["input_ids"]) for w in windows], batch_tokens):
        inputs = pad_batch([windows[i] for i in batch], pad_id, device, padding_mask)
        marks = [(owners[i], step, row, position)
                 for row, i in enumerate(batch) for step, position in windows[i]["reads"]]
        rows = to_device(torch.tensor([m[2] for m in marks]), device)
        positions = to_device(torch.tensor([m[3] for m in marks]), device)
        logits = model(**inputs).logits  # [B, T, 3]
        # Only the markers' logits are kept.
        probs.append(logits[rows, positions].float().softmax(-1))
        reads += [(owner, step) for owner, step, _, _ in marks]
    return _to_host(chunk, reads, probs, device)


def _to_host(chunk: list[Solution], reads: list[tuple[int, int]], probs: list[torch.Tensor],
             device: torch.device) -> _Queued:
    """The chunk with its batches' probabilities on their way to host memory."""
    if not probs or device.type != "cuda":
        return _Queued(chunk, reads, torch.cat(probs) if probs else None, None)
    # Copied now, behind this chunk's batches alone: reading it back then waits for this chunk,
    # not for the next one queued meanwhile, which the GPU computes while the host reads this one.
    # (Into pinned memory, which a copy to the host with non_blocking allocates.)
    copied = torch.cuda.Event()
    host = torch.cat(probs).to("cpu", non_blocking=True)
    copied.record()
    return _Queued(chunk, reads, host, copied)


T = TypeVar("T")

# The first chunk is tokenised before the GPU has anything to do; later ones while it computes.
# Chunks start at this size and double up to `chunk_size`, so that the GPU starts early.
FIRST_CHUNK = 256


def in_chunks(items: Iterable[T], size: int, first: int | None = None) -> Iterator[list[T]]:
    """Lists of the items in order, of `size` each, or of `first` doubling up to `size`. An input
    that fails gives out what it had read first, then raises: a scorer or a round loses nothing
    it already had."""
    items, chunk_size = iter(items), min(first or size, size)
    while True:
        chunk: list[T] = []
        try:
            for item in itertools.islice(items, chunk_size):
                chunk.append(item)
        except Exception:
            if chunk:
                yield chunk
            raise
        if not chunk:
            return
        yield chunk
        chunk_size = min(2 * chunk_size, size)


def iter_scores(model, tokenizer, solutions: Iterable[Solution], *, max_length: int = 2048,
                batch_tokens: int | None = None, chunk_size: int = 4096,
                neutral_as_correct: bool = True) -> Iterator[SolutionScore]:
    """Scores in input order, holding at most three chunks of solutions in memory: one being
    tokenised, one on the device and one being read back.

    The host keeps the GPU fed: a worker thread tokenises the next chunk while the current one's
    batches are queued (the Rust tokenizer releases the GIL), each batch is padded while the GPU
    computes the one before, and a chunk's probabilities are copied to the host behind its own
    batches and read once the next chunk is queued, waiting for that copy alone. (transformers
    itself waits for the GPU once a forward pass, reading a flag of the batch's positions, so the
    host is at most about a batch ahead.) `batch_tokens` defaults to the model's device's
    (`default_batch_tokens`).
    """
    if chunk_size < 1 or (batch_tokens is not None and batch_tokens < 1):
        raise ValueError(f"chunk_size and batch_tokens must be 1 or more, not {chunk_size} and {batch_tokens}")
    model.eval()
    # Every caller's setting, cut here: a round's or a comparison's max_length past its base's
    # positions failed on an index only once scoring began.
    max_length = within_positions(model, max_length)
    if batch_tokens is None:
        batch_tokens = default_batch_tokens(next(model.parameters()).device)
    padding_mask = needs_padding_mask(model)
    chunks = in_chunks(solutions, chunk_size, first=FIRST_CHUNK)
    tokenising = ThreadPoolExecutor(1, thread_name_prefix="stepwise-tokenise")

    def tokenise_next() -> tuple[list[Solution], Future] | None:
        chunk = next(chunks, None)
        return None if chunk is None else (chunk, tokenising.submit(_windows, tokenizer, chunk, max_length))

    queued: _Queued | None = None  # on the device, not yet read back
    unread: BaseException | None = None  # reading the input failed after this chunk was read
    # The garbage collector looks only at objects made from here on. A full collection walks
    # every object the process holds: with a chunk's token lists about, 0.3 s a time on a CPU of
    # ours, longer than a GPU batch, while no batch is queued (collecting took 20-38% of the host's
    # time in a stream of 8,192 solutions). Older objects are still freed when unreferenced, and
    # handed back to the collector at the end. A heap frozen already, by a scorer beside this one
    # or on purpose (before forking server workers, say), is left as it is.
    freezing = gc.get_freeze_count() == 0
    if freezing:
        gc.freeze()
    try:
        ahead = tokenise_next()
        while ahead is not None:
            chunk, tokenised = ahead
            try:
                windows, owners = tokenised.result()
                try:
                    ahead = tokenise_next()
                except Exception as e:  # noqa: BLE001 - raised below, once what was read is scored
                    ahead, unread = None, e
                launched = _queue_chunk(model, tokenizer.pad_token_id, chunk, windows, owners, batch_tokens,
                                        padding_mask)
            except BaseException:
                # A bad record, an out-of-memory or Ctrl-C in this chunk: the chunk before it, scored
                # already, still comes out first.
                if queued is not None:
                    yield from queued.read_back(neutral_as_correct)
                raise
            if queued is not None:
                yield from queued.read_back(neutral_as_correct)
            queued = launched
        if queued is not None:
            yield from queued.read_back(neutral_as_correct)
        if unread is not None:
            raise unread
    finally:
        # A consumer that stops early drops the tokenising not begun, and waits for the one under
        # way (a chunk at most): it may change the tokenizer next, which tokenizers before 0.23.1
        # refuse while another thread encodes.
        tokenising.shutdown(wait=True, cancel_futures=True)
        if freezing:
            gc.unfreeze()


def score_solutions(model, tokenizer, solutions: Iterable[Solution], **options) -> list[SolutionScore]:
    return list(iter_scores(model, tokenizer, solutions, **options))
