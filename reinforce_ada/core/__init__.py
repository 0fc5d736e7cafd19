"""The pure core of Reinforce-Ada: exit rules, selection, advantages, losses and allocation.

Only the standard library, numpy and torch are imported here (a test enforces it), so every piece can be used
from any training framework; torch only where a loss is computed, so reading the registries needs none.
"""

from reinforce_ada.core.advantages import (
    ADVANTAGES,
    baseline_advantages,
    compute_advantages,
    group_advantages,
    group_statistics,
    pool_advantages,
    pool_importance_weights,
)
from reinforce_ada.core.allocation import (  # importing the package registers every allocation rule
    ALLOCATION_RULES,
    STEP_ALLOCATION_RULES,
    allocate_samples,
    get_allocation_rule,
)
from reinforce_ada.core.exits import EXIT_RULES, get_exit_rule
from reinforce_ada.core.losses import AGGREGATIONS, POLICY_LOSSES, aggregate, ppo_clip_loss, regularise
from reinforce_ada.core.registry import Registry
from reinforce_ada.core.selection import SELECTION_RULES, get_selection_rule

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "ALLOCATION_RULES",
    "EXIT_RULES",
    "POLICY_LOSSES",
    "SELECTION_RULES",
    "STEP_ALLOCATION_RULES",
    "Registry",
    "aggregate",
    "allocate_samples",
    "baseline_advantages",
    "compute_advantages",
    "get_allocation_rule",
    "get_exit_rule",
    "get_selection_rule",
    "group_advantages",
    "group_statistics",
    "pool_advantages",
    "pool_importance_weights",
    "ppo_clip_loss",
    "regularise",
]
