"""Budget allocation: a fixed number of samples per step, spread over the batch's prompts by predicted value.

The paper gives every prompt up to ``M * N`` samples and lets the exit rule decide; its cost per step is not fixed
(1.5-2.8x GRPO's in the paper). Budget mode fixes the step's total ``B`` (default ``n x prompts``: what GRPO with
group size ``n`` draws) and spends it where it is most likely to buy a group with signal, in the spirit of VIP
(per-prompt rollout allocation under a fixed budget from predicted pass rates), Knapsack-RL and GRESO (skip prompts
predicted to give zero variance).

**Value.** A prompt's pass rate ``p`` has the Beta posterior ``Beta(a + s, b + f)``: the prior ``(a, b)`` comes from
the cross-step memory (:class:`reinforce_ada.sampling.memory.PassRateMemory`), ``s, f`` are the positives and negatives
already scored this step. The value of ``k`` more samples is the posterior probability that the pool then meets the
exit rule, with a full group of ``n`` drawable:

    V(k) = P(J_k >= need_pos  and  k - J_k >= need_neg  and  k >= n - (s + f)),    J_k ~ BetaBinomial(k, a + s, b + f)

(:func:`reinforce_ada.core.allocation.exit_probability.exit_probabilities`). For the ``mixed`` exit rule (one positive and one
negative) this is exactly the probability that the kept group has signal; for ``balanced`` it is the probability
that a balanced group can be drawn. An empty pool of a uniform-prior prompt has ``V(k) = 1 - 2/(k+1)`` (mixed).

**Allocation** (:func:`allocate`). Maximise ``sum_i V_i(k_i)`` subject to ``sum_i k_i <= B`` and ``k_i <= cap_i``
greedily on each prompt's upper concave envelope: repeatedly give the increment with the highest value per sample,

    rate_i = max_j (V_i(k_i + j) - V_i(k_i)) / j,        j = 1 .. min(cap_i - k_i, budget left),

until the budget is spent or no increment has positive value. ``V`` is 0 until a group of ``n`` is possible, so a
prompt's first increment always fills a group: no prompt is planned fewer than ``n`` samples unless it gets none. A
prompt that is confidently saturated (``p ~ 1``) or hopeless (``p ~ 0``) has a small ``V`` and is skipped whenever the
budget buys more signal elsewhere. Because the marginal values shrink as ``k`` grows, the greedy is the optimum of
the concave relaxation (the classical result for separable concave resource allocation).

**Rounds** (:func:`budget`, registered as the step allocation rule ``"budget"``). The plan is recomputed every round
from the remaining budget and the pools so far; only its first part is drawn: a prompt without a full group draws
exactly the missing ``n - count`` (the first round is GRPO's groups of ``n``, on the prompts worth them; or a smaller
*probe*, ``first_request``), a prompt with a full group draws at most ``M`` (``samples_per_round``) more. Prompts that exited (their pool has signal under
``mixed``) stop; what the plan had set aside for later goes to the prompts still without it. With an empty memory
every prompt has the same value, so the first round gives each ``n`` -- GRPO -- and a budget above ``n x prompts``
goes, round by round, to the prompts whose groups still have no signal.

**Price of signal** (``SamplerConfig.budget_min_signal_rate``, GRESO's skipping without re-spending). With a price
``r > 0`` the greedy gives only increments worth at least ``r`` per sample and leaves the rest of the budget unspent:
a prompt remembered as saturated or hopeless is skipped and its samples are *not* given to others, so the step is
cheaper (fewer generated tokens) and keeps most of its signal groups. An unseen prompt's first group is worth
``V(n) / n = (n - 1) / ((n + 1) n)`` per sample under ``mixed`` (0.15 for ``n = 4``), so a lower price never skips it;
a skipped prompt's memory decays per visit (``budget_half_life``) and it is retried later.

**Over-draw** (``SamplerConfig.budget_overdraw``, as in GRESO and VIP). The caller may offer more candidate prompts
than the budget can give groups to (the budget stays ``n x trained prompts``); nothing changes here: the greedy gives
the first groups to the candidates of highest value (ties to the earlier one) and the rest get none. With a memory of
recurring prompts that skips the remembered saturated and hopeless ones in favour of unseen or promising ones.

Pure: standard library only (plus the registry), so any framework can call it.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple, Sequence

from reinforce_ada.core.allocation.per_round import STEP_ALLOCATION_RULES
from reinforce_ada.core.allocation.exit_probability import _cached_probabilities, exit_needs

__all__ = ["BUDGET_EXIT_RULES", "PoolState", "allocate", "best_increment", "budget", "value_curve"]

BUDGET_EXIT_RULES = ("mixed", "balanced")
"""Exit rules whose exit probability measures signal (``positive`` would favour saturated prompts)."""


class PoolState(NamedTuple):
    """What the allocation knows about one prompt: its prior (from memory) and this step's counts so far."""

    prior_alpha: float
    prior_beta: float
    num_drawn: int
    """Completions returned for the prompt this step (including any dropped after a verifier failure)."""
    num_positive: int
    num_negative: int


def value_curve(state: PoolState, max_more: int, group_size: int, exit_rule: str = "mixed",
                min_positive: int = 1, min_group: int | None = None) -> list[float]:
    """``V[k]`` for ``k = 0 .. max_more``: probability that ``k`` more samples meet the exit rule (module docstring).
    ``min_group``: the pool size a prompt needs to exit (default ``group_size``).

    >>> [round(v, 4) for v in value_curve(PoolState(1.0, 1.0, 0, 0, 0), 5, 4)]  # uniform prior, mixed: 1 - 2/(k+1)
    [0.0, 0.0, 0.0, 0.0, 0.6, 0.6667]
    """
    need_pos, need_neg = exit_needs(exit_rule, state.num_positive, state.num_negative, group_size, min_positive)
    count = state.num_positive + state.num_negative
    # memoised: prompts with the same posterior (e.g. every unseen prompt at the start) share one computation
    return list(_cached_probabilities(float(state.prior_alpha + state.num_positive),
                                      float(state.prior_beta + state.num_negative), need_pos, need_neg,
                                      max(0, max_more), (group_size if min_group is None else min_group) - count))


def best_increment(values: Sequence[float], k: int, max_j: int) -> tuple[float, int]:
    """The increment ``j`` in ``1..max_j`` with the highest value per sample ``(V[k+j] - V[k]) / j``, and that rate.

    Ties go to the smaller ``j``. ``(0.0, 0)`` when ``max_j <= 0``.

    >>> best_increment([0.0, 0.0, 0.0, 0.0, 0.6, 0.6667], 0, 5)   # a group of 4 first: 0.6 / 4
    (0.15, 4)
    >>> best_increment([0.0, 0.5, 0.6], 1, 1)
    (0.09999999999999998, 1)
    """
    best_rate, best_j = 0.0, 0
    for j in range(1, max_j + 1):
        rate = (values[k + j] - values[k]) / j
        if rate > best_rate + 1e-15:
            best_rate, best_j = rate, j
    return best_rate, best_j


def allocate(curves: Sequence[Sequence[float]], budget: int, required: Sequence[int] | None = None,
             min_rate: float = 0.0) -> list[int]:
    """Greedy allocation of at most ``budget`` samples over prompts with value curves ``curves[i][k]``.

    ``len(curves[i]) - 1`` is prompt ``i``'s cap. ``required[i]`` samples are given first (they must fit in the
    budget and the cap). Then the increment with the highest value per sample (:func:`best_increment`) is given,
    again and again, while one with a positive value fits. Ties go to the lower index.

    ``min_rate`` (the *price of signal*, module docstring): an increment is given only if its value per sample is
    at least this; the budget no increment is worth is left unspent. 0.0: spend while any increment has value.

    >>> allocate([[0.0, 0.5, 0.6], [0.0, 0.3, 0.5]], 2)           # 0.5 first, then 0.2 (prompt 1) beats 0.1
    [1, 1]
    >>> allocate([[0.0, 0.0, 0.9], [0.0, 0.0, 0.2]], 2)           # the budget buys one group: the likelier one
    [2, 0]
    >>> allocate([[0.0, 0.0, 0.9], [0.0, 0.0, 0.2]], 2, required=[0, 2])
    [0, 2]
    >>> allocate([[0.0, 0.0, 0.9], [0.0, 0.0, 0.2]], 4, min_rate=0.15)  # 0.45 a sample is worth it, 0.1 is not
    [2, 0]
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0 (got {budget})")
    if not 0.0 <= min_rate <= 1.0:
        raise ValueError(f"min_rate must be in [0, 1] (got {min_rate})")
    alloc = list(required) if required is not None else [0] * len(curves)
    if len(alloc) != len(curves):
        raise ValueError(f"required has {len(alloc)} entries for {len(curves)} prompts")
    for i, k in enumerate(alloc):
        if not 0 <= k <= len(curves[i]) - 1:
            raise ValueError(f"required[{i}]={k} is outside 0..{len(curves[i]) - 1} (the prompt's cap)")
    left = budget - sum(alloc)
    if left < 0:
        raise ValueError(f"the required samples ({sum(alloc)}) exceed the budget ({budget})")
    heap: list[tuple[float, int, int]] = []

    def push(i: int) -> None:
        rate, j = best_increment(curves[i], alloc[i], min(len(curves[i]) - 1 - alloc[i], left))
        if j > 0 and rate >= min_rate:
            heapq.heappush(heap, (-rate, i, j))

    for i in range(len(curves)):
        push(i)
    while heap and left > 0:
        _, i, j = heapq.heappop(heap)
        if j > left:  # the budget shrank since this entry was computed: recompute what still fits
            push(i)
            continue
        alloc[i] += j
        left -= j
        push(i)
    return alloc


@STEP_ALLOCATION_RULES.register("budget")
def budget(states: Sequence[PoolState], budget_left: int, *, samples_per_round: int, max_samples: int,
           group_size: int, exit_rule: str = "mixed", min_positive: int = 1, skip: bool = True,
           first_request: int | None = None, min_group: int | None = None, min_rate: float = 0.0) -> list[int]:
    """This round's request sizes for the still-active prompts ``states`` (see the module docstring, "Rounds").

    ``budget_left``: samples the step may still draw. ``max_samples``: the most one prompt may draw in the step.
    ``skip=False`` gives every prompt not yet sampled its group of ``n`` first (frameworks that need a group per
    prompt: TRL, verl); only the budget above that is allocated by value. ``first_request``: what a prompt not yet
    sampled draws first (None: ``n``, its group). A smaller *probe* is re-planned after it is scored, so a prompt
    that turns out saturated or hopeless costs less -- and may end the step with fewer than ``n`` samples.
    ``min_group``: the pool size at which a prompt may exit (default ``n``); smaller lets a prompt whose probe
    already has both classes stop there (the sampler must use the same minimum in its exit check).
    ``min_rate``: the price of signal (:func:`allocate`); what no increment is worth stays unspent this step.

    >>> budget([PoolState(1.0, 1.0, 0, 0, 0)] * 3, 12, samples_per_round=8, max_samples=32, group_size=4)
    [4, 4, 4]
    >>> budget([PoolState(1.0, 1.0, 4, 0, 4)], 8, samples_per_round=8, max_samples=32, group_size=4)  # no signal yet
    [8]
    >>> budget([PoolState(1.0, 1.0, 0, 0, 0), PoolState(1.0, 41.0, 0, 0, 0)], 8, samples_per_round=8,
    ...        max_samples=32, group_size=4, min_rate=0.1)  # unseen: 0.15 a sample; 0 of 40 remembered: 0.022
    [4, 0]
    """
    if exit_rule not in BUDGET_EXIT_RULES:
        raise ValueError(f"budget allocation values the exit rule, which must be one of {BUDGET_EXIT_RULES} "
                         f"(got {exit_rule!r})")
    caps = [max(0, max_samples - s.num_drawn) for s in states]
    curves = [value_curve(s, cap, group_size, exit_rule, min_positive, min_group) for s, cap in zip(states, caps)]
    missing = [max(0, group_size - (s.num_positive + s.num_negative)) for s in states]
    required = None
    if not skip:
        required = [min(m, cap) if s.num_drawn == 0 else 0 for s, m, cap in zip(states, missing, caps)]
        if sum(required) > budget_left:
            raise ValueError(f"budget_left={budget_left} cannot give every prompt its group ({sum(required)})")
    plan = allocate(curves, max(0, budget_left), required, min_rate)
    first = group_size if first_request is None or not skip else first_request
    return [min(k, first if s.num_drawn == 0 else m) if m > 0 else min(k, samples_per_round)
            for k, m, s in zip(plan, missing, states)]
