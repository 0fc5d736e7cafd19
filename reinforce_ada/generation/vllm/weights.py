"""Pushing the trainer's weights into a vLLM engine's model, by the load path that is valid for the engine's platform.

Two paths, chosen by :func:`weight_sync_path` (``VLLMGenerator(weight_sync="auto")``):

``direct``
    ``engine_model.load_weights(pairs)``: each parameter's ``weight_loader`` copies the checkpoint-named tensor into
    the engine's (fused, sharded) parameter. This is TRL 1.16's colocate path
    (``trl/generation/vllm_generation.py``). It is valid where the engine keeps its parameters in that layout after
    loading: CUDA / ROCm / XPU engines of unquantized models.
``reload``
    vLLM's in-place layer-wise reload, ``model_runner.reload_weights(weights_iterator=..., is_checkpoint_format=True)``
    (``vllm/model_executor/model_loader/reload``): each layer's checkpoint-format parameters are restored on the meta
    device, the weights are loaded into them, the layer's ``process_weights_after_loading`` runs again and the result
    is copied into the tensors the engine runs with. This is the path for engines that transform their weights after
    loading. vLLM's CPU backend does: ``UnquantizedLinearMethod.process_weights_after_loading`` hands each linear
    weight to ``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``, which packs it for the oneDNN / SGL GEMM
    kernel (held by the closure ``layer.cpu_linear``) and replaces ``layer.weight`` by an empty parameter without a
    ``weight_loader`` -- so the direct path raises ``'Parameter' object has no attribute 'weight_loader'`` there.

What vLLM 0.32's reload leaves stale, and how it is mended here: a layer whose weight is *tied* to another layer's
(``lm_head`` sharing ``embed_tokens.weight``: the tiny model, Qwen2-0.5B/1.5B, SmolLM2) receives no weight of its own
during the reload, so vLLM puts its old kernel tensors back ("ParallelLMHead: Failed to load weights"). The shared
weight itself is updated (through the embedding layer), but on the CPU the head's packed copy of it -- made once, when
the engine was built -- is what computes the logits: after a large update the engine's log-probs were off by up to 15
nats, and by up to 1.39 after one ordinary step. :func:`reprocess_tied_layers` runs such layers'
``process_weights_after_loading`` again, which re-packs the head from the updated shared weight; afterwards the engine's
log-probs of sampled tokens equal the trainer's to 1e-5 in float32 (``tests/generation/test_vllm_generator.py``).
Re-running it is safe for the layers it touches: the embedding method keeps its weight (``remove_weight=False``) and
does nothing on GPUs.

An ``AsyncLLM`` built without this library's shared-memory backend runs its worker two processes away; its weights go
as one ``torch.save`` payload (:func:`pack_weights`) that :func:`load_packed_weights_on_worker` unpacks there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

logger = logging.getLogger(__name__)

__all__ = ["WEIGHT_SYNC_PATHS", "load_into_engine", "load_packed_weights_on_worker", "named_weights", "pack_weights",
           "reprocess_tied_layers", "servable_checkpoint", "weight_sync_path"]

WEIGHT_SYNC_PATHS = ("auto", "direct", "reload")
"""``weight_sync`` values: ``auto`` picks ``reload`` on vLLM's CPU platform and ``direct`` elsewhere."""

# Wrappers that rename parameters but are not part of the checkpoint's names.
_WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")
# vLLM's layer-wise reload warns for every layer that received no weight; for tied layers that is expected and mended
# by reprocess_tied_layers, so those warnings are held back while the reload runs.
_RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


def named_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` pairs of ``model`` under the names of its checkpoint (what ``load_weights`` expects).

    Parameters shared between modules (tied embeddings) appear once, as in ``named_parameters``; wrapper prefixes
    added by activation checkpointing or ``torch.compile`` are removed. A PEFT (LoRA) model has its adapters merged
    while the weights are read -- the engine serves the merged base model -- and unmerged once the iteration ends.
    """
    is_peft = callable(getattr(model, "merge_adapter", None)) and callable(getattr(model, "unmerge_adapter", None))
    if is_peft:
        model.merge_adapter()
    try:
        adapter_prefix = getattr(model, "prefix", "lora_") if is_peft else None
        for name, param in model.named_parameters():
            if is_peft:
                if adapter_prefix in name or "original_module" in name:
                    continue  # adapter weights are merged; a module-to-save's frozen original is not served
                name = name.removeprefix("base_model.model.").replace(".base_layer", "")
                name = name.replace("modules_to_save.default.", "")
            for prefix in _WRAPPER_PREFIXES:
                name = name.replace(prefix, "")
            yield name, param.detach()
    finally:
        if is_peft:
            model.unmerge_adapter()


def servable_checkpoint(model: Any, tokenizer: Any,
                        model_path: str | None = None) -> tuple[str, tempfile.TemporaryDirectory | None]:
    """``(checkpoint the engine loads, temporary folder the caller owns or None)``.

    ``model_path`` when given; ``model`` itself when it is a path; a live model's ``name_or_path`` when it names a
    hub model (not a local path) or a folder holding ``config.json``, safetensors weights and a tokenizer. Anything
    else (a model built in memory, a shipped start model without tokenizer files, a GGUF folder) is written with its
    tokenizer to a new temporary folder (safetensors), returned as the second value: removing it is the caller's job.
    """
    if model_path:
        return str(model_path), None
    if isinstance(model, (str, os.PathLike)):
        return str(model), None
    name = str(getattr(model, "name_or_path", "") or "")
    if name and (not os.path.exists(name) or _complete_checkpoint(Path(name))):
        return name, None
    if not callable(getattr(model, "save_pretrained", None)) or not callable(getattr(tokenizer, "save_pretrained",
                                                                                     None)):
        raise ValueError("VLLMGenerator needs a checkpoint for the engine: the model has no usable name_or_path and "
                         "cannot be written with save_pretrained; pass model_path=")
    folder = tempfile.TemporaryDirectory(prefix="reinforce-ada-vllm-")
    try:
        _write_checkpoint(model, tokenizer, Path(folder.name))
    except BaseException:
        folder.cleanup()
        raise
    logger.info("wrote the model and its tokenizer to %s for the vLLM engine (removed when the generator closes)",
                folder.name)
    return folder.name, folder


def _write_checkpoint(model: Any, tokenizer: Any, folder: Path) -> None:
    """``model`` (a PEFT model: merged, under the base model's names) and ``tokenizer`` as a checkpoint folder."""
    if callable(getattr(model, "merge_adapter", None)):
        from safetensors.torch import save_file

        tensors = {name: tensor.clone().contiguous().cpu() for name, tensor in named_weights(model)}  # while merged
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        model.get_base_model().config.save_pretrained(folder)
    else:
        model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def _complete_checkpoint(folder: Path) -> bool:
    has_tokenizer = (folder / "tokenizer.json").exists() or (folder / "tokenizer_config.json").exists()
    return (folder / "config.json").exists() and any(folder.glob("*.safetensors")) and has_tokenizer


def weight_sync_path(requested: str, platform: Any = None) -> str:
    """``direct`` or ``reload`` for ``requested`` (one of :data:`WEIGHT_SYNC_PATHS`) on vLLM's current platform."""
    if requested not in WEIGHT_SYNC_PATHS:
        raise ValueError(f"weight_sync must be one of {', '.join(WEIGHT_SYNC_PATHS)}, got {requested!r}")
    if requested != "auto":
        return requested
    if platform is None:
        from vllm.platforms import current_platform as platform
    return "reload" if platform.is_cpu() else "direct"


def load_into_engine(runner: Any, weights: Iterable[tuple[str, Any]], path: str) -> None:
    """Load checkpoint-named ``weights`` into the model of vLLM ``runner`` (a model runner) by ``path``."""
    model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    if path == "direct":
        model.load_weights(weights)
        return
    with tied_layers_quiet():
        runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    reprocess_tied_layers(model)


@contextlib.contextmanager
def tied_layers_quiet() -> Iterator[None]:
    """Hold back vLLM's reload warning for every layer that received no weight while a layer-wise reload runs: for
    tied layers it is expected, and :func:`reprocess_tied_layers` mends them (module doc)."""
    reload_logger = logging.getLogger(_RELOAD_LOGGER)
    level = reload_logger.level
    reload_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        reload_logger.setLevel(level)


def reprocess_tied_layers(model: Any) -> list[str]:
    """Run ``process_weights_after_loading`` again for every layer whose parameters all belong to an earlier layer too
    (tied weights), so kernels built from them see the reloaded values; returns the layers' names (module doc)."""
    owner: dict[int, str] = {}
    tied: list[tuple[str, Any]] = []
    for name, module in model.named_modules():
        params = list(module.parameters(recurse=False))
        if params and all(id(p) in owner for p in params) and getattr(module, "quant_method", None) is not None:
            tied.append((name, module))
        for p in params:
            owner.setdefault(id(p), name)
    for _, module in tied:
        module.quant_method.process_weights_after_loading(module)
    return [name for name, _ in tied]


def load_weights_on_worker(worker: Any, weights: list[tuple[str, Any]], path: str) -> int:
    """Run inside a vLLM worker (``collective_rpc``): load ``weights`` into its model by ``path``; return how many."""
    load_into_engine(worker.model_runner, weights, path)
    return len(weights)


def pack_weights(weights: Sequence[tuple[str, Any]]) -> bytes:
    """``(name, tensor)`` pairs as one ``torch.save`` payload: the engine-core process re-pickles what it receives
    for its worker process, and tensors decoded from vLLM's msgpack are views of a message buffer that cannot be
    pickled ("cannot pickle memoryview objects"); plain bytes pass both hops."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save([(name, tensor.detach().cpu().contiguous()) for name, tensor in weights], buffer)
    return buffer.getvalue()


def load_packed_weights_on_worker(worker: Any, payload: bytes, path: str) -> int:
    """Run in vLLM's worker process (``collective_rpc``): unpack :func:`pack_weights`' payload and load it by
    ``path`` (:func:`~reinforce_ada.generation.vllm.weights.load_weights_on_worker`)."""
    import io

    import torch

    from reinforce_ada.generation.vllm.weights import load_weights_on_worker

    weights = torch.load(io.BytesIO(payload), weights_only=True)
    return load_weights_on_worker(worker, weights, path)
