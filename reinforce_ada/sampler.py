"""The sampling loop: generator -> verifier -> exit rule, round after round, then selection and advantages.

Reinforce-Ada (arXiv 2510.04996, Alg. 1): every still-active prompt gets ``M`` more completions per round, for at most
``N`` rounds; a prompt leaves the active set once its pool meets the exit rule. Each pool is then downsampled to a
group of ``n`` and the advantages use the *whole pool's* statistics. Plain GRPO is the same loop with one round and
the ``once`` exit rule (:meth:`SamplerConfig.grpo`); DAPO's dynamic sampling is :class:`DynamicSampler`. Budget mode
(``allocation="budget"``, beyond the paper) runs the same loop with one sample budget per step, allocated over the
batch's prompts each round by :func:`reinforce_ada.core.budget_allocation.budget` from a cross-step pass-rate memory.

Departures from the reference implementation: pool statistics are exact running moments (any real reward, not
0/1 counts); within-class selection is a seeded random choice rather than "first k"; a failing verifier call is
retried one completion at a time and a failing completion is scored 0 or dropped (never the prompt); a generator
that fails after some rounds ends the step early with the work already done; samples a generator reports as failed for
good (:class:`PartialGenerationError`) are asked for again and, if still missing, only those samples are lost and
counted (``num_failed_samples``), never the prompt, the round or the completions already made.
"""

from __future__ import annotations

import itertools
import logging
import math
import dataclasses
from typing import Any, Iterable, Sequence

import numpy as np

from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.core.advantages import compute_advantages, pool_importance_weights
from reinforce_ada.core.allocation import STEP_ALLOCATION_RULES, get_allocation_rule
from reinforce_ada.core.budget_allocation import PoolState
from reinforce_ada.core.exits import get_exit_rule
from reinforce_ada.core.selection import get_selection_rule
from reinforce_ada.memory import PassRateMemory
from reinforce_ada.sampling.protocols import (  # noqa: F401 -- re-exported: older code imports them from here
    GenerationError,
    GenerationRequest,
    Generator,
    PartialGenerationError,
    Verifier,
    VerifierError,
)
from reinforce_ada.types import Completion, Group, Prompt, PromptId, PromptPool, RoundStats, SampledBatch

logger = logging.getLogger(__name__)


def validate_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts is empty: nothing to sample")
    seen: set[PromptId] = set()
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, Prompt):
            raise TypeError(f"prompts[{i}] is a {type(prompt).__name__}, expected reinforce_ada.Prompt")
        if prompt.prompt_id in seen:
            raise ValueError(f"prompts[{i}].prompt_id={prompt.prompt_id!r} is duplicated; prompt ids must be unique")
        seen.add(prompt.prompt_id)
    return prompts


def _check_backends(generator: Any, verifier: Any) -> None:
    if not callable(getattr(generator, "generate", None)):
        raise TypeError(f"generator must have a generate(requests) method (got {type(generator).__name__})")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable as verifier(prompts, completions) (got {type(verifier).__name__})")


class AdaptiveSampler:
    """Multi-round adaptive sampling with exit rules (Reinforce-Ada); GRPO with ``SamplerConfig.grpo(n)``."""

    def __init__(self, generator: Generator, verifier: Verifier, config: SamplerConfig | None = None,
                 memory: PassRateMemory | None = None):
        """``memory``: the cross-step pass-rate memory budget mode reads its priors from (``allocation="budget"``
        only; a fresh :class:`PassRateMemory` when not given; give one with ``half_life=None``, as budget mode decays
        it per visit by ``budget_half_life``). It is part of :meth:`state_dict`."""
        _check_backends(generator, verifier)
        self.generator = generator
        self.verifier = verifier
        self.config = config or SamplerConfig()
        self._exit_rule = get_exit_rule(self.config.exit_rule, min_positive=self.config.min_positive)
        self._select = get_selection_rule(self.config.selection)
        self._step_rule = STEP_ALLOCATION_RULES.get(self.config.allocation) if self.config.is_budget else None
        self._allocate = None if self._step_rule else get_allocation_rule(self.config.allocation)
        if memory is not None and self._step_rule is None:
            raise ValueError("memory= is read by budget mode only (SamplerConfig.allocation='budget')")
        self.memory = memory if memory is not None or self._step_rule is None else PassRateMemory(half_life=None)
        self.rng = np.random.default_rng(self.config.seed)

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
                if round_number == 1:
                    raise
                generation_error = str(err)
                logger.error("round %d: %s; ending the step with %d rounds done", round_number, err, len(rounds))
                break
            stats = score_into_pools(self.verifier, requests, outputs, pools, round_number, cfg.on_verifier_failure)
            still_active = []
            for prompt in active:
                pool = pools[prompt.prompt_id]
                # A prompt also needs a full group's worth of completions to exit (matters when M < n; budget
                # mode may lower it, budget_min_group).
                if pool.count >= cfg.min_exit_count and self._exit_rule(pool.num_positive, pool.num_negative,
                                                                        cfg.group_size):
                    pool.exit_round = round_number
                else:
                    still_active.append(prompt)
            stats.num_exits = len(active) - len(still_active)
            rounds.append(stats)
            logger.debug("round %d: %d active, %d samples, %d exits, reward mean %.3f", round_number,
                         stats.num_active, stats.num_samples, stats.num_exits, stats.reward_mean)
            active = still_active
            if not active:
                break
        groups = self._select_groups(prompts, pools)
        # budget mode: a prompt that drew nothing was skipped (its samples were worth more elsewhere), not left empty
        num_skipped = sum(1 for pool in pools.values() if pool.num_drawn == 0) if budget is not None else 0
        batch = build_batch(groups, pools, rounds, cfg, num_prompts=len(prompts), generation_error=generation_error,
                            num_skipped=num_skipped)
        batch.metrics["num_failed_samples"] = float(num_failed_samples)
        if budget is not None:
            finish_budget_step(batch, budget, cfg.group_size, num_skipped)
            remember_pools(self.memory, prompts, pools)  # type: ignore[arg-type]
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

    def _select_groups(self, prompts: list[Prompt], pools: dict[PromptId, PromptPool]) -> list[Group]:
        cfg, groups = self.config, []
        for prompt in prompts:
            pool = pools[prompt.prompt_id]
            if pool.count == 0 or (not pool.exited and cfg.unexited == "drop"):
                continue
            is_positive = np.fromiter((c.reward > cfg.positive_threshold for c in pool.completions),  # type: ignore
                                      dtype=bool, count=pool.count)
            keep = self._select(is_positive, cfg.group_size, self.rng)
            groups.append(Group(prompt, [pool.completions[i] for i in keep], pool.mean, pool.std, pool.count,
                                pool.num_positive, pool.exited))
        return groups

    # -- checkpointing ----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"rng": self.rng.bit_generator.state}
        if getattr(self, "memory", None) is not None:
            state["memory"] = self.memory.state_dict()  # type: ignore[union-attr]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        if getattr(self, "memory", None) is not None and "memory" in state:
            self.memory.load_state_dict(state["memory"])  # type: ignore[union-attr]


def finish_budget_step(batch: SampledBatch, budget: int, group_size: int, num_skipped: int) -> None:
    """Budget mode, after a step: the budget metrics.

    A *skipped* prompt drew nothing (its samples were worth more elsewhere): it has no group and is counted in
    ``num_skipped``, not in ``num_empty``. A *short* group (fewer than ``group_size`` completions: a ``budget_probe``
    showed one class, a backend returned fewer than asked, or failed verifications were dropped, and the budget bought
    no top-up) is trained on as it is:
    its whole-pool advantages are unbiased, a one-class short pool has all-zero advantages and moves nothing, and
    dropping it would discard signal already paid for. It is counted in ``num_short_groups``.
    """
    total = batch.metrics["total_samples"]
    batch.metrics.update({
        "budget": float(budget),
        "budget_used_fraction": total / budget,
        "num_skipped": float(num_skipped),
        "skipped_fraction": num_skipped / batch.num_prompts,
        "num_short_groups": float(sum(1 for g in batch.groups if len(g.completions) < group_size)),
    })


def remember_pools(memory: PassRateMemory, prompts: Sequence[Prompt], pools: dict[PromptId, PromptPool]) -> None:
    """After a step: every pool that holds scored completions into the cross-step pass-rate memory, then one tick of
    its clock (the streaming sampler and budget mode share this)."""
    for prompt in prompts:
        pool = pools[prompt.prompt_id]
        if pool.count:
            memory.update(prompt, pool.num_positive, pool.num_negative)
    memory.advance()


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
                if batch_number == 1:
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
        result.metrics["samples_per_signal_prompt"] = _safe_div(result.metrics["total_samples"], num_signal)
        result.metrics["num_prompts_consumed"] = float(num_consumed)
        result.metrics["batch_filled"] = float(len(kept) >= cfg.batch_size)
        result.metrics["num_failed_samples"] = float(num_failed_samples)
        return result

    def state_dict(self) -> dict[str, Any]:
        return self._round.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._round.load_state_dict(state)


# -- the pieces of one round ----------------------------------------------------------------------------------------
def generate_with_retries(generator: Generator, requests: list[GenerationRequest], retries: int
                          ) -> list[list[Completion]]:
    """:func:`generate_samples` without the count of failed samples."""
    return generate_samples(generator, requests, retries)[0]


def generate_samples(generator: Generator, requests: list[GenerationRequest], retries: int
                     ) -> tuple[list[list[Completion]], int]:
    """Call the generator, retrying a failed call ``retries`` times; check that the answer has one list per request.

    Per sample: when the generator reports samples that failed for good (:class:`PartialGenerationError`), the
    completions it made are kept and only the failed samples are asked for again, up to ``retries`` more calls.
    Returns the completions and the number of samples still failed after that -- one failed sample never fails
    the round.
    """
    outputs, failed = _generate(generator, requests, retries)
    for attempt in range(1, retries + 1):
        missing = [(i, GenerationRequest(r.prompt, failed[i])) for i, r in enumerate(requests) if failed[i]]
        if not missing:
            break
        logger.warning("%d samples of %d prompts failed; asking again for them (retry %d of %d)",
                       sum(m.num_samples for _, m in missing), len(missing), attempt, retries)
        try:
            more, more_failed = _generate(generator, [m for _, m in missing], 0)
        except GenerationError as err:
            logger.warning("asking again for the failed samples failed: %s", err)
            continue
        for (i, _), completions, num in zip(missing, more, more_failed):
            outputs[i].extend(completions)
            failed[i] = num
    if sum(failed):
        logger.error("%d samples failed for good after %d retries; their prompts keep their other samples",
                     sum(failed), retries)
    return outputs, sum(failed)


def _generate(generator: Generator, requests: list[GenerationRequest], retries: int
              ) -> tuple[list[list[Completion]], list[int]]:
    """One answer for ``requests`` (a failed call retried ``retries`` times): completions and failed counts."""
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        try:
            outputs = [list(completions) for completions in generator.generate(requests)]
            failed = [0] * len(requests)
            break
        except PartialGenerationError as err:
            logger.warning("generator: %s", err)
            outputs, failed = [list(completions) for completions in err.outputs], list(err.num_failed)
            if len(failed) != len(outputs):
                raise GenerationError(f"PartialGenerationError with {len(outputs)} outputs and {len(failed)} "
                                      "failure counts") from err
            break
        except Exception as err:  # noqa: BLE001 -- any backend failure is retried, then reported
            last_error = err
            logger.warning("generator failed (attempt %d of %d): %r", attempt + 1, retries + 1, err)
    else:
        raise GenerationError(f"generator failed {retries + 1} times: {last_error!r}") from last_error
    if len(outputs) != len(requests):
        raise GenerationError(f"generator returned {len(outputs)} outputs for {len(requests)} requests")
    for request, completions in zip(requests, outputs):
        if len(completions) > request.num_samples:
            raise GenerationError(f"generator returned {len(completions)} completions for prompt "
                                  f"{request.prompt.prompt_id!r}, which asked for {request.num_samples}")
    return outputs, failed


def score(verifier: Verifier, prompts: list[Prompt], completions: list[Completion]) -> list[float | None]:
    """Rewards for a batch; when the batch call raises, score one completion at a time (a raise there -> None)."""
    try:
        rewards = list(verifier(prompts, completions))
    except Exception as err:  # noqa: BLE001
        logger.warning("verifier raised on a batch of %d (%r); scoring one completion at a time", len(completions), err)
        rewards, num_raised = [], 0
        for prompt, completion in zip(prompts, completions):
            try:
                rewards.extend(verifier([prompt], [completion]))
            except Exception:  # noqa: BLE001
                num_raised += 1
                rewards.append(None)
        if num_raised:
            logger.warning("verifier raised on %d of %d completions; they count as failures", num_raised, len(prompts))
    if len(rewards) != len(completions):
        raise VerifierError(f"verifier returned {len(rewards)} rewards for {len(completions)} completions")
    checked: list[float | None] = []
    for i, reward in enumerate(rewards):
        if reward is not None:
            reward = float(reward)
            if not math.isfinite(reward):
                raise VerifierError(f"verifier returned reward={reward} for completion {i} of prompt "
                                    f"{prompts[i].prompt_id!r}; rewards must be finite numbers or None")
        checked.append(reward)
    return checked


def score_into_pools(verifier: Verifier, requests: list[GenerationRequest], outputs: list[list[Completion]],
                     pools: dict[PromptId, PromptPool], round_number: int, on_failure: str) -> RoundStats:
    """Score one round's completions and add them to their pools; return the round's stats (exits filled later)."""
    flat_prompts: list[Prompt] = []
    flat: list[Completion] = []
    for request, completions in zip(requests, outputs):
        pool = pools[request.prompt.prompt_id]
        pool.num_rounds += 1
        pool.num_drawn += len(completions)
        for completion in completions:
            completion.prompt_id = request.prompt.prompt_id
            completion.round = round_number
            flat_prompts.append(request.prompt)
            flat.append(completion)
    rewards = score(verifier, flat_prompts, flat) if flat else []
    failures, reward_sum = 0, 0.0
    for completion, reward in zip(flat, rewards):
        pool = pools[completion.prompt_id]
        if reward is None:
            failures += 1
            pool.num_verifier_failures += 1
            if on_failure == "drop":
                continue
            reward = 0.0
        completion.reward = reward
        reward_sum += reward
        pool.add(completion)
    scored = len(flat) - (failures if on_failure == "drop" else 0)
    return RoundStats(round=round_number, num_active=len(requests), num_samples=len(flat), num_exits=0,
                      reward_mean=reward_sum / scored if scored else float("nan"), num_verifier_failures=failures)


# -- assembling the batch -------------------------------------------------------------------------------------------
def _safe_div(a: float, b: float) -> float:
    return a / b if b else float("inf")


def build_batch(groups: list[Group], pools: dict[PromptId, PromptPool], rounds: list[RoundStats],
                cfg: SamplerConfig, *, num_prompts: int, generation_error: str | None = None,
                num_skipped: int = 0) -> SampledBatch:
    """Compute advantages (and weights) for the kept groups and the step's metrics.

    ``num_skipped``: pools a scheduler chose not to sample at all (no completions, no group); they are not counted in
    ``num_empty``, which is for prompts that drew and got nothing back.
    """
    rewards = np.array([c.reward for g in groups for c in g.completions], dtype=np.float64)
    sizes = [len(g.completions) for g in groups]
    index = np.repeat(np.arange(len(groups)), sizes)
    per_sample = lambda attr: np.repeat(np.array([getattr(g, attr) for g in groups], dtype=np.float64), sizes)  # noqa
    pool_count = per_sample("pool_count")
    advantages = compute_advantages(cfg.advantage, rewards, index, pool_mean=per_sample("pool_mean"),
                                    pool_std=per_sample("pool_std"), pool_count=pool_count,
                                    normalize_std=cfg.normalize_std, epsilon=cfg.epsilon)
    weights = None
    if cfg.importance_weights:
        is_positive = rewards > cfg.positive_threshold
        weights = pool_importance_weights(is_positive, index, per_sample("pool_num_positive"), pool_count)

    num_empty = sum(1 for p in pools.values() if p.count == 0) - num_skipped
    num_exited = sum(1 for p in pools.values() if p.exited)
    num_dropped = sum(1 for p in pools.values() if p.count > 0 and not p.exited) if cfg.unexited == "drop" else 0
    num_signal = sum(1 for g in groups if g.has_signal)
    total_samples = sum(p.num_drawn for p in pools.values())
    all_rewards_sum = sum(p.mean * p.count for p in pools.values())
    all_rewards_count = sum(p.count for p in pools.values())
    metrics: dict[str, float] = {
        "num_prompts": float(num_prompts),
        "num_groups": float(len(groups)),
        "total_samples": float(total_samples),
        "samples_per_prompt": total_samples / num_prompts,
        "rounds_used": float(len(rounds)),
        "exited_fraction": num_exited / num_prompts,
        "never_exited_fraction": (num_prompts - num_exited) / num_prompts,
        "zero_variance_fraction": 1.0 - num_signal / len(groups) if groups else 1.0,
        "signal_fraction": num_signal / num_prompts,
        "samples_per_signal_prompt": _safe_div(total_samples, num_signal),
        "reward_mean": _safe_div(all_rewards_sum, all_rewards_count) if all_rewards_count else float("nan"),
        "group_reward_mean": float(rewards.mean()) if len(rewards) else float("nan"),
        "num_verifier_failures": float(sum(p.num_verifier_failures for p in pools.values())),
        "num_dropped_unexited": float(num_dropped),
        "num_empty": float(num_empty),
    }
    for stats in rounds:
        for key in ("num_active", "num_samples", "num_exits", "reward_mean"):
            metrics[f"round_{stats.round}/{key}"] = float(getattr(stats, key))
    return SampledBatch(groups=groups, pools=pools, rounds=rounds, advantages=advantages, weights=weights,
                        num_prompts=num_prompts, num_dropped_unexited=num_dropped, num_empty=num_empty,
                        generation_error=generation_error, metrics=metrics)
