"""Reinforce-Ada-Est (arXiv 2510.04996v3, Algorithm 1): one generation call per step, each prompt's sample count set
in advance from its remembered pass rate.

Each step, for the step's prompts ``x``:

1. ``p_hat_x = (N_pos + alpha) / (N_tot + alpha + beta)`` from the cross-step memory (the library's
   :class:`~reinforce_ada.sampling.memory.PassRateMemory` with the Beta(alpha, beta) prior and the per-visit decay
   ``lam``; an unseen prompt has ``alpha / (alpha + beta)``);
2. ``N_x`` proportional to the objective's sample weight ``w_sample(p_hat_x)`` -- ``1 / sqrt(p_hat_x + eps)`` under the
   log objective with ``sample_share = 1/2`` -- clipped to ``[N_min, N_max]`` and summing to ``N_total`` exactly
   (:func:`~reinforce_ada.core.allocation.allocate_samples`: water-filling, then largest-remainder rounding);
3. all ``N_x`` samples of every prompt drawn in **one** generation call and scored;
4. every sample trained on (``selection="all"``: no downsampling), with advantage
   ``A_i = w_grad(p_x) (r_i - rbar_x)`` -- ``(r_i - rbar_x) / sqrt(rbar_x + eps)`` in the paper's setting -- where
   ``rbar_x`` is the mean reward of all of the prompt's samples this step and ``p_x = k_t / n_t`` their pass rate
   (equal to ``rbar_x`` for 0/1 rewards) (:func:`~reinforce_ada.sampling.pools.build_batch`);
5. the memory updated with the visit: ``N_tot <- lam N_tot + n_t``, ``N_pos <- lam N_pos + k_t``.

Graded rewards: ``k_t`` counts the samples with ``reward > positive_threshold`` (what ``p_hat`` estimates is the
chance of a *positive* sample); the baseline ``rbar_x`` is the mean reward itself, and the gradient weight is evaluated
at the pass rate ``k_t / n_t``, never at a mean reward (a mean of graded scores, or of a reward model's, is not a pass
rate: ``f(p)`` is a function of the pass rate). A prompt whose samples all failed to generate keeps its memory as it was; samples the verifier could not
score count as 0 (``on_verifier_failure="zero"``) or are left out of the pool and the memory (``"drop"``).

Departures from the reference code (the upstream ``hanze`` branch, a one-round variant): none in the formulas above;
the presets of :mod:`reinforce_ada.research.compare.strategies` reproduce that branch's settings (Beta(1, 16), decay
0.9, ``1 / p_hat`` in samples, no gradient weight, at least one sample per prompt).
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.advantages import baseline_advantages, group_statistics
from reinforce_ada.core.allocation import allocate_samples, allocation_summary
from reinforce_ada.core.objectives import split_weights
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import (PoolSampler, pass_rates, remember_pools, score_into_pools,
                                          select_and_build, weigh_advantages)
from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import check_backends, generate_samples, validate_prompts
from reinforce_ada.types import Prompt, PromptPool, SampledBatch

__all__ = ["EstSampler", "est_advantages", "est_allocation", "est_memory", "remember_visits"]

logger = logging.getLogger(__name__)


def est_memory(config: SamplerConfig) -> PassRateMemory:
    """Est's memory: prior Beta(``est.prior_alpha``, ``est.prior_beta``), decayed per visit by ``est.decay``, never
    by time, uncapped, no refitted prior; seeded from ``memory.seed`` (a ``select-prompts`` pass-rate file) when
    given."""
    est = config.est
    memory = PassRateMemory(half_life=None, max_evidence=None, prior=(est.prior_alpha, est.prior_beta),
                            empirical_prior=False, visit_decay=est.decay)
    if config.memory.seed:
        logger.debug("seeded Est's pass-rate memory with %d prompts from %s", memory.seed_from_file(config.memory.seed),
                    config.memory.seed)
    return memory


def est_allocation(memory: PassRateMemory, prompts: Sequence[Prompt | str | list], config: SamplerConfig
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """``(N_x, p_hat_x, N_total)`` for a step's prompts, from ``memory`` as it is (steps 1-2 of the module docstring).

    ``prompts``: :class:`~reinforce_ada.types.Prompt`\\ s, or whatever else the memory keys by
    (:func:`~reinforce_ada.sampling.memory.prompt_key`: a prompt's text or messages). The one allocation every Est
    runs with -- this library's sampler, TRL's ``AdaGRPOTrainer`` and verl's v1 trainer.
    """
    budget = config.est.step_budget(len(prompts))
    p_hat = np.array([memory.pass_rate(p) for p in prompts], dtype=np.float64)  # (B,)
    # est.allocation="variance-optimal" is the log objective with sample_share_in_use "variance-optimal"
    w_sample, _ = split_weights(config.objective_in_use, p_hat, sample_share=config.sample_share_in_use,
                                eps=config.objective_eps)
    counts = allocate_samples(w_sample, budget, config.est.min_samples, config.est.max_samples)
    return counts, p_hat, budget


def est_advantages(rewards: np.ndarray, index: np.ndarray, config: SamplerConfig
                   ) -> tuple[np.ndarray, dict[str, float]]:
    """Step 4 for samples grouped by prompt: ``A_i = w_grad(p_x) (r_i - rbar_x)``, where ``rbar_x`` is the mean
    reward of every sample of ``i``'s prompt (``index[i]``: any hashable prompt id; groups of any size, never a
    reshape) and ``p_x`` the share of them with ``reward > positive_threshold``, and the gradient-weight metrics
    (:func:`~reinforce_ada.sampling.pools.weigh_advantages`).

    The same numbers as :class:`EstSampler`'s batch for the same rewards (``advantage="pool"``, every sample kept: the
    pool is the group), up to the last bit of the mean (summed here at once, there one sample at a time); with
    ``normalize_std`` the centred rewards are first divided by the prompt's reward std + ``epsilon``. A prompt with a
    single sample gets 0, as in :mod:`reinforce_ada.core.advantages`.

    >>> cfg = SamplerConfig.reinforce_ada_est()
    >>> a, _ = est_advantages(np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]), np.array([0, 0, 0, 0, 1, 1]), cfg)
    >>> np.round(a, 3).tolist()     # prompt 0: (r - 1/4) / sqrt(1/4 + 1e-6); prompt 1 has no signal
    [1.5, -0.5, -0.5, -0.5, 0.0, 0.0]
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    mean, std, count = group_statistics(rewards, index)  # (S,) each: the prompt's, per sample
    centred = baseline_advantages(rewards, mean, std, count, normalize_std=config.normalize_std,
                                  epsilon=config.epsilon)
    return weigh_advantages(centred, pass_rates(rewards > config.positive_threshold, index), config)


def remember_visits(memory: PassRateMemory, keys: Sequence[Prompt | str | list], num_positive: Sequence[float],
                    num_negative: Sequence[float]) -> None:
    """Step 5 for a step's visits, in order, then one tick of the memory's clock: what an integration that scores
    outside :class:`EstSampler` calls with every process's ``(key, positives, negatives)``, in the same order on
    every process, so that the memories stay identical. A visit with no scored sample leaves its prompt as it was."""
    for key, pos, neg in zip(keys, num_positive, num_negative, strict=True):
        if pos + neg > 0:
            memory.update(key, pos, neg)
    memory.advance()


class EstSampler(PoolSampler):
    """Reinforce-Ada-Est (see the module docstring); ``config.mode`` must be ``"est"``."""

    def __init__(self, generator: Generator, verifier: Verifier, config: SamplerConfig,
                 memory: PassRateMemory | None = None):
        """``memory``: the pass-rate memory to read and update (default: :func:`est_memory`); part of
        :meth:`state_dict`."""
        check_backends(generator, verifier)
        if config.mode != "est":
            raise ValueError(f"EstSampler runs mode='est' (got mode={config.mode!r})")
        super().__init__(verifier, config, memory if memory is not None else est_memory(config))
        self.generator = generator

    def allocate(self, prompts: Sequence[Prompt]) -> tuple[np.ndarray, np.ndarray, int]:
        """``(N_x, p_hat_x, N_total)`` for the step's prompts, from the memory as it is (:func:`est_allocation`)."""
        return est_allocation(self.memory, prompts, self.config)  # type: ignore[arg-type]

    def sample(self, prompts: Sequence[Prompt]) -> SampledBatch:
        cfg = self.config
        prompts = validate_prompts(prompts)
        counts, p_hat, budget = self.allocate(prompts)
        requests = [GenerationRequest(p, int(n)) for p, n in zip(prompts, counts)]
        pools = {p.prompt_id: PromptPool(p.prompt_id, cfg.positive_threshold) for p in prompts}
        outputs, num_failed = generate_samples(self.generator, requests, cfg.generation_retries)  # one call
        stats = score_into_pools(self.verifier, requests, outputs, pools, 1, cfg.on_verifier_failure)
        for pool in pools.values():  # one call per step: every prompt that drew something is done
            if pool.count:
                pool.exit_round = 1
        stats.num_exits = sum(1 for pool in pools.values() if pool.exited)
        batch = select_and_build(self.selector, prompts, pools, [stats])
        batch.metrics["num_failed_samples"] = float(num_failed)
        batch.metrics["budget"] = float(budget)
        batch.metrics.update(allocation_summary(counts, p_hat))
        # the memory takes the visit in; the metrics say where the samples went by p_hat (sampling/by_pass_rate/*)
        batch.metrics.update(remember_pools(self.memory, prompts, pools))  # type: ignore[arg-type]
        batch.metrics["memory_prompts"] = float(len(self.memory))  # type: ignore[arg-type]
        return batch

