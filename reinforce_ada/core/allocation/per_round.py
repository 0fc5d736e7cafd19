"""Allocation: how many completions each still-active prompt gets in the next round.

The paper gives every active prompt the same ``M`` (``samples_per_round``) per round, which is the ``fixed`` rule.
Every rule is capped so that a prompt never receives more than ``max_samples`` (``M * N``) completions in one step.
Signature: ``rule(num_drawn, num_positive, num_negative, samples_per_round, max_samples, group_size) -> int``.

*Step* allocation rules (:data:`STEP_ALLOCATION_RULES`) decide for the whole batch at once, because they share one
budget per step: ``rule(states, budget_left, *, samples_per_round, max_samples, group_size, exit_rule,
min_positive, skip) -> list[int]``, one request size per still-active prompt (``"budget"``, in
:mod:`reinforce_ada.core.allocation.budget`). ``SamplerConfig.allocation`` names a rule of either kind.
"""

from __future__ import annotations

from typing import Callable

from reinforce_ada.core.registry import Registry

AllocationRule = Callable[[int, int, int, int, int, int], int]

ALLOCATION_RULES: Registry[AllocationRule] = Registry("allocation rule")

StepAllocationRule = Callable[..., list[int]]

STEP_ALLOCATION_RULES: Registry[StepAllocationRule] = Registry("step allocation rule")


@ALLOCATION_RULES.register("fixed")
def fixed(
    num_drawn: int, num_positive: int, num_negative: int, samples_per_round: int, max_samples: int, group_size: int
) -> int:
    """The paper's rule: ``M`` more completions per round, within the ``M * N`` budget."""
    return max(0, min(samples_per_round, max_samples - num_drawn))


def get_allocation_rule(name_or_fn: str | AllocationRule) -> AllocationRule:
    return ALLOCATION_RULES.get(name_or_fn)
