"""A process given a number of CPU threads tokenises with that many too."""

import os
import subprocess
import sys

import pytest

from active_learning.threads import TOKENIZER_THREADS_VARIABLE

# Run in a fresh interpreter: the tokenizer's thread pool starts once per process, and this
# test process may have started it already. Prints the threads a batch encode added.
PROBE = """
import os, sys
from active_learning.threads import use_cpu_threads
from active_learning.tokenizer import build_byte_tokenizer
if sys.argv[1] != "default":
    use_cpu_threads(int(sys.argv[1]))
tokenizer = build_byte_tokenizer()
before = len(os.listdir("/proc/self/task"))
tokenizer(["1 + 1 = 2"] * 20000)
print(len(os.listdir("/proc/self/task")) - before)
"""


def threads_added(threads: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (TOKENIZER_THREADS_VARIABLE, "TOKENIZERS_PARALLELISM")}
    probe = subprocess.run([sys.executable, "-c", PROBE, threads], capture_output=True, text=True, check=True, env=env)
    return int(probe.stdout.split()[-1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="with one core the tokenizer takes one thread anyway")
def test_the_tokenizer_keeps_to_the_threads_given() -> None:
    assert threads_added("default") > 1
    assert threads_added("1") == 1
