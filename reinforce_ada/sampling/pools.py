"""The one record -> exit -> select -> batch path every sampler runs (round-based, dynamic, streaming).

The samplers differ only in *when* they ask for samples; what happens to a scored sample is written here once:

* :func:`add_scored` -- a scored completion into its pool; a verifier failure (``None``) is counted on the pool and
  scored 0 or dropped (``SamplerConfig.on_verifier_failure``), never the prompt.
* :func:`score_into_pools` -- a round's generator answer scored (:func:`~reinforce_ada.sampling.scoring.score_outputs`)
  and recorded with :func:`add_scored` (the round-based samplers; the streaming scheduler records sample by sample).
* :func:`check_exit` -- the exit rule, once the pool holds enough completions; marks the exit round.
* :class:`GroupSelector` -- each pool downsampled to a group of ``n`` by the selection rule, with the sampler's seeded
  generator (its state is the sampler's checkpoint state).
* :func:`build_batch` -- advantages (whole-pool statistics), weights and the step's metrics;
  :func:`select_and_build` is selection then :func:`build_batch`.
* :func:`remember_pools`, :func:`finish_budget_step` -- after a step: the pass-rate memory (and the step's samples by
  its estimate) and budget metrics.
* :class:`PoolSampler` -- what the round-based and the streaming sampler hold in common (config, verifier, memory,
  selector, ``rng``, ``state_dict``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.advantages import compute_advantages, group_statistics, pool_importance_weights
from reinforce_ada.core.objectives import grad_weights
from reinforce_ada.core.selection import get_selection_rule
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.protocols import GenerationRequest, PromptSource, Verifier
from reinforce_ada.sampling.scoring import score_outputs
from reinforce_ada.types import Completion, Group, Prompt, PromptId, PromptPool, RoundStats, SampledBatch

__all__ = ["PASS_RATE_BINS", "GroupSelector", "PoolSampler", "add_scored", "build_batch", "check_exit",
           "finish_budget_step", "pass_rates", "remember_pools", "score_into_pools", "select_and_build",
           "weigh_advantages"]


def add_scored(pool: PromptPool, completion: Completion, reward: float | None, on_failure: str) -> float | None:
    """Add a scored completion to ``pool``; return the reward it got, or None when a failed one was dropped.

    A verifier failure (``reward is None``) is counted in ``pool.num_verifier_failures`` and then scored 0
    (``on_failure="zero"``) or dropped (``"drop"``). ``num_drawn`` is the caller's: it counts requests, not scores."""
    if reward is None:
        pool.num_verifier_failures += 1
        if on_failure == "drop":
            return None
        reward = 0.0
    completion.reward = reward
    pool.add(completion)
    return reward


def check_exit(pool: PromptPool, exit_rule: Callable[[int, int, int], bool], group_size: int, min_count: int,
               round_number: int) -> bool:
    """Whether ``pool`` exits now: it holds at least ``min_count`` completions and meets the exit rule. An exit is
    marked on the pool (``exit_round``)."""
    if pool.count >= min_count and exit_rule(pool.num_positive, pool.num_negative, group_size):
        pool.exit_round = round_number
        return True
    return False


def score_into_pools(verifier: Verifier, requests: list[GenerationRequest], outputs: list[list[Completion]],
                     pools: dict[PromptId, PromptPool], round_number: int, on_failure: str) -> RoundStats:
    """Score one round's completions and add them to their pools; return the round's stats (exits filled later)."""
    for request, completions in zip(requests, outputs):
        pool = pools[request.prompt.prompt_id]
        pool.num_rounds += 1
        pool.num_drawn += len(completions)
        for completion in completions:
            completion.prompt_id = request.prompt.prompt_id
            completion.round = round_number
    rewards = score_outputs(verifier, [r.prompt for r in requests], outputs)
    num_samples = failures = 0
    reward_sum = 0.0
    for request, completions, prompt_rewards in zip(requests, outputs, rewards):
        pool = pools[request.prompt.prompt_id]
        for completion, reward in zip(completions, prompt_rewards):
            num_samples += 1
            failures += reward is None
            added = add_scored(pool, completion, reward, on_failure)
            if added is not None:
                reward_sum += added
    scored = num_samples - (failures if on_failure == "drop" else 0)
    return RoundStats(round=round_number, num_active=len(requests), num_samples=num_samples, num_exits=0,
                      reward_mean=reward_sum / scored if scored else float("nan"), num_verifier_failures=failures)


class GroupSelector:
    """Downsample each pool to a group of ``group_size`` with the selection rule and a generator seeded from
    ``config.seed`` (``rng``: one draw sequence across steps, saved in checkpoints)."""

    def __init__(self, config: SamplerConfig):
        self.config = config
        self.rule = get_selection_rule(config.selection)
        self.rng = np.random.default_rng(config.seed)

    def select(self, prompts: Sequence[Prompt], pools: dict[PromptId, PromptPool]) -> list[Group]:
        """One group per prompt whose pool holds completions (unexited pools too, unless ``unexited="drop"``)."""
        cfg, groups = self.config, []
        for prompt in prompts:
            pool = pools[prompt.prompt_id]
            if pool.count == 0 or (not pool.exited and cfg.unexited == "drop"):
                continue
            is_positive = np.fromiter((c.reward > cfg.positive_threshold for c in pool.completions),  # type: ignore
                                      dtype=bool, count=pool.count)
            keep = self.rule(is_positive, cfg.group_size, self.rng)
            groups.append(Group(prompt, [pool.completions[i] for i in keep], pool.mean, pool.std, pool.count,
                                pool.num_positive, pool.exited))
        return groups


def select_and_build(selector: GroupSelector, prompts: Sequence[Prompt], pools: dict[PromptId, PromptPool],
                     rounds: list[RoundStats], *, generation_error: str | None = None,
                     num_skipped: int = 0) -> SampledBatch:
    """The end of every sampler's step: groups from :meth:`GroupSelector.select`, then :func:`build_batch`."""
    groups = selector.select(prompts, pools)
    return build_batch(groups, pools, rounds, selector.config, num_prompts=len(prompts),
                       generation_error=generation_error, num_skipped=num_skipped)


class PoolSampler:
    """What the round-based and the streaming sampler share: ``config``, ``verifier``, the optional cross-step
    ``memory``, the :class:`GroupSelector` (and its ``rng``) and the checkpoint state (``{"rng"}``, plus
    ``"memory"`` when there is one)."""

    def __init__(self, verifier: Verifier, config: SamplerConfig | None, memory: PassRateMemory | None):
        self.verifier = verifier
        self.config = config or SamplerConfig()
        self.memory = memory
        self.selector = GroupSelector(self.config)

    @property
    def rng(self) -> np.random.Generator:
        """The selection's random generator (assignable: an integration may reseed it per step)."""
        return self.selector.rng

    @rng.setter
    def rng(self, value: np.random.Generator) -> None:
        self.selector.rng = value

    def draw(self, source: PromptSource, num_prompts: int) -> list[Prompt]:
        """The step's prompts: the next ``num_prompts`` of ``source`` (all of them are sampled)."""
        return source.take(num_prompts)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"rng": self.rng.bit_generator.state}
        if self.memory is not None:
            state["memory"] = self.memory.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        if self.memory is not None and "memory" in state:
            self.memory.load_state_dict(state["memory"])


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


PASS_RATE_BINS = (0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
"""The bins of the memory's pass-rate estimate that :func:`remember_pools` reports the step's samples by (finer below
0.2, where Reinforce-Ada-Est's budget goes)."""


def remember_pools(memory: PassRateMemory, prompts: Sequence[Prompt],
                   pools: dict[PromptId, PromptPool]) -> dict[str, float]:
    """After a step: every pool that holds scored completions into the cross-step pass-rate memory, then one tick of
    its clock (the streaming sampler and budget mode share this). Returns where the step's samples went by the
    memory's estimate before this update (the estimate the step was sampled with): for each bin of
    :data:`PASS_RATE_BINS` holding a prompt, and ``unseen`` for prompts the memory had no record of,
    ``by_pass_rate/<low>-<high>/num_prompts`` and ``.../num_samples``."""
    metrics: dict[str, float] = {}
    for prompt in prompts:
        if prompt in memory:
            rate = memory.pass_rate(prompt)
            i = min(int(np.searchsorted(PASS_RATE_BINS, rate, side="right")) - 1, len(PASS_RATE_BINS) - 2)
            label = f"{PASS_RATE_BINS[i]:.1f}-{PASS_RATE_BINS[i + 1]:.1f}"
        else:
            label = "unseen"
        metrics[f"by_pass_rate/{label}/num_prompts"] = metrics.get(f"by_pass_rate/{label}/num_prompts", 0.0) + 1
        metrics[f"by_pass_rate/{label}/num_samples"] = (metrics.get(f"by_pass_rate/{label}/num_samples", 0.0)
                                                       + pools[prompt.prompt_id].num_drawn)
    for prompt in prompts:
        pool = pools[prompt.prompt_id]
        if pool.count:
            memory.update(prompt, pool.num_positive, pool.num_negative)
    memory.advance()
    return metrics


def safe_div(a: float, b: float) -> float:
    """``a / b``, or infinity when ``b`` is 0 (samples per signal prompt with no signal prompt)."""
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
    grad_metrics: dict[str, float] = {}
    if cfg.weights_gradient:  # a non-linear objective's weight, paid in the gradient (v3 Sec. 3.2)
        advantages, grad_metrics = weigh_advantages(advantages, per_sample("pool_num_positive") / pool_count, cfg)
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
        "samples_per_signal_prompt": safe_div(total_samples, num_signal),
        "reward_mean": safe_div(all_rewards_sum, all_rewards_count) if all_rewards_count else float("nan"),
        "group_reward_mean": float(rewards.mean()) if len(rewards) else float("nan"),
        "num_verifier_failures": float(sum(p.num_verifier_failures for p in pools.values())),
        "num_dropped_unexited": float(num_dropped),
        "num_empty": float(num_empty),
    }
    metrics.update(grad_metrics)
    for stats in rounds:
        for key in ("num_active", "num_samples", "num_exits", "reward_mean"):
            metrics[f"round_{stats.round}/{key}"] = float(getattr(stats, key))
    return SampledBatch(groups=groups, pools=pools, rounds=rounds, advantages=advantages, weights=weights,
                        num_prompts=num_prompts, num_dropped_unexited=num_dropped, num_empty=num_empty,
                        generation_error=generation_error, metrics=metrics)


def pass_rates(is_positive: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``(S,)`` the pass rate of each sample's prompt: the share of the prompt's samples (``index``: any hashable
    prompt id per sample) that count as successes (``is_positive``), as the pass-rate memory counts them.

    >>> pass_rates(np.array([True, False, False, False, True]), np.array([0, 0, 0, 0, 1])).tolist()
    [0.25, 0.25, 0.25, 0.25, 1.0]
    """
    return group_statistics(np.asarray(is_positive, dtype=np.float64), index)[0]


def weigh_advantages(advantages: np.ndarray, pass_rate: np.ndarray, cfg: SamplerConfig
                     ) -> tuple[np.ndarray, dict[str, float]]:
    """Each sample's advantage times its prompt's gradient weight ``w_grad`` (arXiv 2510.04996v3: Alg. 1's
    ``(r - rbar) / sqrt(rbar + eps)`` for Est; Sec. 3.2's explicit ``1 / p_hat`` for Seq), capped at
    ``max_grad_weight``; and its metrics over the samples that carry signal (non-zero advantage):
    ``grad_weight_mean``, ``grad_weight_max`` and ``grad_weight_capped_fraction``.

    ``pass_rate`` ``(S,)`` is the pool's pass rate, the share of its samples that count as successes (``reward >
    positive_threshold``; in TRL, the correctness functions' sum): the ``p`` the objective ``f(p)`` is a function of,
    and what the memory's ``p_hat`` estimates. For 0/1 rewards it is the mean reward ``rbar`` of Alg. 1; for graded
    rewards, or a reward model's scores outside [0, 1], a mean reward is not a pass rate and is not used here.
    """
    p = np.asarray(pass_rate, dtype=np.float64)  # (S,)
    if not ((p >= 0) & (p <= 1)).all():
        raise ValueError("weigh_advantages takes pass rates, in [0, 1]")
    uncapped = grad_weights(cfg.objective_in_use, p, sample_share=cfg.sample_share_in_use, eps=cfg.objective_eps,
                            max_grad_weight=None)
    w_grad = uncapped if cfg.max_grad_weight is None else np.minimum(uncapped, cfg.max_grad_weight)
    moving = advantages != 0
    metrics = {"grad_weight_mean": float(w_grad[moving].mean()) if moving.any() else 0.0,
               "grad_weight_max": float(w_grad[moving].max()) if moving.any() else 0.0,
               "grad_weight_capped_fraction": float((uncapped[moving] > w_grad[moving]).mean()) if moving.any()
               else 0.0}
    return advantages * w_grad, metrics
