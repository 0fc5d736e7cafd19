"""The streaming sampler's state machine: per-prompt allocation, exits, cancellation -- no I/O, no event loop.

:class:`StreamingScheduler` decides, sample by sample, what the streaming sampler asks for: ``want(n)`` returns up to
``n`` new :class:`~reinforce_ada.sampling.protocols.SampleRequest` s, ``record(results)`` takes scored samples and
returns the requests to cancel, ``finish`` selects the groups and builds the batch on the path every sampler shares
(:mod:`reinforce_ada.sampling.pools`). How many samples each prompt asks for, and when it is skipped, capped or given
up, it asks :class:`~reinforce_ada.sampling.prompt_allocation.StreamingAllocation`. Its options are
:class:`~reinforce_ada.sampling.streaming_options.StreamingOptions`. Two drivers share it:
:class:`~reinforce_ada.sampling.streaming.StreamingSampler` (asyncio against an :class:`~reinforce_ada.sampling.streaming.AsyncEngine`)
and the latency model (:mod:`reinforce_ada.research.latency`, in virtual time). The algorithm is described in
:mod:`reinforce_ada.sampling.streaming`.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import Sequence

import numpy as np

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.core.allocation.exit_probability import THRESHOLD_EXIT_RULES
from reinforce_ada.core.exits import get_exit_rule
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import GroupSelector, add_scored, check_exit, remember_pools, select_and_build
from reinforce_ada.sampling.prompt_allocation import PromptState, StreamingAllocation
from reinforce_ada.sampling.protocols import SampleRequest
from reinforce_ada.sampling.streaming_options import StreamingOptions
from reinforce_ada.types import Completion, Prompt, PromptId, PromptPool, RoundStats, SampledBatch

__all__ = ["SampleRequest", "StreamingOptions", "StreamingScheduler"]


class StreamingScheduler:
    """The per-prompt state machine of streaming sampling, independent of how requests are executed.

    ``want(n)`` returns up to ``n`` new requests to submit; ``record(results)`` takes finished samples (already
    scored: ``(request, completion, reward_or_None)``) and returns the requests to cancel. ``done`` is True once no
    prompt needs anything and nothing is in flight.
    """

    def __init__(self, prompts: Sequence[Prompt], config: SamplerConfig, options: StreamingOptions,
                 memory: PassRateMemory | None = None, step_id: str | None = None):
        self.config, self.options = config, options
        self.allocation = StreamingAllocation(config, options)
        self.exit_rule = get_exit_rule(config.exit_rule, min_positive=config.min_positive)
        if options.allocation == "beta":
            if callable(config.exit_rule) or config.exit_rule not in THRESHOLD_EXIT_RULES:
                raise ConfigError(f"streaming allocation 'beta' needs a threshold exit rule {THRESHOLD_EXIT_RULES}, "
                                  f"not {config.exit_rule!r}; use allocation='fixed'")
        self.step_id = step_id or uuid.uuid4().hex[:12]
        self.states: dict[PromptId, PromptState] = {}
        self._queue: deque[PromptState] = deque()
        self.num_in_flight = 0
        self.num_submitted = 0
        self.num_cancelled = 0
        self.budget = options.budget or config.max_samples
        if self.budget < config.group_size:
            raise ConfigError(f"budget={self.budget} is below group_size={config.group_size}")
        for prompt in prompts:
            prior = memory.posterior(prompt) if memory is not None else options.prior
            state = PromptState(prompt, PromptPool(prompt.prompt_id, config.positive_threshold), self.budget, prior)
            if options.min_signal_rate > 0 and self.allocation.signal_rate(state) < options.min_signal_rate:
                state.skipped = state.stopped = True
            elif memory is not None and (options.skip_below > 0 or options.cap_below > 0):
                if self.allocation.signal_chance(state, self.budget) < options.skip_below:
                    state.skipped = state.stopped = True
                elif self.allocation.exit_chance(state, self.budget) < options.cap_below:
                    state.capped = True
                    state.budget = min(options.cap_samples or config.group_size, self.budget)
            self.states[prompt.prompt_id] = state
            if not state.stopped:
                state.queued = True
                self._queue.append(state)

    # -- events -----------------------------------------------------------------------------------------------------
    def want(self, max_new: int | None = None) -> list[SampleRequest]:
        """New requests to submit now (at most ``max_new``; ``None``: up to ``max_in_flight`` outstanding)."""
        if max_new is None:
            max_new = self.options.max_in_flight - self.num_in_flight
        out: list[SampleRequest] = []
        while self._queue and len(out) < max_new:
            state = self._queue[0]
            num = 0 if state.stopped else self.allocation.num_to_submit(state)
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
                if self.options.min_signal_rate > 0 and len(state.in_flight) >= self.allocation.samples_before_give_up(state):
                    continue
                state.extras += 1
                out.append(self._new_request(state))
                still.append(state)
            candidates = still

    def _new_request(self, state: PromptState) -> SampleRequest:
        """The prompt's next sample, in its current wave, now in flight."""
        request = SampleRequest(state.prompt, state.next_index, state.wave,
                                f"{self.step_id}-{state.prompt.prompt_id}-{state.next_index}")
        state.next_index += 1
        state.in_flight[request.index] = request
        return request

    def _cancel_in_flight(self, state: PromptState, to_cancel: list[SampleRequest]) -> None:
        """Move the prompt's in-flight requests to ``to_cancel``."""
        to_cancel.extend(state.in_flight.values())
        self.num_cancelled += len(state.in_flight)
        self.num_in_flight -= len(state.in_flight)
        state.in_flight.clear()

    def record(self, results: Sequence[tuple[SampleRequest, Completion, float | None]]) -> list[SampleRequest]:
        """Add scored samples to their pools, check exits, and return the in-flight requests to cancel."""
        cfg = self.config
        touched: dict[PromptId, PromptState] = {}
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
            elif (self.options.give_up_below > 0 and self.allocation.chance_of_gain(state) < self.options.give_up_below) or (
                    self.options.min_signal_rate > 0 and self.allocation.other_class_rate(state) < self.options.min_signal_rate):
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
