"""The trainer's weights in shared memory: another mapping of the file (what a vLLM worker holds) sees every write,
under the checkpoint's names; a model with other parameters is refused; the file goes when closed."""

import os

import pytest
import torch

from reinforce_ada.generation.vllm.shared_weights import SharedWeights
from reinforce_ada.generation.vllm.weights import named_weights
from reinforce_ada.models import build_tiny_model


def mapped(shared: SharedWeights) -> dict[str, torch.Tensor]:
    """The tensors as a worker maps them: the file opened again, views at the layout's offsets."""
    info = shared.update_info()
    buffer = torch.from_file(shared.init_info()["path"], shared=True, size=shared.init_info()["size"],
                             dtype=torch.uint8)
    return {name: SharedWeights._view(buffer, offset, dtype, shape)
            for name, dtype, shape, offset in zip(info["names"], info["dtype_names"], info["shapes"], info["offsets"])}


def test_every_write_reaches_another_mapping_of_the_file():
    model = build_tiny_model(seed=0)
    shared = SharedWeights(model)
    try:
        assert shared.path.startswith("/dev/shm/") or not os.path.isdir("/dev/shm")
        worker = mapped(shared)
        assert list(worker) == [name for name, _ in named_weights(model)]  # tied lm_head once
        assert shared.write(model) == sum(p.numel() * p.element_size() for p in model.parameters())
        assert all(torch.equal(worker[name], tensor) for name, tensor in named_weights(model))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        shared.write(model)
        assert all(torch.equal(worker[name], tensor) for name, tensor in named_weights(model))
        assert all(offset % 64 == 0 for offset in shared.offsets)
    finally:
        shared.close()
    assert not os.path.exists(shared.init_info()["path"] or "/nonexistent")


def test_a_model_with_other_parameters_is_refused():
    shared = SharedWeights(build_tiny_model(seed=0))
    try:
        with pytest.raises(ValueError, match=r"parameter .* is not the shared weights'"):
            shared.write(build_tiny_model(seed=0, hidden_size=32))
    finally:
        shared.close()
        shared.close()  # idempotent


def test_the_vllm_plugin_registers_the_backend_once_and_is_a_no_op_without_vllm():
    import importlib.util

    from reinforce_ada.generation.vllm.shared_weights import BACKEND, register_vllm_backend

    register_vllm_backend()
    register_vllm_backend()  # vLLM calls it in every process, possibly more than once
    if importlib.util.find_spec("vllm") is not None:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

        assert BACKEND in WeightTransferEngineFactory._registry
