"""Exit rules: when has a prompt collected enough signal to stop sampling?

Reinforce-Ada (arXiv 2510.04996, Sec. 3) samples each still-active prompt in rounds and lets it *exit* once its pool
holds enough signal:

* ``positive``  -- at least ``min_positive`` positives (k = 1 in the paper: "Reinforce-Ada-pos").
* ``balanced``  -- at least ``n // 2`` positives and at least ``n - n // 2`` negatives, so a balanced group of ``n``
  can be drawn ("Reinforce-Ada-balance").
* ``mixed``     -- at least one positive and one negative: the least that makes a group with signal (not in the
  paper; balanced selection then keeps 1+3 or 2+2 for ``n = 4``).
* ``once``      -- exit after the first round whatever happened (plain GRPO).

A completion is *positive* when ``reward > positive_threshold`` (see :class:`reinforce_ada.config.SamplerConfig`).

Every rule has the signature ``rule(num_positive, num_negative, group_size) -> bool``; user callables with that
signature can be passed wherever a rule name is accepted.

Each built-in rule is also registered, right below its predicate, in its *threshold form*
``needs(num_positive, num_negative, group_size, min_positive) -> (need_pos, need_neg)``: how many more positives and
negatives it waits for (zero or less: met). The rule holds exactly when both are ``<= 0``; the Beta-posterior and
budget allocations (:mod:`reinforce_ada.core.allocation.exit_probability`) plan with this form. ``tests/core/test_exit_forms.py``
checks that the two forms of every rule agree.
"""

from __future__ import annotations

import functools
from typing import Callable

from reinforce_ada.core.registry import Registry

ExitRule = Callable[[int, int, int], bool]
ExitNeeds = Callable[[int, int, int, int], tuple[int, int]]

EXIT_RULES: Registry[ExitRule] = Registry("exit rule")
EXIT_THRESHOLDS: Registry[ExitNeeds] = Registry("exit rule threshold form")
"""Name -> ``needs(num_positive, num_negative, group_size, min_positive) -> (need_pos, need_neg)`` (unclipped)."""


@EXIT_RULES.register("positive")
def positive(num_positive: int, num_negative: int, group_size: int, min_positive: int = 1) -> bool:
    """Exit once the pool holds ``min_positive`` correct completions.

    The samplers also wait until the pool holds ``group_size`` completions before any rule can exit it. The reference
    code exits at the first positive even when fewer than ``n`` were drawn (``M < n``) and trains on that smaller
    group; here such a prompt is sampled for another round (docs/reliability.md).
    """
    return num_positive >= min_positive


@EXIT_THRESHOLDS.register("positive")
def positive_needs(num_positive: int, num_negative: int, group_size: int, min_positive: int = 1) -> tuple[int, int]:
    return min_positive - num_positive, 0


@EXIT_RULES.register("balanced")
def balanced(num_positive: int, num_negative: int, group_size: int) -> bool:
    """Exit once a group of ``group_size`` with ``n // 2`` positives and ``n - n // 2`` negatives can be drawn."""
    return num_positive >= group_size // 2 and num_negative >= group_size - group_size // 2


@EXIT_THRESHOLDS.register("balanced")
def balanced_needs(num_positive: int, num_negative: int, group_size: int, min_positive: int = 1) -> tuple[int, int]:
    return group_size // 2 - num_positive, group_size - group_size // 2 - num_negative


@EXIT_RULES.register("mixed")
def mixed(num_positive: int, num_negative: int, group_size: int) -> bool:
    """Exit once the pool holds at least one positive and one negative (any kept group of both has signal)."""
    return num_positive >= 1 and num_negative >= 1


@EXIT_THRESHOLDS.register("mixed")
def mixed_needs(num_positive: int, num_negative: int, group_size: int, min_positive: int = 1) -> tuple[int, int]:
    return 1 - num_positive, 1 - num_negative


@EXIT_RULES.register("once")
def once(num_positive: int, num_negative: int, group_size: int) -> bool:
    """GRPO: every prompt exits after its first round."""
    return True


@EXIT_THRESHOLDS.register("once")
def once_needs(num_positive: int, num_negative: int, group_size: int, min_positive: int = 1) -> tuple[int, int]:
    return 0, 0


def get_exit_rule(name_or_fn: str | ExitRule, *, min_positive: int = 1) -> ExitRule:
    """Resolve an exit rule; ``min_positive`` is bound for the ``positive`` rule."""
    rule = EXIT_RULES.get(name_or_fn)
    if rule is positive:
        return functools.partial(positive, min_positive=min_positive)
    return rule
