import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The tiny model is far faster on one thread than on threads fighting over a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
