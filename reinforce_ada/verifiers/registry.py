"""The verifier registry: ``get_verifier(name, **options)`` builds a reward function from a name.

A *verifier* scores a batch: ``verifier(prompts, completions) -> list[float | None]`` where ``prompts[i]`` is the
:class:`~reinforce_ada.types.Prompt` of ``completions[i]`` and ``None`` means "could not score this one" (the sampler
then scores it 0 or drops it, per ``on_verifier_failure``). Built-in names are registered by the modules of this
package (``math``, ``exact``, ``arithmetic``, ``reasoning-gym``); a name of the form ``"package.module:function"``
imports a user reward function with TRL's signature ``fn(prompts, completions, **kwargs)`` and adapts it
(:class:`~reinforce_ada.verifiers.function.RewardFunctionVerifier`).

Every built-in verifier carries a ``stats`` dict of running counters (``completions``, ``timeouts``, ``failures``,
...) that a trainer can log; :func:`verifier_stats` reads it from any verifier (``{}`` when it has none).
"""

from __future__ import annotations

from typing import Any, Callable

from reinforce_ada.core.registry import Registry
from reinforce_ada.errors import ConfigError
from reinforce_ada.verifiers.base import AnswerVerifier, check_lengths  # noqa: F401 -- re-exported for older imports
from reinforce_ada.verifiers.function import RewardFunctionVerifier, import_function

VerifierFactory = Callable[..., Any]

VERIFIERS: Registry[VerifierFactory] = Registry("verifier")
"""Name -> factory; ``factory(**options)`` returns a verifier."""

register_verifier = VERIFIERS.register
"""Decorator: ``@register_verifier("name")`` on a class or function that takes the options and returns a verifier."""


def get_verifier(name: str | Callable, **options: Any):
    """Build the verifier registered as ``name`` with ``options``.

    ``name`` may also be ``"package.module:function"`` (a TRL-style reward function, wrapped; ``options`` go to
    :class:`~reinforce_ada.verifiers.function.RewardFunctionVerifier`) or a callable that already follows the
    verifier protocol (returned unchanged; ``options`` must then be empty).
    """
    if callable(name):
        if options:
            raise ValueError(f"options {sorted(options)} were given with a callable verifier; they would be ignored")
        return name
    if not isinstance(name, str) or not name:
        raise ConfigError(f"verifier name must be a non-empty string or a callable (got {name!r})")
    if name in VERIFIERS:
        return VERIFIERS.get(name)(**options)
    if ":" in name:
        return RewardFunctionVerifier(import_function(name), **options)
    raise ConfigError(f"unknown verifier {name!r}; registered: {', '.join(VERIFIERS.names())}, "
                     f"or 'package.module:function' for a TRL-style reward function")


def list_verifiers() -> list[str]:
    """The registered verifier names."""
    return VERIFIERS.names()


def verifier_stats(verifier: Any) -> dict[str, int]:
    """A copy of ``verifier.stats`` (running counters), or ``{}`` for a verifier without them."""
    stats = getattr(verifier, "stats", None)
    return dict(stats) if isinstance(stats, dict) else {}
