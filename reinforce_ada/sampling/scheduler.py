"""The streaming sampler's state machine: per-prompt allocation, exits, cancellation -- no I/O, no event loop.

:class:`StreamingScheduler` decides, sample by sample, what the streaming sampler asks for: ``want(n)`` returns up to
``n`` new :class:`~reinforce_ada.sampling.protocols.SampleRequest` s, ``record(results)`` takes scored samples and
returns the requests to cancel, ``finish`` selects the groups and builds the batch on the path every sampler shares
(:mod:`reinforce_ada.sampling.pools`). Its options are :class:`StreamingOptions`. Two drivers share it:
:class:`~reinforce_ada.sampling.streaming.StreamingSampler` (asyncio against an :class:`~reinforce_ada.sampling.streaming.AsyncEngine`)
and the latency model (:mod:`reinforce_ada.research.latency`, in virtual time). The algorithm is described in
:mod:`reinforce_ada.sampling.streaming`.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.core.beta_allocation import (
    THRESHOLD_EXIT_RULES,
    exit_needs,
    exit_probability,
    other_class_rate,
    samples_before_give_up,
    signal_rate,
    smallest_request,
)
from reinforce_ada.core.exits import get_exit_rule
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import GroupSelector, add_scored, check_exit, remember_pools, select_and_build
from reinforce_ada.sampling.protocols import SampleRequest
from reinforce_ada.types import Completion, Prompt, PromptId, PromptPool, RoundStats, SampledBatch

__all__ = ["SampleRequest", "StreamingOptions", "StreamingScheduler"]


@dataclass
class StreamingOptions:
    """Options of the streaming sampler beyond :class:`SamplerConfig` (which still sets M, N, n, exit rule, ...)."""

    allocation: str = "beta"
    """``"beta"``: request the smallest number of samples that meets the exit rule with probability ``target``
    under the Beta posterior; ``"fixed"``: ``M`` more each time the previous ones are scored (the paper's sizes,
    without the barrier)."""
    target: float = 0.3
    """Exit probability a ``"beta"`` request aims for. Higher: larger requests, fewer waves, more cancelled work
    (0.3 measured best for time in the latency model, docs/beyond_the_paper.md)."""
    prior: tuple[float, float] = (1.0, 1.0)
    """Beta prior on a prompt's pass rate when no memory is given (memory carries its own prior)."""
    give_up_below: float = 0.0
    """Stop sampling a prompt and cancel its in-flight requests (it stays in the step, unexited) once, after a scored
    sample, what the remaining budget can still buy is unlikely: for a pool with one class only, the chance of
    seeing the other (signal); for a pool that already has signal, the chance of meeting the exit rule. 0 never
    gives up (the paper's behaviour)."""
    min_signal_rate: float = 0.0
    """Spend samples only where they are likely enough to bring signal (0: off). A prompt whose pool holds one class
    only is given up (its in-flight requests cancelled) once the posterior chance that its next sample is of the
    other class falls below this; a prompt is skipped up front when no budget gives at least this many signal-prompts
    per sample (best ``P(both classes within k) / E[samples]`` over ``k``). It is one price for every prompt: no
    sample is drawn whose expected signal is below it, i.e. at the margin a signal-prompt costs at most
    ``1 / min_signal_rate`` samples. With memory, hopeless prompts stop early and promising ones may use a larger
    ``budget``. Unlike ``give_up_below`` it does not depend on the remaining budget."""
    budget: int | None = None
    """Most samples one prompt may draw in a step (None: ``M * N``, the paper's)."""
    max_request: int | None = None
    """Cap on one request's size (None: the remaining budget)."""
    max_in_flight: int = 256
    """Samples outstanding at once (the engine's concurrency). Slots go to prompts first-come first-served."""
    skip_below: float = 0.0
    """With memory: skip a prompt this step when, under the remembered posterior, its chance that ``M * N`` samples
    hold both classes (any signal) is below this -- it looks hopeless or saturated. Evidence decays, so it is
    retried later."""
    cap_below: float = 0.0
    """With memory: a prompt whose chance of meeting the exit rule within ``M * N`` is below this (and that is not
    skipped) gets a budget of ``cap_samples``."""
    cap_samples: int | None = None
    """Budget of a capped prompt (default ``group_size``)."""
    max_attempts: int | None = None
    """Times one sample is attempted before the step ends early (default ``generation_retries + 1``)."""
    follow_ups_first: bool = False
    """When slots are short, a prompt already being sampled gets its next request before prompts not yet started
    (it is on the step's critical path); False: strict first-come first-served."""
    fill_idle: bool = True
    """When no prompt wants more and slots are free (the step's tail), give prompts still being sampled extra
    samples, one each in turn, up to their budgets: fewer sequential waves on the critical path, at the price of
    extra (mostly cancelled) work."""
    fill_idle_per_wave: int | None = None
    """Most extra samples ``fill_idle`` gives one prompt per wave (None: up to its budget; the factory sets 1 where
    every running sequence costs compute, e.g. vLLM on the CPU: docs/benchmarks.md)."""
    cancel_on_exit: bool = True
    """Cancel a prompt's in-flight requests when it exits. False lets them finish (they join the pool); only useful
    to measure what cancellation saves."""

    def __post_init__(self) -> None:
        if self.allocation not in ("beta", "fixed"):
            raise ConfigError(f"allocation={self.allocation!r} is not one of ['beta', 'fixed']")
        if not 0.0 < self.target <= 1.0:
            raise ConfigError(f"target must be in (0, 1] (got {self.target})")
        if not (len(self.prior) == 2 and self.prior[0] > 0 and self.prior[1] > 0):
            raise ConfigError(f"prior must be two positive numbers (got {self.prior})")
        for name in ("give_up_below", "skip_below", "cap_below", "min_signal_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1] (got {value})")
        for name in ("max_request", "max_in_flight", "cap_samples", "max_attempts", "budget", "fill_idle_per_wave"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")


@dataclass
class _PromptState:
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


class StreamingScheduler:
    """The per-prompt state machine of streaming sampling, independent of how requests are executed.

    ``want(n)`` returns up to ``n`` new requests to submit; ``record(results)`` takes finished samples (already
    scored: ``(request, completion, reward_or_None)``) and returns the requests to cancel. ``done`` is True once no
    prompt needs anything and nothing is in flight.
    """

    def __init__(self, prompts: Sequence[Prompt], config: SamplerConfig, options: StreamingOptions,
                 memory: PassRateMemory | None = None, step_id: str | None = None):
        self.config, self.options = config, options
        self.exit_rule = get_exit_rule(config.exit_rule, min_positive=config.min_positive)
        if options.allocation == "beta":
            if callable(config.exit_rule) or config.exit_rule not in THRESHOLD_EXIT_RULES:
                raise ConfigError(f"streaming allocation 'beta' needs a threshold exit rule {THRESHOLD_EXIT_RULES}, "
                                  f"not {config.exit_rule!r}; use allocation='fixed'")
        self.step_id = step_id or uuid.uuid4().hex[:12]
        self.states: dict[PromptId, _PromptState] = {}
        self._queue: deque[_PromptState] = deque()
        self.num_in_flight = 0
        self.num_submitted = 0
        self.num_cancelled = 0
        self.budget = options.budget or config.max_samples
        if self.budget < config.group_size:
            raise ConfigError(f"budget={self.budget} is below group_size={config.group_size}")
        for prompt in prompts:
            prior = memory.posterior(prompt) if memory is not None else options.prior
            state = _PromptState(prompt, PromptPool(prompt.prompt_id, config.positive_threshold), self.budget, prior)
            if options.min_signal_rate > 0 and self._signal_rate(state) < options.min_signal_rate:
                state.skipped = state.stopped = True
            elif memory is not None and (options.skip_below > 0 or options.cap_below > 0):
                if self._signal_chance(state, self.budget) < options.skip_below:
                    state.skipped = state.stopped = True
                elif self._exit_chance(state, self.budget) < options.cap_below:
                    state.capped = True
                    state.budget = min(options.cap_samples or config.group_size, self.budget)
            self.states[prompt.prompt_id] = state
            if not state.stopped:
                state.queued = True
                self._queue.append(state)

    # -- allocation -------------------------------------------------------------------------------------------------
    def _needs(self, state: _PromptState) -> tuple[int, int]:
        pool = state.pool
        return exit_needs(self.config.exit_rule, pool.num_positive, pool.num_negative,  # type: ignore[arg-type]
                          self.config.group_size, self.config.min_positive)

    def _exit_chance(self, state: _PromptState, budget: int) -> float:
        """Probability of exiting within ``budget`` more samples (threshold exit rules; 1.0 for a custom rule)."""
        if callable(self.config.exit_rule):
            return 1.0 if budget > 0 else 0.0
        pool = state.pool
        need_pos, need_neg = self._needs(state)
        return self._chance(state, need_pos, need_neg, budget, self.config.group_size - pool.count)

    def _signal_chance(self, state: _PromptState, budget: int) -> float:
        """Probability that the pool holds both classes (its group will have signal) within ``budget`` more."""
        pool = state.pool
        return self._chance(state, max(0, 1 - pool.num_positive), max(0, 1 - pool.num_negative), budget, 0)

    @staticmethod
    def _chance(state: _PromptState, need_pos: int, need_neg: int, budget: int, min_more: int) -> float:
        pool = state.pool
        return exit_probability(round(state.prior[0] + pool.num_positive, 2),
                                round(state.prior[1] + pool.num_negative, 2), need_pos, need_neg, budget, min_more)

    def _signal_rate(self, state: _PromptState) -> float:
        """Best signal-prompts per sample under the prompt's prior
        (:func:`~reinforce_ada.core.beta_allocation.signal_rate`)."""
        return signal_rate(state.prior[0], state.prior[1], self.config.group_size, state.budget)

    def _other_class_rate(self, state: _PromptState) -> float:
        """Posterior chance that the next sample brings the class a one-class pool lacks (1.0 when it has both)."""
        pool = state.pool
        return other_class_rate(state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative,
                                pool.num_positive, pool.num_negative)

    def _samples_before_give_up(self, state: _PromptState) -> int:
        """Most samples to request before the give-up point of ``min_signal_rate``
        (:func:`~reinforce_ada.core.beta_allocation.samples_before_give_up`)."""
        pool = state.pool
        return samples_before_give_up(state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative,
                                      pool.num_positive, pool.num_negative, state.budget,
                                      self.options.min_signal_rate)

    def _chance_of_gain(self, state: _PromptState) -> float:
        """What more samples can still buy: signal for a pool without it, else the exit."""
        budget = state.budget - state.pool.num_drawn
        pool = state.pool
        if pool.num_positive == 0 or pool.num_negative == 0:
            return self._signal_chance(state, budget)
        return self._exit_chance(state, budget)

    def _num_to_submit(self, state: _PromptState) -> int:
        cfg, opts, pool = self.config, self.options, state.pool
        outstanding = len(state.in_flight)
        budget_left = state.budget - pool.num_drawn - outstanding
        if budget_left <= 0:
            return 0
        if opts.allocation == "fixed":
            k = 0 if outstanding else cfg.samples_per_round
            if opts.min_signal_rate > 0:
                k = min(k, self._samples_before_give_up(state))
            return min(k, budget_left)
        need_pos, need_neg = self._needs(state)
        alpha, beta = state.prior[0] + pool.num_positive, state.prior[1] + pool.num_negative
        k, prob = smallest_request(round(alpha, 2), round(beta, 2), need_pos, need_neg,
                                   state.budget - pool.num_drawn, opts.target, min_more=cfg.group_size - pool.count)
        if opts.max_request is not None:
            k = min(k, opts.max_request)
        if opts.min_signal_rate > 0:
            k = min(k, self._samples_before_give_up(state))
        return max(0, min(k - outstanding, budget_left))

    # -- events -----------------------------------------------------------------------------------------------------
    def want(self, max_new: int | None = None) -> list[SampleRequest]:
        """New requests to submit now (at most ``max_new``; ``None``: up to ``max_in_flight`` outstanding)."""
        if max_new is None:
            max_new = self.options.max_in_flight - self.num_in_flight
        out: list[SampleRequest] = []
        while self._queue and len(out) < max_new:
            state = self._queue[0]
            num = 0 if state.stopped else self._num_to_submit(state)
            take = min(num, max_new - len(out))
            if take > 0:
                if not state.partial:  # a new allocation decision starts a new wave of this prompt
                    state.wave += 1
                    state.extras = 0
                state.partial = take < num
            for _ in range(take):
                out.append(self._new_request(state))
            if take < num:  # out of slots: keep its place at the head of the queue
                break
            self._queue.popleft()
            state.queued = False
            if not state.in_flight and not state.stopped:
                state.stopped = True  # nothing more to ask for and nothing outstanding: budget spent
        if self.options.fill_idle and not self._queue and len(out) < max_new:
            self._fill_idle(out, max_new)
        self.num_in_flight += len(out)
        self.num_submitted += len(out)
        return out

    def _fill_idle(self, out: list[SampleRequest], max_new: int) -> None:
        """Round-robin one extra sample per in-progress prompt until the slots or the budgets run out."""
        candidates = [s for s in self.states.values() if not s.stopped and s.in_flight]
        per_wave = self.options.fill_idle_per_wave or float("inf")
        while candidates and len(out) < max_new:
            still = []
            for state in candidates:
                if len(out) >= max_new:
                    break
                if state.budget - state.pool.num_drawn - len(state.in_flight) <= 0 or state.extras >= per_wave:
                    continue
                if self.options.min_signal_rate > 0 and len(state.in_flight) >= self._samples_before_give_up(state):
                    continue
                state.extras += 1
                out.append(self._new_request(state))
                still.append(state)
            candidates = still

    def _new_request(self, state: _PromptState) -> SampleRequest:
        """The prompt's next sample, in its current wave, now in flight."""
        request = SampleRequest(state.prompt, state.next_index, state.wave,
                                f"{self.step_id}-{state.prompt.prompt_id}-{state.next_index}")
        state.next_index += 1
        state.in_flight[request.index] = request
        return request

    def _cancel_in_flight(self, state: _PromptState, to_cancel: list[SampleRequest]) -> None:
        """Move the prompt's in-flight requests to ``to_cancel``."""
        to_cancel.extend(state.in_flight.values())
        self.num_cancelled += len(state.in_flight)
        self.num_in_flight -= len(state.in_flight)
        state.in_flight.clear()

    def record(self, results: Sequence[tuple[SampleRequest, Completion, float | None]]) -> list[SampleRequest]:
        """Add scored samples to their pools, check exits, and return the in-flight requests to cancel."""
        cfg = self.config
        touched: dict[PromptId, _PromptState] = {}
        for request, completion, reward in results:
            state = self.states[request.prompt.prompt_id]
            if state.in_flight.pop(request.index, None) is not None:
                self.num_in_flight -= 1
            pool = state.pool
            completion.prompt_id = request.prompt.prompt_id
            completion.round = request.wave
            pool.num_drawn += 1
            add_scored(pool, completion, reward, cfg.on_verifier_failure)
            touched[request.prompt.prompt_id] = state
        to_cancel: list[SampleRequest] = []
        for state in touched.values():
            pool = state.pool
            pool.num_rounds = state.wave
            if pool.exited:
                continue
            if check_exit(pool, self.exit_rule, cfg.group_size, cfg.group_size, state.wave):
                state.stopped = True
                if self.options.cancel_on_exit:
                    self._cancel_in_flight(state, to_cancel)
            elif state.stopped:
                continue
            elif (self.options.give_up_below > 0 and self._chance_of_gain(state) < self.options.give_up_below) or (
                    self.options.min_signal_rate > 0 and self._other_class_rate(state) < self.options.min_signal_rate):
                state.gave_up = state.stopped = True  # hopeless within the budget: stop and free its slots
                self._cancel_in_flight(state, to_cancel)
            elif not state.queued:
                state.queued = True
                if self.options.follow_ups_first:
                    self._queue.appendleft(state)
                else:
                    self._queue.append(state)
        return to_cancel

    def fail(self, request: SampleRequest) -> None:
        """A request that will not be retried: forget it (the prompt keeps whatever it has)."""
        state = self.states[request.prompt.prompt_id]
        if state.in_flight.pop(request.index, None) is not None:
            self.num_in_flight -= 1

    def abort(self) -> list[SampleRequest]:
        """Stop every prompt; return all in-flight requests (to cancel)."""
        out: list[SampleRequest] = []
        for state in self.states.values():
            self._cancel_in_flight(state, out)
            state.stopped = True
        self._queue.clear()
        self.num_in_flight = 0
        return out

    @property
    def done(self) -> bool:
        return not self._queue and self.num_in_flight == 0

    @property
    def pools(self) -> dict[PromptId, PromptPool]:
        return {pid: s.pool for pid, s in self.states.items()}

    def wave_stats(self) -> list[RoundStats]:
        """Per-wave statistics, shaped like the round-based sampler's :class:`RoundStats`."""
        num_waves = max((s.wave for s in self.states.values()), default=0)
        stats = []
        for wave in range(1, num_waves + 1):
            rewards = [c.reward for s in self.states.values() for c in s.pool.completions if c.round == wave]
            stats.append(RoundStats(
                round=wave, num_active=sum(1 for s in self.states.values() if s.wave >= wave),
                num_samples=len(rewards), num_exits=sum(1 for s in self.states.values() if s.pool.exit_round == wave),
                reward_mean=float(np.mean(rewards)) if rewards else float("nan")))
        return stats

    def finish(self, selector: GroupSelector, prompts: list[Prompt], memory: PassRateMemory | None,
               generation_error: str | None = None) -> SampledBatch:
        """Select groups with ``selector`` and build the batch (the path every sampler ends on,
        :func:`~reinforce_ada.sampling.pools.select_and_build`), update memory, add the streaming metrics."""
        pools = self.pools
        num_skipped = sum(1 for s in self.states.values() if s.skipped)
        batch = select_and_build(selector, prompts, pools, self.wave_stats(), generation_error=generation_error,
                                 num_skipped=num_skipped)
        batch.metrics.update({
            "num_skipped": float(num_skipped),
            "num_capped": float(sum(1 for s in self.states.values() if s.capped)),
            "num_gave_up": float(sum(1 for s in self.states.values() if s.gave_up)),
            "num_cancelled": float(self.num_cancelled),
            "num_submitted": float(self.num_submitted),
        })
        if memory is not None:
            batch.metrics.update(remember_pools(memory, [s.prompt for s in self.states.values()], pools))
        return batch
