"""Verifiers (reward functions): ``verifier(prompts, completions) -> list[float | None]``, batch in, list out.

``get_verifier(name, **options)`` builds one by name: ``math`` (symbolic equivalence via ``math-verify``, in worker
processes with a hard timeout), ``exact`` (normalised string equality of the extracted answer), ``arithmetic``
(integer answer of the built-in arithmetic task), ``last-integer`` (the last integer of a chatty answer),
``reasoning-gym`` (the dataset's own scorer), or
``"package.module:function"`` for a TRL-style reward function ``fn(prompts, completions, **kwargs)``. Register your
own with ``@register_verifier("name")``. Built-in verifiers count what happened in ``verifier.stats``.
"""

from reinforce_ada.verifiers.registry import (
    VERIFIERS,
    get_verifier,
    list_verifiers,
    register_verifier,
    verifier_stats,
)
from reinforce_ada.verifiers.exact import (  # noqa: E402  (registers)
    ArithmeticVerifier,
    ExactMatchVerifier,
    LastIntegerVerifier,
)
from reinforce_ada.verifiers.function import RewardFunctionVerifier  # noqa: E402
from reinforce_ada.verifiers.math import MathVerifier  # noqa: E402  (registers; math-verify imported lazily)
from reinforce_ada.verifiers.reasoning_gym import ReasoningGymVerifier  # noqa: E402  (registers; lazy import)

__all__ = [
    "VERIFIERS",
    "ArithmeticVerifier",
    "ExactMatchVerifier",
    "LastIntegerVerifier",
    "MathVerifier",
    "ReasoningGymVerifier",
    "RewardFunctionVerifier",
    "get_verifier",
    "list_verifiers",
    "register_verifier",
    "verifier_stats",
]
