"""What vLLM is on this machine: the optional package itself, imported with an install hint, the platform it will run
on, and the memory share an engine takes there unless told otherwise -- what the colocated and the ``AsyncLLM``
engines both ask before they build anything."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_MEMORY_SHARE", "current_platform", "import_vllm"]

DEFAULT_MEMORY_SHARE = {"gpu": 0.4, "cpu": 0.1}
"""``gpu_memory_utilization`` when none is given: on a GPU, of its memory; on vLLM's CPU platform, of the RAM
(:mod:`~reinforce_ada.generation.vllm.engine`'s docstring)."""


def import_vllm(user: str) -> Any:
    """The ``vllm`` package, or an ImportError saying that ``user`` (the class that needs it) needs it and how to
    install it."""
    try:
        import vllm
    except ImportError as err:
        raise ImportError(f"{user} needs vLLM, which is not installed: pip install reinforce-ada[vllm]") from err
    return vllm


def current_platform(vllm: Any) -> Any:
    """vLLM's ``current_platform`` (what the engine will run on)."""
    platforms = getattr(vllm, "platforms", None)
    if platforms is None:
        import vllm.platforms as platforms
    return platforms.current_platform
