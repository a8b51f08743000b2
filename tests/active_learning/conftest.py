import os

import pytest
import torch

from active_learning.threads import TOKENIZER_THREADS_VARIABLE


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # The tiny model gains little from a second thread, and when other jobs share the two cores
    # (as they do in CI) OpenMP threads that spin-wait on each other make training several
    # times slower.
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _tokenizer_threads_restored():
    # The experiment sets the tokenizer's thread count in this process's environment, which
    # every process started later inherits: the workers of other tests would keep to it.
    before = os.environ.get(TOKENIZER_THREADS_VARIABLE)
    yield
    if before is None:
        os.environ.pop(TOKENIZER_THREADS_VARIABLE, None)
    else:
        os.environ[TOKENIZER_THREADS_VARIABLE] = before
