import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # The tiny model gains little from a second thread, and when other jobs share the two cores
    # (as they do in CI) OpenMP threads that spin-wait on each other make training several
    # times slower.
    torch.set_num_threads(1)
