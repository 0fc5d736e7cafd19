"""The trainer's weights in shared memory, for a vLLM engine in another process on the same machine to load from.

A vLLM engine that does not live in the trainer's process -- ``AsyncLLM`` (its engine core and worker are processes
of their own) or ``vllm serve`` -- cannot be handed the model's tensors. Pickling them into every call (what
``collective_rpc`` of a ``torch.save`` payload does) copies the whole model three times per step and goes through
the engine core's message queue. Instead the weights live in one file in ``/dev/shm`` (memory, not disk): its layout
-- each parameter's name, dtype, shape and byte offset, under the checkpoint's names
(:func:`~reinforce_ada.generation.vllm.weights.named_weights`) -- is fixed when it is made; each sync copies the
parameters into it (one ``memcpy`` per tensor) and tells the engine to load. The worker maps the same file once and
loads the tensors from it in place through vLLM's weight-transfer API (``init_weight_transfer_engine``,
``start_weight_update``, ``update_weights``, ``finish_weight_update``) with the backend
:data:`BACKEND`, which this library registers in vLLM as a plugin (:mod:`reinforce_ada.generation.vllm.shm`); only
the layout travels through vLLM's control channel, once per sync.

No vLLM is imported here: a trainer that talks to a server needs none.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from reinforce_ada.generation.vllm.weights import named_weights

__all__ = ["BACKEND", "SharedWeights", "register_vllm_backend"]

BACKEND = "reinforce_ada_shm"
"""The weight-transfer backend's name in vLLM: ``--weight-transfer-config '{"backend": "reinforce_ada_shm"}'``."""

_ALIGN = 64


def register_vllm_backend() -> None:
    """Register vLLM's side of this transfer (:class:`~reinforce_ada.generation.vllm.shm.SharedMemoryWeights`) under
    :data:`BACKEND` with vLLM's weight-transfer factory: the ``vllm.general_plugins`` entry point, which vLLM calls in
    each of its processes. Cheap (the engine's module is imported when an engine uses it) and a no-op with a vLLM
    that has no weight-transfer API."""
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    except ImportError:
        return
    if BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(BACKEND, "reinforce_ada.generation.vllm.shm", "SharedMemoryWeights")


class SharedWeights:
    """A file in shared memory holding ``model``'s weights (layout fixed here); :meth:`write` refreshes them."""

    def __init__(self, model: Any, directory: str | None = None):
        import torch

        if directory is None:
            directory = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.names: list[str] = []
        self.dtype_names: list[str] = []
        self.shapes: list[list[int]] = []
        self.offsets: list[int] = []
        size = 0
        for name, tensor in named_weights(model):
            size = -(-size // _ALIGN) * _ALIGN
            self.names.append(name)
            self.dtype_names.append(str(tensor.dtype).removeprefix("torch."))
            self.shapes.append(list(tensor.shape))
            self.offsets.append(size)
            size += tensor.numel() * tensor.element_size()
        self.size = max(size, 1)
        handle, self.path = tempfile.mkstemp(prefix="reinforce-ada-weights-", suffix=".bin", dir=directory)
        os.close(handle)
        try:
            self._buffer = torch.from_file(self.path, shared=True, size=self.size, dtype=torch.uint8)
            self._views = [self._view(self._buffer, offset, dtype, shape)
                           for offset, dtype, shape in zip(self.offsets, self.dtype_names, self.shapes)]
        except BaseException:
            os.unlink(self.path)
            raise
        self.num_writes = 0

    @staticmethod
    def _view(buffer: Any, offset: int, dtype_name: str, shape: list[int]) -> Any:
        import math

        import torch

        dtype = getattr(torch, dtype_name)
        count = math.prod(shape)
        return buffer[offset: offset + count * dtype.itemsize].view(dtype).view(shape)

    def write(self, model: Any) -> int:
        """Copy ``model``'s weights into the file (same names, dtypes and shapes as when it was made); the bytes
        written."""
        written = 0
        count = 0
        for name, tensor in named_weights(model):  # each copied as it comes: a LoRA model is merged only meanwhile
            if count >= len(self.names):
                raise ValueError(f"parameter {name} is not in the shared weights' layout")
            view, expected = self._views[count], self.names[count]
            if name != expected or list(tensor.shape) != list(view.shape) or tensor.dtype != view.dtype:
                raise ValueError(f"parameter {name} ({tuple(tensor.shape)}, {tensor.dtype}) is not the shared "
                                 f"weights' {expected} ({tuple(view.shape)}, {view.dtype})")
            view.copy_(tensor)
            written += tensor.numel() * tensor.element_size()
            count += 1
        if count != len(self.names):
            raise ValueError(f"the model has {count} of the {len(self.names)} parameters the shared weights hold")
        self.num_writes += 1
        return written

    def init_info(self) -> dict[str, Any]:
        """What the engine's ``init_weight_transfer_engine`` needs: the file and its size."""
        return {"path": self.path, "size": self.size}

    def update_info(self) -> dict[str, Any]:
        """What one ``update_weights`` call needs: the layout (the engine maps the file once)."""
        return {"names": self.names, "dtype_names": self.dtype_names, "shapes": self.shapes, "offsets": self.offsets}

    def close(self) -> None:
        """Remove the file (the engine's mapping stays valid until it lets go); idempotent."""
        self._views = []
        self._buffer = None
        path, self.path = self.path, ""
        if path and os.path.exists(path):
            os.unlink(path)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass
