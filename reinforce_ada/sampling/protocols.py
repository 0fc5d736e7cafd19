"""What a generation backend and a reward function promise the samplers, and what a sampler promises its caller:
the requests, the protocols, the errors.

Every backend in :mod:`reinforce_ada.generation` and every integration imports these from here, never from the
sampling loop (:mod:`reinforce_ada.sampling.sampler`), so a backend depends only on this module and
:mod:`reinforce_ada.types`. A ``Generator`` answers a list of :class:`GenerationRequest` with one list of
:class:`~reinforce_ada.types.Completion` per request, in order; a ``Verifier`` scores a flat batch of completions,
``None`` meaning "could not score". A ``Sampler`` (every sampler :func:`reinforce_ada.sampling.factory.build_sampler`
makes: round-based, streaming, budget, DAPO) draws a step's prompts from a :class:`PromptSource` and returns the
:class:`~reinforce_ada.types.SampledBatch` the trainer updates on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from reinforce_ada.errors import VerifierError
from reinforce_ada.types import Completion, Prompt, PromptId, SampledBatch

__all__ = ["FatalGenerationError", "GenerationError", "GenerationRequest", "Generator", "PartialGenerationError",
           "PromptSource", "SampleRequest", "Sampler", "Verifier", "VerifierError", "is_transient"]


@dataclass(slots=True)
class GenerationRequest:
    """Ask the generator for ``num_samples`` completions of ``prompt``."""

    prompt: Prompt
    num_samples: int


@dataclass(frozen=True, slots=True)
class SampleRequest:
    """The streaming sampler's unit of work: the ``index``-th sample of ``prompt`` this step, requested in allocation
    ``wave``; ``request_id`` is unique per sample and the same across its retries."""

    prompt: Prompt
    index: int
    wave: int
    request_id: str

    @property
    def key(self) -> tuple[PromptId, int]:
        return (self.prompt.prompt_id, self.index)


@runtime_checkable
class Generator(Protocol):
    """A generation backend: one list of completions per request, in request order.

    Raising means the whole call failed. A backend whose samples fail one by one (an HTTP request per sample)
    raises :class:`PartialGenerationError` with the completions it did make; the sampler keeps them and asks again
    for the failed samples only.
    """

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]: ...


class Verifier(Protocol):
    """A reward function: ``prompts[i]`` is the prompt of ``completions[i]``; ``None`` means "could not score"."""

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> Sequence[float | None]: ...


class PromptSource(Protocol):
    """Where a sampler draws a step's prompts: an endless iterator of prompts (the trainer's seeded, epoch-shuffled
    :class:`~reinforce_ada.data.stream.PromptStream`), whose position a checkpoint records."""

    def __iter__(self) -> Iterator[Prompt]: ...

    def __next__(self) -> Prompt: ...

    def take(self, num: int) -> list[Prompt]:
        """The next ``num`` prompts, no prompt twice."""
        ...


@runtime_checkable
class Sampler(Protocol):
    """One training step's batch: :meth:`draw` takes the step's prompts from a source, :meth:`sample` turns them
    into the :class:`~reinforce_ada.types.SampledBatch` the trainer updates on. Its state (random generators, the
    cross-step memory) is part of a checkpoint.

    The round-based and streaming samplers sample exactly the ``num_prompts`` prompts they draw; DAPO
    (:class:`~reinforce_ada.sampling.sampler.DynamicSampler`) draws lazily, one generation batch at a time, until it
    has enough groups with signal, so only the prompts it used leave the source.
    """

    def draw(self, source: PromptSource, num_prompts: int) -> Iterable[Prompt]: ...

    def sample(self, prompts: Iterable[Prompt]) -> SampledBatch: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class GenerationError(RuntimeError):
    """The generator failed (after retries) or returned something malformed."""


class PartialGenerationError(GenerationError):
    """Some samples of a ``generate`` call failed for good, the others were made.

    ``outputs[i]`` holds the completions made for request ``i`` and ``num_failed[i]`` how many of its samples
    failed (``len(outputs[i]) + num_failed[i]`` is what it asked for).
    """

    def __init__(self, message: str, outputs: list[list[Completion]], num_failed: list[int]):
        super().__init__(message)
        self.outputs = outputs
        self.num_failed = num_failed


class FatalGenerationError(GenerationError):
    """A generator failure that another try cannot mend: the engine is dead, or the request is one the backend can
    never serve (a prompt longer than the model's context, a setting the server refuses). Never retried: the
    sampler stops the step at once and the error reaches the caller."""


NOT_TRANSIENT: tuple[type[BaseException], ...] = (
    FatalGenerationError, ValueError, TypeError, LookupError, AttributeError, NotImplementedError, ImportError,
    AssertionError)
"""Failures that come out the same however often the call is made: bad arguments (``ValueError``, ``TypeError``,
``IndexError``/``KeyError``), missing pieces (``AttributeError``, ``ImportError``, ``NotImplementedError``) and
:class:`FatalGenerationError`. A user error (``reinforce_ada.errors.UserError``) is a ``ValueError`` too."""


def is_transient(error: BaseException) -> bool:
    """Whether making the same generator call again may succeed: the one rule every retry in the library follows.

    Not transient: :data:`NOT_TRANSIENT`. Transient: everything else a backend raises -- timeouts, dropped
    connections, a plain :class:`GenerationError`, a ``RuntimeError`` from the engine (out of memory, a device
    hiccup)."""
    return not isinstance(error, NOT_TRANSIENT)
