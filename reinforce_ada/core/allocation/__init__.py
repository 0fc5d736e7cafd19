"""Allocation: how many samples a prompt gets -- every rule this library has for it, one module each.

* :mod:`~reinforce_ada.core.allocation.per_round` -- the per-round rules and their registries: the paper's ``fixed``
  (``M`` more per round, within ``M * N``) and the registry of *step* rules, which share one budget over a batch;
* :mod:`~reinforce_ada.core.allocation.exit_probability` -- the Beta-binomial chance that ``k`` more samples meet a
  prompt's exit rule, and the ``beta-*`` per-round rules built on it (the smallest request that reaches a target);
* :mod:`~reinforce_ada.core.allocation.budget` -- budget mode: a fixed number of samples per step spread greedily by
  that chance (the ``"budget"`` step rule);
* :mod:`~reinforce_ada.core.allocation.proportional` -- Reinforce-Ada-Est's one-shot allocation: counts proportional
  to the objective's sample weights, clipped, summing exactly to the budget (water-filling, then largest-remainder
  rounding), and the summary of where an allocation went.

Importing this package registers every rule (``SamplerConfig.allocation`` names one of
:data:`ALLOCATION_RULES` or :data:`STEP_ALLOCATION_RULES`). The weights the proportional allocation divides by live
in :mod:`reinforce_ada.core.objectives`, which decides what a prompt is worth, not how many samples that buys.

What is *not* here: the streaming scheduler's per-prompt state
(:mod:`reinforce_ada.sampling.prompt_allocation`). It holds a step's mutable state -- a pool, requests in flight, the
decisions made -- and reads the sampler's config, while everything here is a pure function of plain numbers that any
framework can call (core/ imports only the standard library, numpy and torch; a test enforces it). It asks these
rules for its answers and stays with the scheduler that owns it.
"""

from reinforce_ada.core.allocation.per_round import (
    ALLOCATION_RULES,
    STEP_ALLOCATION_RULES,
    AllocationRule,
    StepAllocationRule,
    get_allocation_rule,
)
import reinforce_ada.core.allocation.exit_probability  # noqa: F401,E402 -- registers the beta-* rules
import reinforce_ada.core.allocation.budget  # noqa: F401,E402 -- registers the "budget" step rule
from reinforce_ada.core.allocation.proportional import HARD_BELOW, allocate_samples, allocation_summary

__all__ = [
    "ALLOCATION_RULES",
    "HARD_BELOW",
    "STEP_ALLOCATION_RULES",
    "AllocationRule",
    "StepAllocationRule",
    "allocate_samples",
    "allocation_summary",
    "get_allocation_rule",
]
