"""How many samples a prompt asks for next in a streaming step, and what more samples can still buy it -- the
per-prompt allocation :class:`~reinforce_ada.sampling.scheduler.StreamingScheduler` consults, on the Beta posterior
of the prompt's pass rate (:mod:`reinforce_ada.core.allocation.exit_probability`).

:class:`PromptState` is one prompt's place in the step (pool, budget, prior, requests in flight, the decisions made);
:class:`StreamingAllocation` answers, for a state: how many samples to submit now (``num_to_submit``: ``M`` at a time
for ``fixed``, the smallest request that meets the exit rule with probability ``target`` for ``beta``, capped by the
price of signal), the chance of exiting or of any signal within a budget (which skip, cap and give up decide on),
and the signal a prompt buys per sample. Pure arithmetic on the state: no I/O, no event loop, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.allocation.exit_probability import (
    exit_needs,
    exit_probability,
    other_class_rate,
    samples_before_give_up,
    signal_rate,
    smallest_request,
)
from reinforce_ada.sampling.protocols import SampleRequest
from reinforce_ada.sampling.streaming_options import StreamingOptions
from reinforce_ada.types import Prompt, PromptPool

__all__ = ["PromptState", "StreamingAllocation"]


@dataclass
class PromptState:
    """One prompt's place in a streaming step: its pool, budget and prior, what is in flight, and what was decided."""

    prompt: Prompt
    pool: PromptPool
    budget: int
    prior: tuple[float, float]
    in_flight: dict[int, SampleRequest] = field(default_factory=dict)
    next_index: int = 0
    wave: int = 0
    stopped: bool = False
    queued: bool = False
    partial: bool = False
    """The last decision was only partly submitted (out of slots)."""
    skipped: bool = False
    capped: bool = False
    gave_up: bool = False
    extras: int = 0  # samples fill_idle gave it in its current wave


class StreamingAllocation:
    """The per-prompt allocation of a streaming step under ``config`` (M, N, n, exit rule) and ``options``."""

    def __init__(self, config: SamplerConfig, options: StreamingOptions):
        self.config, self.options = config, options

    def needs(self, state: PromptState) -> tuple[int, int]:
        pool = state.pool
        return exit_needs(self.config.exit_rule, pool.num_positive, pool.num_negative,  # type: ignore[arg-type]
                          self.config.group_size, self.config.min_positive)

    def exit_chance(self, state: PromptState, budget: int) -> float:
        """Probability of exiting within ``budget`` more samples (threshold exit rules; 1.0 for a custom rule)."""
        if callable(self.config.exit_rule):
            return 1.0 if budget > 0 else 0.0
        pool = state.pool
        need_pos, need_neg = self.needs(state)
        return self.chance(state, need_pos, need_neg, budget, self.config.group_size - pool.count)

    def signal_chance(self, state: PromptState, budget: int) -> float:
        """Probability that the pool holds both classes (its group will have signal) within ``budget`` more."""
        pool = state.pool
        return self.chance(state, max(0, 1 - pool.num_positive), max(0, 1 - pool.num_negative), budget, 0)

    @staticmethod
    def chance(state: PromptState, need_pos: int, need_neg: int, budget: int, min_more: int) -> float:
        pool = state.pool
        return exit_probability(round(state.prior[0] + pool.num_positive, 2),
                                round(state.prior[1] + pool.num_negative, 2), need_pos, need_neg, budget, min_more)

    def signal_rate(self, state: PromptState) -> float:
        """Best signal-prompts per sample under the prompt's prior
        (:func:`~reinforce_ada.core.allocation.exit_probability.signal_rate`)."""
        return signal_rate(state.prior[0], state.prior[1], self.config.group_size, state.budget)

    def other_class_rate(self, state: PromptState) -> float:
        """Posterior chance that the next sample brings the class a one-class pool lacks (1.0 when it has both)."""
        pool = state.pool
        return other_class_rate(state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative,
                                pool.num_positive, pool.num_negative)

    def samples_before_give_up(self, state: PromptState) -> int:
        """Most samples to request before the give-up point of ``min_signal_rate``
        (:func:`~reinforce_ada.core.allocation.exit_probability.samples_before_give_up`)."""
        pool = state.pool
        return samples_before_give_up(state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative,
                                      pool.num_positive, pool.num_negative, state.budget,
                                      self.options.min_signal_rate)

    def chance_of_gain(self, state: PromptState) -> float:
        """What more samples can still buy: signal for a pool without it, else the exit."""
        budget = state.budget - state.pool.num_drawn
        pool = state.pool
        if pool.num_positive == 0 or pool.num_negative == 0:
            return self.signal_chance(state, budget)
        return self.exit_chance(state, budget)

    def num_to_submit(self, state: PromptState) -> int:
        cfg, opts, pool = self.config, self.options, state.pool
        outstanding = len(state.in_flight)
        budget_left = state.budget - pool.num_drawn - outstanding
        if budget_left <= 0:
            return 0
        if opts.allocation == "fixed":
            k = 0 if outstanding else cfg.samples_per_round
            if opts.min_signal_rate > 0:
                k = min(k, self.samples_before_give_up(state))
            return min(k, budget_left)
        need_pos, need_neg = self.needs(state)
        alpha, beta = state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative
        k, prob = smallest_request(round(alpha, 2), round(beta, 2), need_pos, need_neg,
                                   state.budget - pool.num_drawn, opts.target, min_more=cfg.group_size - pool.count)
        if opts.max_request is not None:
            k = min(k, opts.max_request)
        if opts.min_signal_rate > 0:
            k = min(k, self.samples_before_give_up(state))
        return max(0, min(k - outstanding, budget_left))
