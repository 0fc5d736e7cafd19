"""The base of every generation backend: ``generate``, plus what the trainer asks of a backend around it.

A backend samples completions (:meth:`GeneratorBase.generate`, the
:class:`~reinforce_ada.sampling.protocols.Generator` protocol). The trainer also tells it, every step, to sample from
the weights it just trained (:meth:`~GeneratorBase.load_weights`), that it may free memory while the policy trains
(:meth:`~GeneratorBase.sleep`), and at the end to let go of its engine (:meth:`~GeneratorBase.close`). Here each of
the three does nothing, which is right for a backend that samples the live model (HF) or holds no engine; vLLM
overrides them. So the trainer calls all three unconditionally and never asks a backend what it can do.
"""

from __future__ import annotations

from typing import Any, Sequence

from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion

__all__ = ["GeneratorBase"]


class GeneratorBase:
    """A generation backend (subclass it and implement :meth:`generate`)."""

    name = "generator"
    """The name it is registered under (:func:`reinforce_ada.generation.get_generator`)."""
    sequences_share_compute = False
    """True when every running sequence costs the engine its share of compute (vLLM on the CPU), so samples that
    may be cancelled are not free: the streaming sampler then fills idle slots sparingly
    (:attr:`~reinforce_ada.sampling.scheduler.StreamingOptions.fill_idle_per_wave` 1). False: a GPU, where decoding
    more sequences at once costs little."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """One list of completions per request, in request order."""
        raise NotImplementedError(f"{type(self).__name__} does not implement generate(requests)")

    def load_weights(self, model: Any) -> int | None:
        """Sample from ``model``'s current weights from now on (called after every optimizer step). Here: nothing to
        copy."""
        return None

    def sleep(self) -> None:
        """Free what the backend holds while the policy trains (vLLM: its KV cache); the next :meth:`generate` or
        :meth:`load_weights` wakes it. Here: nothing to free."""

    def close(self) -> None:
        """Let go of the engine and what it wrote (idempotent). Here: nothing to release."""
