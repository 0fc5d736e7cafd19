"""Generation backends behind one protocol, chosen by name: ``get_generator("hf" | "vllm", model, tokenizer, ...)``.

Each backend is one class implementing :class:`~reinforce_ada.sampling.protocols.Generator` (``generate(requests)``
-> one list of :class:`~reinforce_ada.types.Completion` per request, in order) plus ``load_weights(model)``, which
makes the backend sample from the trainer's current weights. Prompts are encoded by :func:`encode_prompt` everywhere,
so the trainer rebuilds exactly the prompt ids a completion was sampled from.

=========  ==========================================  ======================================================
name       class                                       when
=========  ==========================================  ======================================================
``hf``     :class:`~reinforce_ada.generation.hf.HFGenerator`      CPU, tests, small runs; samples the live model
``vllm``   :class:`~reinforce_ada.generation.vllm.VLLMGenerator`  GPU runs; an offline vLLM engine in the trainer's
                                                                 process, weights pushed each step
``openai`` :func:`~reinforce_ada.generation.server.server_generator` a running OpenAI-compatible server (vLLM's),
                                                                 weights pushed each step unless generation-only
=========  ==========================================  ======================================================

A new backend registers itself with :func:`register_generator`.
"""

from __future__ import annotations

from typing import Any, Callable

from reinforce_ada.errors import ConfigError
from reinforce_ada.generation.hf import HFGenerator
from reinforce_ada.generation.prompting import encode_prompt, prompt_messages
from reinforce_ada.generation.vllm import VLLMGenerator

__all__ = ["HFGenerator", "VLLMGenerator", "available_generators", "encode_prompt", "get_generator",
           "prompt_messages", "register_generator"]

_GENERATORS: dict[str, Callable[..., Any]] = {}


def register_generator(name: str, factory: Callable[..., Any] | None = None):
    """Register ``factory(model, tokenizer, **options)`` under ``name``; usable as a decorator."""

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _GENERATORS and _GENERATORS[name] is not fn:
            raise ValueError(f"a generator named {name!r} is already registered")
        _GENERATORS[name] = fn
        return fn

    return add(factory) if factory is not None else add


def available_generators() -> list[str]:
    return sorted(_GENERATORS)


def get_generator(name: str, model: Any, tokenizer: Any, **options: Any):
    """Build the generation backend ``name`` for ``model``/``tokenizer`` with backend-specific ``options``.

    >>> from reinforce_ada.models import build_char_tokenizer, build_tiny_model
    >>> get_generator("hf", build_tiny_model(), build_char_tokenizer(), max_new_tokens=4).max_new_tokens
    4
    """
    try:
        factory = _GENERATORS[name]
    except KeyError:
        raise ConfigError(f"unknown generator {name!r}; available: {', '.join(available_generators())}") from None
    return factory(model, tokenizer, **options)


register_generator("hf", HFGenerator)
register_generator("vllm", VLLMGenerator)


def _server_generator(model: Any, tokenizer: Any, **options: Any) -> Any:
    from reinforce_ada.generation.server import server_generator

    return server_generator(model, tokenizer, **options)


register_generator("openai", _server_generator)
