"""The one sampler factory: :func:`build_sampler` turns a sampler configuration into the sampler it names.

* :class:`~reinforce_ada.config.DynamicSamplingConfig`: :class:`~reinforce_ada.sampling.sampler.DynamicSampler` (DAPO).
* :class:`~reinforce_ada.config.SamplerConfig` with ``mode="rounds"``: :class:`~reinforce_ada.sampling.sampler.AdaptiveSampler`
  (the paper's loop; GRPO as one round); in budget mode (``allocation="budget"``) with a cross-step
  :class:`~reinforce_ada.sampling.memory.PassRateMemory` (decayed per visit by ``budget_half_life``, at most
  ``memory.max_evidence``, seeded from ``memory.seed``).
* ``mode="est"``: :class:`~reinforce_ada.sampling.estimate.EstSampler` (Reinforce-Ada-Est), with its memory
  (:func:`~reinforce_ada.sampling.estimate.est_memory`: prior and per-visit decay from ``config.est``, seeded from
  ``memory.seed``).
* ``mode="streaming"``: :class:`~reinforce_ada.sampling.streaming.StreamingSampler`, its
  :class:`~reinforce_ada.sampling.scheduler.StreamingOptions` built from ``config.streaming`` (plus research-only
  options given as keywords), with a memory when ``memory.enabled``. ``generator`` is a
  :class:`~reinforce_ada.sampling.streaming.SteppedEngine` (the colocated vLLM engine, stepped by the sampler), an
  :class:`~reinforce_ada.sampling.streaming.AsyncEngine` or a synchronous generator (wrapped in
  :class:`~reinforce_ada.sampling.sync_engine.AsyncGeneratorEngine`, with ``fill_idle=False`` unless given: its
  batches cannot be cancelled). A generator whose running sequences share the compute (``sequences_share_compute``:
  vLLM on the CPU) gets ``fill_idle_per_wave=1`` unless given: samples that may be cancelled are not free there.

The trainer, the research tools, benchmarks and tests all build their samplers here.
"""

from __future__ import annotations

import logging
from typing import Any

from reinforce_ada.config import DynamicSamplingConfig, MemoryConfig, SamplerConfig, StreamingConfig
from reinforce_ada.sampling.protocols import Sampler

__all__ = ["build_sampler", "new_memory"]

logger = logging.getLogger(__name__)


def new_memory(config: MemoryConfig, *, half_life: float | None) -> Any:
    """A :class:`~reinforce_ada.sampling.memory.PassRateMemory` with ``config``'s evidence cap, seeded from ``config.seed``
    (a ``select-prompts --pass-rates`` file) when given."""
    from reinforce_ada.sampling.memory import PassRateMemory

    memory = PassRateMemory(half_life=half_life, max_evidence=config.max_evidence)
    if config.seed:
        logger.debug("seeded pass-rate memory with %d prompts from %s", memory.seed_from_file(config.seed),
                    config.seed)
    return memory


def build_sampler(config: SamplerConfig | DynamicSamplingConfig, generator: Any, verifier: Any, *,
                  memory: Any = None, **streaming_options: Any) -> Sampler:
    """The sampler ``config`` names (see the module docstring).

    ``memory``: a :class:`~reinforce_ada.sampling.memory.PassRateMemory` to use instead of the one the config implies
    (streaming, budget mode or ``mode="est"`` only). ``streaming_options``: :class:`~reinforce_ada.sampling.scheduler.StreamingOptions`
    fields that are not settings of ``config.streaming`` (``prior``, ``max_request``, ``cap_samples``,
    ``max_attempts``, ``follow_ups_first``, ``fill_idle``, ``cancel_on_exit``); streaming only.
    """
    from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler

    if isinstance(config, DynamicSamplingConfig):
        if memory is not None or streaming_options:
            raise ValueError("a DynamicSamplingConfig (DAPO) takes no memory or streaming options")
        return DynamicSampler(generator, verifier, config)
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"build_sampler needs a SamplerConfig or DynamicSamplingConfig, got {type(config).__name__}")
    if config.mode == "streaming":
        return _streaming_sampler(config, generator, verifier, memory, streaming_options)
    if streaming_options:
        raise ValueError(f"streaming options {sorted(streaming_options)} need mode='streaming' "
                         f"(got mode={config.mode!r})")
    if config.mode == "est":
        from reinforce_ada.sampling.estimate import EstSampler

        return EstSampler(generator, verifier, config, memory)
    if config.is_budget:
        if memory is None:
            memory = new_memory(config.memory, half_life=None)  # budget mode decays per visit, not per step
        return AdaptiveSampler(generator, verifier, config, memory=memory)
    if memory is not None:
        raise ValueError("the round-based sampler keeps a memory only in budget mode (allocation='budget')")
    return AdaptiveSampler(generator, verifier, config)


def _streaming_sampler(config: SamplerConfig, generator: Any, verifier: Any, memory: Any,
                       extra: dict[str, Any]) -> Sampler:
    from reinforce_ada.sampling.scoring import check_backends
    from reinforce_ada.sampling.scheduler import StreamingOptions
    from reinforce_ada.sampling.streaming import SteppedEngine, StreamingSampler

    in_config = [name for name in extra if name in StreamingConfig.__dataclass_fields__]
    if in_config:
        raise ValueError(f"{in_config} are settings of config.streaming; set them there")
    options = {**config.streaming.options(), **extra}
    engine = generator
    if not isinstance(generator, SteppedEngine) and not callable(getattr(generator, "complete", None)):
        from reinforce_ada.sampling.sync_engine import AsyncGeneratorEngine

        check_backends(generator, verifier)
        engine = AsyncGeneratorEngine(generator)
        options.setdefault("fill_idle", False)  # a synchronous batch cannot be cancelled
    if getattr(generator, "sequences_share_compute", False):  # a CPU engine: cancelled samples are not free
        options.setdefault("fill_idle_per_wave", 1)
    if memory is None and config.memory.enabled:
        memory = new_memory(config.memory, half_life=config.memory.half_life)
    return StreamingSampler(engine, verifier, config, StreamingOptions(**options), memory)
