"""vLLM's side of :mod:`reinforce_ada.generation.vllm.shared_weights`: a weight-transfer engine that loads the
trainer's weights from a file in shared memory, registered in vLLM under
:data:`~reinforce_ada.generation.vllm.shared_weights.BACKEND`.

vLLM calls :func:`~reinforce_ada.generation.vllm.shared_weights.register_vllm_backend` in each of its processes (the
``vllm.general_plugins`` entry point in this package's metadata), so an engine built with ``weight_transfer_config={"backend": "reinforce_ada_shm"}`` -- ``AsyncLLM``, or
``vllm serve --weight-transfer-config '{"backend": "reinforce_ada_shm"}'`` -- creates :class:`SharedMemoryWeights`
in its worker. A weight update then runs vLLM's own lifecycle (``vllm.distributed.weight_transfer``):
``init_weight_transfer_engine`` maps the file once; ``start_weight_update`` begins a layer-wise reload (the weights
arrive in checkpoint format: on the CPU every linear weight is repacked for its kernel after loading);
``update_weights`` hands the model views of the mapped tensors (``model.load_weights`` copies them into the
engine's parameters, on a GPU too); ``finish_weight_update`` finishes the reload and re-packs layers whose weight is
tied to another's (:func:`~reinforce_ada.generation.vllm.weights.reprocess_tied_layers`, as the colocated path does).
The engine must run on the machine that wrote the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm.distributed.weight_transfer.base import (WeightTransferEngine, WeightTransferInitInfo,
                                                   WeightTransferUpdateInfo)

from reinforce_ada.generation.vllm.shared_weights import BACKEND, SharedWeights
from reinforce_ada.generation.vllm.weights import reprocess_tied_layers, tied_layers_quiet

__all__ = ["SharedMemoryWeights"]


@dataclass
class SharedMemoryInitInfo(WeightTransferInitInfo):
    path: str
    size: int


@dataclass
class SharedMemoryUpdateInfo(WeightTransferUpdateInfo):
    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    offsets: list[int] = field(default_factory=list)


class SharedMemoryWeights(WeightTransferEngine[SharedMemoryInitInfo, SharedMemoryUpdateInfo]):
    """Loads weights from the trainer's shared-memory file (module docstring)."""

    init_info_cls = SharedMemoryInitInfo
    update_info_cls = SharedMemoryUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.buffer: Any = None

    def init_transfer_engine(self, init_info: SharedMemoryInitInfo) -> None:
        import torch

        self.buffer = torch.from_file(init_info.path, shared=True, size=init_info.size, dtype=torch.uint8)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        import torch

        self.receive_weights(self.parse_update_info(update_info))
        if torch.accelerator.is_available():  # vLLM's base class synchronises unconditionally, which fails on the CPU
            torch.accelerator.synchronize()

    def receive_weights(self, update_info: SharedMemoryUpdateInfo) -> None:
        if self.buffer is None:
            raise RuntimeError(f"the {BACKEND} weight transfer was not initialised: call init_weight_transfer_engine")
        views = (SharedWeights._view(self.buffer, offset, dtype, shape) for offset, dtype, shape in
                 zip(update_info.offsets, update_info.dtype_names, update_info.shapes))
        with tied_layers_quiet():
            self.model.load_weights(zip(update_info.names, views))

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        with tied_layers_quiet():
            finalize_layerwise_reload(self.model, self.model_config)
        reprocess_tied_layers(self.model)

    def shutdown(self) -> None:
        self.buffer = None
