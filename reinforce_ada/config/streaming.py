"""The two nested sections of :class:`~reinforce_ada.config.SamplerConfig`: ``streaming`` (the options of
``mode="streaming"`` a run sets) and ``memory`` (the cross-step pass-rate memory).

The sampler factory (:func:`reinforce_ada.sampling.factory.build_sampler`) turns ``streaming`` into the scheduler's
:class:`~reinforce_ada.sampling.scheduler.StreamingOptions` (which also holds research-only knobs: prior, request cap,
``fill_idle``, ...); a test checks that the defaults of the fields they share agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reinforce_ada.config.checks import _check_choice, _check_types, expand_home
from reinforce_ada.errors import ConfigError

__all__ = ["MemoryConfig", "StreamingConfig"]


@dataclass
class StreamingConfig:
    """Settings of the streaming sampler (``sampler.mode="streaming"``); ignored by the round-based one."""

    allocation: str = "beta"
    """Request sizes: ``beta`` or ``fixed``. From a Beta posterior on each prompt's pass rate (``beta``) or fixed M
    (``fixed``, the paper's sizes without the barrier)."""
    target: float = 0.3
    """With ``beta`` allocation: the probability of meeting the exit rule each request aims for."""
    give_up_below: float = 0.0
    """Give a prompt up below this chance. Stop sampling a prompt once what its remaining budget can still buy is this
    unlikely (0: never). For a
    one-class pool that is the posterior chance of seeing the other class; otherwise the chance of exiting."""
    min_signal_rate: float = 0.0
    """The price of signal. Give up a one-class pool once the posterior chance that its next sample is of the missing
    class falls below this, and skip a prompt whose best signal-prompts per sample is below it (0: off; with memory
    it stops hopeless prompts early and lets promising ones use ``budget``)."""
    budget: int | None = None
    """Most samples one prompt may draw in a step (None: M * N, the paper's)."""
    max_in_flight: int = 256
    """Most completions requested at once."""
    skip_below: float = 0.0
    """Memory: skip prompts below this chance of signal. With ``memory.enabled``, a prompt whose remembered chance of
    any signal within the budget is below this gets no samples."""
    cap_below: float = 0.0
    """Memory: cap prompts below this chance of exiting. With ``memory.enabled``, the budget of a prompt whose
    remembered chance of exiting is below this is capped."""

    def __post_init__(self) -> None:
        _check_types(self, prefix="streaming.")
        _check_choice("streaming.allocation", self.allocation, ["beta", "fixed"])
        if not 0.0 < self.target <= 1.0:
            raise ConfigError(f"streaming.target must be in (0, 1] (got {self.target})")
        for name in ("give_up_below", "min_signal_rate", "skip_below", "cap_below"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"streaming.{name} must be in [0, 1] (got {getattr(self, name)})")
        if self.max_in_flight <= 0:
            raise ConfigError(f"streaming.max_in_flight must be positive (got {self.max_in_flight})")
        if self.budget is not None and self.budget <= 0:
            raise ConfigError(f"streaming.budget must be a positive integer or None (got {self.budget})")

    def options(self) -> dict[str, Any]:
        """These settings as :class:`~reinforce_ada.sampling.scheduler.StreamingOptions` keyword arguments."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class MemoryConfig:
    """The cross-step pass-rate memory (:class:`~reinforce_ada.sampling.memory.PassRateMemory`): per-prompt pass-rate
    estimates kept across steps (content-hashed, decayed, checkpointed), never mixed into a step's pool statistics.
    The streaming sampler keeps one when ``enabled``; budget mode (``allocation="budget"``) always keeps one (decayed
    per visit by ``budget_half_life``, not by ``half_life``); so does ``mode="est"`` (decayed per visit by
    ``est.decay``, with the prior ``est.prior_alpha``/``est.prior_beta``, uncapped)."""

    enabled: bool = False
    """Streaming: keep the memory. It sizes first requests and lets ``streaming.skip_below`` and
    ``streaming.cap_below`` skip or cap hopeless/saturated prompts."""
    half_life: float = 8.0
    """Streaming: the evidence's half-life in steps. After it an old observation counts half (budget mode: see
    ``budget_half_life``)."""
    max_evidence: float = 128.0
    """Most (decayed) samples remembered per prompt (streaming and budget mode)."""
    seed: str | None = None
    """A ``select-prompts`` pass-rate file to start from. For streaming with ``enabled``, budget mode, or
    ``mode="est"``."""

    def __post_init__(self) -> None:
        _check_types(self, prefix="memory.")
        expand_home(self, ("seed",))
        for name in ("half_life", "max_evidence"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"memory.{name} must be positive (got {getattr(self, name)})")
