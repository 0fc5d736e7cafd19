"""The sampling loop: generator -> verifier -> exit rule, round after round, then selection and advantages.

Reinforce-Ada (arXiv 2510.04996, Alg. 1): every still-active prompt gets ``M`` more completions per round, for at most
``N`` rounds; a prompt leaves the active set once its pool meets the exit rule. Each pool is then downsampled to a
group of ``n`` and the advantages use the *whole pool's* statistics. Plain GRPO is the same loop with one round and
the ``once`` exit rule (:meth:`SamplerConfig.grpo`); DAPO's dynamic sampling is :class:`DynamicSampler`. Budget mode
(``allocation="budget"``, beyond the paper) runs the same loop with one sample budget per step, allocated over the
batch's prompts each round by :func:`reinforce_ada.core.allocation.budget.budget` from a cross-step pass-rate memory.

Departures from the reference implementation: pool statistics are exact running moments (any real reward, not
0/1 counts); within-class selection is a seeded random choice rather than "first k"; a failing verifier call is
retried one completion at a time and a failing completion is scored 0 or dropped (never the prompt); a generator
that fails after some rounds ends the step early with the work already done; samples a generator reports as failed for
good (:class:`PartialGenerationError`) are asked for again and, if still missing, only those samples are lost and
counted (``num_failed_samples``), never the prompt, the round or the completions already made.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from typing import Any, Iterable, Sequence

from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.core.allocation import STEP_ALLOCATION_RULES, get_allocation_rule
from reinforce_ada.core.allocation.budget import PoolState
from reinforce_ada.core.exits import get_exit_rule
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import (
    PoolSampler,
    build_batch,
    check_exit,
    finish_budget_step,
    remember_pools,
    safe_div,
    score_into_pools,
    select_and_build,
)
from reinforce_ada.sampling.protocols import (GenerationError, GenerationRequest, Generator, PromptSource, Verifier,
                                              is_transient)
from reinforce_ada.sampling.scoring import check_backends, generate_samples, validate_prompts
from reinforce_ada.types import Group, Prompt, PromptId, PromptPool, RoundStats, SampledBatch

logger = logging.getLogger(__name__)


class AdaptiveSampler(PoolSampler):
    """Multi-round adaptive sampling with exit rules (Reinforce-Ada); GRPO with ``SamplerConfig.grpo(n)``."""

    def __init__(self, generator: Generator, verifier: Verifier, config: SamplerConfig | None = None,
                 memory: PassRateMemory | None = None):
        """``memory``: the cross-step pass-rate memory budget mode reads its priors from (``allocation="budget"``
        only; a fresh :class:`PassRateMemory` when not given; give one with ``half_life=None``, as budget mode decays
        it per visit by ``budget_half_life``). It is part of :meth:`state_dict`."""
        check_backends(generator, verifier)
        config = config or SamplerConfig()
        step_rule = STEP_ALLOCATION_RULES.get(config.allocation) if config.is_budget else None
        if memory is not None and step_rule is None:
            raise ValueError("memory= is read by budget mode only (SamplerConfig.allocation='budget')")
        super().__init__(verifier, config, memory if memory is not None or step_rule is None
                         else PassRateMemory(half_life=None))
        self.generator = generator
        self._exit_rule = get_exit_rule(self.config.exit_rule, min_positive=self.config.min_positive)
        self._step_rule = step_rule
        self._allocate = None if self._step_rule else get_allocation_rule(self.config.allocation)

    # -- the loop ---------------------------------------------------------------------------------------------------
    def sample(self, prompts: Sequence[Prompt]) -> SampledBatch:
        cfg = self.config
        prompts = validate_prompts(prompts)
        budget = cfg.step_budget(len(prompts)) if self._step_rule else None  # a too-small budget fails here
        pools = {p.prompt_id: PromptPool(p.prompt_id, cfg.positive_threshold) for p in prompts}
        priors = self._budget_priors(prompts) if self._step_rule else {}
        active, rounds, generation_error = prompts, [], None
        num_failed_samples = 0
        for round_number in range(1, cfg.max_rounds + 1):
            requests = self._round_requests(active, pools, priors, budget)
            if not requests:
                break
            try:
                outputs, num_failed = generate_samples(self.generator, requests, cfg.generation_retries)
                num_failed_samples += num_failed
            except GenerationError as err:
                if round_number == 1 or not is_transient(err):
                    raise
                generation_error = str(err)
                logger.error("round %d: %s; ending the step with %d rounds done", round_number, err, len(rounds))
                break
            stats = score_into_pools(self.verifier, requests, outputs, pools, round_number, cfg.on_verifier_failure)
            still_active = []
            for prompt in active:
                # A prompt also needs a full group's worth of completions to exit (matters when M < n; budget
                # mode may lower it, budget_min_group).
                if not check_exit(pools[prompt.prompt_id], self._exit_rule, cfg.group_size, cfg.min_exit_count,
                                  round_number):
                    still_active.append(prompt)
            stats.num_exits = len(active) - len(still_active)
            rounds.append(stats)
            logger.debug("round %d: %d active, %d samples, %d exits, reward mean %.3f", round_number,
                         stats.num_active, stats.num_samples, stats.num_exits, stats.reward_mean)
            active = still_active
            if not active:
                break
        # budget mode: a prompt that drew nothing was skipped (its samples were worth more elsewhere), not left empty
        num_skipped = sum(1 for pool in pools.values() if pool.num_drawn == 0) if budget is not None else 0
        batch = select_and_build(self.selector, prompts, pools, rounds, generation_error=generation_error,
                                 num_skipped=num_skipped)
        batch.metrics["num_failed_samples"] = float(num_failed_samples)
        if budget is not None:
            finish_budget_step(batch, budget, cfg.group_size, num_skipped)
            batch.metrics.update(remember_pools(self.memory, prompts, pools))  # type: ignore[arg-type]
            batch.metrics["memory_prompts"] = float(len(self.memory))  # type: ignore[arg-type]
        return batch

    def _budget_priors(self, prompts: list[Prompt]) -> dict[PromptId, tuple[float, float]]:
        """Budget mode: decay each presented prompt's remembered evidence by one visit, then read its posterior."""
        half_life = self.config.budget_half_life
        for prompt in prompts:
            if half_life is not None:
                self.memory.scale(prompt, 0.5 ** (1.0 / half_life))  # type: ignore[union-attr]
        return {p.prompt_id: self.memory.posterior(p) for p in prompts}  # type: ignore[union-attr]

    def _round_requests(self, active: list[Prompt], pools: dict[PromptId, PromptPool],
                        priors: dict[PromptId, tuple[float, float]], budget: int | None) -> list[GenerationRequest]:
        """This round's requests: per prompt from the allocation rule, or, in budget mode, for the whole batch from
        the step allocation rule and the budget left."""
        cfg = self.config
        if self._step_rule is None:
            requests = []
            for prompt in active:
                pool = pools[prompt.prompt_id]
                num = self._allocate(pool.num_drawn, pool.num_positive, pool.num_negative,
                                     cfg.samples_per_round, cfg.max_samples, cfg.group_size)
                if num > 0:
                    requests.append(GenerationRequest(prompt, num))
            return requests
        states = [PoolState(*priors[p.prompt_id], pools[p.prompt_id].num_drawn, pools[p.prompt_id].num_positive,
                            pools[p.prompt_id].num_negative) for p in active]
        budget_left = budget - sum(pool.num_drawn for pool in pools.values())  # type: ignore[operator]
        sizes = self._step_rule(states, budget_left, samples_per_round=cfg.samples_per_round,
                                max_samples=cfg.max_samples, group_size=cfg.group_size, exit_rule=cfg.exit_rule,
                                min_positive=cfg.min_positive, skip=cfg.budget_skip,
                                first_request=cfg.budget_probe, min_group=cfg.min_exit_count,
                                min_rate=cfg.budget_min_signal_rate)
        return [GenerationRequest(prompt, num) for prompt, num in zip(active, sizes) if num > 0]


class DynamicSampler:
    """DAPO-style dynamic sampling through the same interface.

    ``sample(prompts)`` takes an iterable of candidate prompts (usually longer than ``batch_size``) and draws them
    ``generation_batch_size`` at a time, one GRPO round of ``group_size`` each, keeping groups whose rewards differ,
    until ``batch_size`` such groups are collected or ``max_generation_batches`` calls were made. Advantages are
    group-local, as in DAPO. ``metrics["num_prompts_consumed"]`` says how many candidates were used.
    """

    def __init__(self, generator: Generator, verifier: Verifier, config: DynamicSamplingConfig | None = None):
        self.config = config or DynamicSamplingConfig()
        self._round = AdaptiveSampler(generator, verifier, self.config.round_config())

    def sample(self, prompts: Iterable[Prompt]) -> SampledBatch:
        cfg = self.config
        candidates = iter(prompts)
        kept: list[Group] = []
        pools: dict[PromptId, PromptPool] = {}
        rounds: list[RoundStats] = []
        num_consumed = num_signal = num_failed_samples = 0
        generation_error = None
        for batch_number in range(1, cfg.max_generation_batches + 1):
            chunk = list(itertools.islice(candidates, cfg.generation_batch_size))
            if not chunk:
                break
            try:
                batch = self._round.sample(chunk)
            except GenerationError as err:
                if batch_number == 1 or not is_transient(err):
                    raise
                generation_error = str(err)
                break
            num_consumed += len(chunk)
            num_failed_samples += int(batch.metrics["num_failed_samples"])
            duplicate = pools.keys() & batch.pools.keys()
            if duplicate:
                raise ValueError(f"prompt id {next(iter(duplicate))!r} was drawn twice in one dynamic-sampling step")
            pools.update(batch.pools)
            rounds.append(dataclasses.replace(batch.rounds[0], round=batch_number))  # one "round" per batch
            signal_groups = [g for g in batch.groups if g.has_signal]
            num_signal += len(signal_groups)
            kept.extend(signal_groups)
            if len(kept) >= cfg.batch_size:
                break
        if num_consumed == 0:
            raise ValueError("prompts is empty: nothing to sample")
        result = build_batch(kept[: cfg.batch_size], pools, rounds, self._round.config, num_prompts=num_consumed,
                             generation_error=generation_error)
        result.metrics["signal_fraction"] = num_signal / num_consumed
        result.metrics["samples_per_signal_prompt"] = safe_div(result.metrics["total_samples"], num_signal)
        result.metrics["num_prompts_consumed"] = float(num_consumed)
        result.metrics["batch_filled"] = float(len(kept) >= cfg.batch_size)
        result.metrics["num_failed_samples"] = float(num_failed_samples)
        return result

    def draw(self, source: PromptSource, num_prompts: int) -> PromptSource:
        """The source itself: :meth:`sample` takes ``generation_batch_size`` prompts at a time from it, as many
        batches as it needs (``num_prompts`` is the trainer's ``batch_size``, which :attr:`config` holds already)."""
        return source

    def state_dict(self) -> dict[str, Any]:
        return self._round.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._round.load_state_dict(state)
