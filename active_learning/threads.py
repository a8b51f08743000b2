"""How many CPU threads a process computes with."""

import os

import torch

# The Rust tokenizer encodes a batch on rayon's thread pool, which reads this once, when it
# starts (at the first batch encode), and otherwise takes every core.
TOKENIZER_THREADS_VARIABLE = "RAYON_NUM_THREADS"


def use_cpu_threads(threads: int) -> None:
    """Computes with `threads` threads: torch's, and the tokenizer's when it has not encoded a
    batch yet in this process. Seeds run side by side, each given its share of the cores, so a
    tokenizer that took every core would make them all wait on each other.

    The tokenizer's count is set in the environment, the only way to reach it: it replaces one
    the user set, and processes started later inherit it (the experiment's seed processes
    should).
    """
    torch.set_num_threads(threads)
    os.environ[TOKENIZER_THREADS_VARIABLE] = str(threads)
