"""Beta-posterior allocation: how many more samples does a prompt need to meet its exit rule?

The paper gives every active prompt the same ``M`` per round. Here each prompt's pass rate ``p`` has a Beta posterior
``Beta(alpha, beta)`` (a prior -- uniform, or carried over from earlier steps -- plus the positives and negatives
already scored this step). The number of positives ``J_k`` among ``k`` further samples is then Beta-binomial, and
for the threshold exit rules the prompt exits after ``k`` more samples exactly when

    J_k >= need_pos   and   k - J_k >= need_neg   and   k >= min_more

(``balanced``: ``need_pos = n//2 - num_positive``, ``need_neg = n - n//2 - num_negative``; ``positive``:
``need_pos = k_min - num_positive``, ``need_neg = 0``; ``mixed``: one of each, ``need_pos = 1 - num_positive``,
``need_neg = 1 - num_negative``; ``min_more = n - count`` so a full group can be drawn). The
request size is the smallest ``k`` whose exit probability reaches ``target``, within the remaining budget. When no
``k`` in the budget reaches it, the whole remaining budget is returned together with its (low) exit probability, so
the caller can decide to spend it or give the prompt up.

The Beta-binomial pmf is built by the sequential predictive recursion (Polya urn): after ``k`` draws with ``j``
positives the next is positive with probability ``(alpha + j) / (alpha + beta + k)``. The exit event is monotone in
``k`` for threshold rules, so the scan stops at the first ``k`` that reaches the target.

Pure: standard library only (plus the registry), so any framework can call it.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

from reinforce_ada.core.allocation.per_round import ALLOCATION_RULES
from reinforce_ada.core.exits import EXIT_RULES, EXIT_THRESHOLDS

__all__ = ["THRESHOLD_EXIT_RULES", "exit_needs", "exit_probabilities", "exit_probability", "smallest_request",
           "beta_request", "other_class_rate", "samples_before_give_up", "signal_rate"]

THRESHOLD_EXIT_RULES = ("balanced", "positive", "mixed", "once")
"""Exit rules with a threshold form (:data:`~reinforce_ada.core.exits.EXIT_THRESHOLDS`), i.e. the ones Beta
allocation supports, in the order error messages list them."""


def exit_needs(exit_rule: str, num_positive: int, num_negative: int, group_size: int,
               min_positive: int = 1) -> tuple[int, int]:
    """How many more positives and negatives the named threshold exit rule still needs (never negative): its
    threshold form from :mod:`reinforce_ada.core.exits`, clipped at 0.

    >>> exit_needs("balanced", 1, 0, 4)
    (1, 2)
    >>> exit_needs("positive", 0, 5, 4, min_positive=2)
    (2, 0)
    >>> exit_needs("mixed", 3, 0, 4)
    (0, 1)
    """
    if not isinstance(exit_rule, str) or exit_rule not in EXIT_THRESHOLDS:
        raise ValueError(f"exit rule {exit_rule!r} has no threshold form; beta allocation supports "
                         f"{', '.join(map(repr, THRESHOLD_EXIT_RULES))}")
    need_pos, need_neg = EXIT_THRESHOLDS.get(exit_rule)(num_positive, num_negative, group_size, min_positive)
    return max(0, need_pos), max(0, need_neg)


def exit_probabilities(alpha: float, beta: float, need_pos: int, need_neg: int, max_more: int,
                       min_more: int = 0) -> list[float]:
    """``P[k]`` = probability that ``k`` more samples meet the needs, for ``k = 0 .. max_more``.

    ``alpha, beta`` are the Beta posterior's parameters (> 0). Computed exactly by the predictive recursion.

    >>> [round(x, 4) for x in exit_probabilities(1.0, 1.0, 1, 1, 3)]  # uniform p: P(mixed) = 1 - 2/(k+1)
    [0.0, 0.0, 0.3333, 0.5]
    """
    if not (alpha > 0 and beta > 0 and math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError(f"Beta parameters must be finite and positive (got alpha={alpha}, beta={beta})")
    if max_more < 0:
        raise ValueError(f"max_more must be >= 0 (got {max_more})")
    pmf = [1.0]  # pmf[j] = P(J_k = j), k = 0
    probs = [1.0 if (need_pos == 0 and need_neg == 0 and min_more <= 0) else 0.0]
    for k in range(1, max_more + 1):
        total = alpha + beta + (k - 1)
        new = [0.0] * (k + 1)
        for j, mass in enumerate(pmf):
            if mass == 0.0:
                continue
            p_pos = (alpha + j) / total
            new[j + 1] += mass * p_pos
            new[j] += mass * (1.0 - p_pos)
        pmf = new
        if k < min_more:
            probs.append(0.0)
            continue
        lo, hi = need_pos, k - need_neg
        probs.append(sum(pmf[lo:hi + 1]) if hi >= lo else 0.0)
    return probs


def exit_probability(alpha: float, beta: float, need_pos: int, need_neg: int, budget: int,
                     min_more: int = 0) -> float:
    """Probability of meeting the needs within ``budget`` more samples (memoised on its arguments).

    >>> round(exit_probability(1.0, 1.0, 1, 0, 3), 4)   # uniform p: P(at least one positive in 3) = 1 - 1/4
    0.75
    """
    if budget <= 0:
        return 1.0 if (need_pos == 0 and need_neg == 0 and min_more <= 0) else 0.0
    return _cached_probabilities(float(alpha), float(beta), need_pos, need_neg, budget, min_more)[budget]


def smallest_request(alpha: float, beta: float, need_pos: int, need_neg: int, budget: int, target: float,
                     min_more: int = 0) -> tuple[int, float]:
    """The smallest ``k`` in ``1..budget`` with exit probability >= ``target``, and that probability.

    When no ``k`` reaches ``target``, returns ``(budget, P[budget])``. ``budget <= 0`` returns ``(0, 0.0)``.

    >>> smallest_request(1.0, 1.0, 1, 1, 32, 0.5)   # uniform prior, one of each class: P(k) = 1 - 2/(k+1)
    (3, 0.5)
    >>> smallest_request(1.0, 1.0, 1, 1, 2, 0.9)    # unreachable within the budget
    (2, 0.33333333333333337)
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1] (got {target})")
    if budget <= 0:
        return 0, 0.0
    probs = _cached_probabilities(float(alpha), float(beta), need_pos, need_neg, budget, min_more)
    for k in range(1, budget + 1):
        if probs[k] >= target - 1e-12:
            return k, probs[k]
    return budget, probs[budget]


@functools.lru_cache(maxsize=65536)
def _cached_probabilities(alpha: float, beta: float, need_pos: int, need_neg: int, budget: int,
                          min_more: int) -> tuple[float, ...]:
    return tuple(exit_probabilities(alpha, beta, need_pos, need_neg, budget, min_more))


def beta_request(num_drawn: int, num_positive: int, num_negative: int, max_samples: int, group_size: int, *,
                 exit_rule: str = "balanced", min_positive: int = 1, prior: tuple[float, float] = (1.0, 1.0),
                 target: float = 0.5) -> tuple[int, float]:
    """Request size and exit probability for a prompt's pool state under the Beta posterior.

    ``num_drawn`` counts completions already returned (the remaining budget is ``max_samples - num_drawn``);
    ``num_positive + num_negative`` is the pool's scored count.
    """
    need_pos, need_neg = exit_needs(exit_rule, num_positive, num_negative, group_size, min_positive)
    alpha, beta = prior[0] + num_positive, prior[1] + num_negative
    count = num_positive + num_negative
    return smallest_request(alpha, beta, need_pos, need_neg, max_samples - num_drawn, target,
                            min_more=group_size - count)


# -- the price of signal (streaming's ``min_signal_rate``) ----------------------------------------------------------
def signal_rate(alpha: float, beta: float, group_size: int, budget: int) -> float:
    """Best signal-prompts per sample over budgets ``k <= budget`` for a prompt with pass-rate prior
    ``Beta(alpha, beta)``: ``P(both classes within k) / E[samples drawn]``, where the prompt stops at the first sample
    that completes both classes but draws at least ``group_size``.

    >>> round(signal_rate(1.0, 1.0, 2, 2), 4)   # uniform p, two samples: P(one of each) = 1/3, 2 drawn -> 1/6
    0.1667
    """
    all_pos = all_neg = 1.0  # P(the first j samples are all positive / all negative)
    expected = best = 0.0
    for j in range(budget):
        # sample j+1 is drawn when j < n or both classes are not yet seen among the first j
        expected += 1.0 if j < group_size else all_pos + all_neg
        all_pos *= (alpha + j) / (alpha + beta + j)
        all_neg *= (beta + j) / (alpha + beta + j)
        if j + 1 >= group_size:
            best = max(best, (1.0 - all_pos - all_neg) / expected)
    return best


def other_class_rate(alpha: float, beta: float, num_positive: int, num_negative: int) -> float:
    """Posterior chance (``Beta(alpha, beta)``, counts included) that the next sample brings the class a one-class
    pool lacks; 1.0 when the pool has both.

    >>> other_class_rate(1.0, 4.0, 0, 3)   # three negatives on a uniform prior: P(positive) = 1 / 5
    0.2
    """
    if num_positive and num_negative:
        return 1.0
    return alpha / (alpha + beta) if not num_positive else beta / (alpha + beta)


def samples_before_give_up(alpha: float, beta: float, num_positive: int, num_negative: int, budget: int,
                           min_signal_rate: float) -> int:
    """Samples to request at most so that none is drawn past the give-up point of ``min_signal_rate``: after ``j``
    more samples of the class the pool already has (either class, for an empty pool), the chance of the other,
    ``other / (alpha + beta + j)``, must still be at least the rate. ``alpha``, ``beta``: the posterior, counts
    included; at most ``budget``, at least 1.

    >>> samples_before_give_up(0.4, 2.0, 0, 0, 128, 0.01)   # 0.4 / (2.4 + j) >= 0.01 up to j = 37
    38
    """
    if min_signal_rate <= 0 or (num_positive and num_negative):
        return budget
    if not num_positive + num_negative:
        other = min(alpha, beta)
    else:
        other = alpha if not num_positive else beta
    return min(budget, max(1, int(math.floor(other / min_signal_rate - alpha - beta)) + 1))


def _registered(exit_rule: str) -> Callable[[int, int, int, int, int, int], int]:
    def rule(num_drawn: int, num_positive: int, num_negative: int, samples_per_round: int, max_samples: int,
             group_size: int) -> int:
        return beta_request(num_drawn, num_positive, num_negative, max_samples, group_size,
                            exit_rule=exit_rule)[0]

    rule.__doc__ = (f"Smallest request with P(exit) >= 0.5 under a uniform prior, assuming the {exit_rule!r} exit "
                    "rule (for the round-based sampler; the streaming sampler takes the prior and target as options).")
    return rule


for _name in ("balanced", "positive", "mixed"):
    if f"beta-{_name}" not in ALLOCATION_RULES and _name in EXIT_RULES:
        ALLOCATION_RULES.register(f"beta-{_name}")(_registered(_name))
