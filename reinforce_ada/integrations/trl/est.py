"""Reinforce-Ada-Est (arXiv 2510.04996v3, Alg. 1) inside a TRL ``GRPOTrainer`` step (``AdaGRPOConfig(mode="est")``).

TRL hands each process a generation batch of ``L = B x num_generations`` rows: ``B`` prompts, each repeated
``num_generations`` times in a contiguous block. Est's allocation is known before anything is generated and spends
exactly ``est_samples_per_prompt x B`` samples, which is ``L`` (the config checks ``est_samples_per_prompt ==
num_generations``). So, per step and process (:class:`EstStep`):

1. **Rows.** :func:`~reinforce_ada.sampling.estimate.est_allocation` -- the function the standalone sampler uses --
   gives prompt ``x`` its ``N_x`` from the memory (``N_x`` proportional to ``1 / sqrt(p_hat_x)``, clipped to
   ``[est_min_samples, est_max_samples]``, summing to ``L``); the batch is rebuilt as ``N_x`` copies of each prompt's
   dataset row (every column follows its prompt), and TRL's own ``_generate_and_score_completions`` runs on it: TRL's
   generation path (one completion per row: plain transformers, vLLM server, vLLM colocate), TRL's reward functions,
   TRL's log-probabilities and masks. No row is padding and no row is added.
2. **Advantages**, grouped by prompt (an id per row, never a reshape by ``num_generations``): TRL's formula
   (:mod:`~reinforce_ada.integrations.trl.advantages`) with the prompt's rows as the set, then Est's gradient weight
   ``w_grad(p_x)`` (:func:`~reinforce_ada.sampling.pools.weigh_advantages`) at the prompt's pass rate ``p_x``: the
   share of its rows counted correct (as in 3.), never the mean of TRL's reward, which a reward model or a graded
   reward makes something other than a pass rate. With 0/1 rewards and ``scale_rewards="none"``:
   ``A = (r - rbar_x) / sqrt(rbar_x + objective_eps)`` (capped at ``max_grad_weight``), Alg. 1's advantage.
   ``"group"`` first divides ``r - rbar_x`` by the std of the prompt's rows + 1e-4, ``"batch"`` by the std of every
   reward of the step + 1e-4; ``multi_objective_aggregation="normalize_then_sum"`` is TRL's batch normalisation of the
   per-function normalised sum, then the weight.
3. **Memory.** Each process's ``(prompt key, samples, positives)`` is gathered, in process order, and every process
   applies all of them (:func:`~reinforce_ada.sampling.estimate.remember_visits`), so the memories are identical
   after every step and a prompt keeps its estimate whichever process draws it next. A positive is a row whose
   correctness functions' rewards sum above ``positive_threshold``; a row every correctness function returned
   ``None`` for counts as not correct. The key is :func:`~reinforce_ada.sampling.memory.prompt_key` of the prompt and
   its ``answer`` (or ``solution``) column: stable across epochs, processes and runs, and the key ``select-prompts``
   writes, so ``memory_seed`` can seed it.

The memory travels with TRL's checkpoints (:meth:`AdaGRPOTrainer._save_rng_state`), so a resumed run continues with
the memory it stopped with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.allocation import allocation_summary
from reinforce_ada.integrations.trl import advantages as trl_advantages
from reinforce_ada.sampling.estimate import est_allocation, est_memory, remember_visits
from reinforce_ada.sampling.memory import PassRateMemory, prompt_key
from reinforce_ada.sampling.pools import pass_rates, weigh_advantages
from reinforce_ada.types import Prompt

__all__ = ["EstStep", "TRLEst", "dataset_prompt"]


def dataset_prompt(row: dict[str, Any], prompt_id: Any = None) -> Prompt:
    """The :class:`Prompt` of a dataset row: its ``prompt`` column and its ``answer`` (or ``solution``) column, which
    together make the memory's key."""
    return Prompt(prompt_id=prompt_id, prompt=row["prompt"], answer=row.get("answer", row.get("solution")))


@dataclass
class EstStep:
    """One process's share of a step: its prompts, their sample counts and estimates, and the row -> prompt index."""

    prompts: list[Prompt]
    counts: np.ndarray  # (B,) N_x
    p_hat: np.ndarray  # (B,) the estimates the counts came from
    index: np.ndarray  # (L,) the local prompt of each row


class TRLEst:
    """Est's state in an ``AdaGRPOTrainer``: the memory, and the step being trained (see the module docstring)."""

    def __init__(self, config: SamplerConfig, num_generations: int):
        self.config = config
        self.num_generations = num_generations
        self.memory: PassRateMemory = est_memory(config)
        self.step: EstStep | None = None
        """This process's allocation of the training generation in progress (None outside one)."""
        self.last_advantages: np.ndarray | None = None
        """Every process's rows' advantages (float64, process order) at the last training generation."""

    # -- 1. rows ------------------------------------------------------------------------------------------------------
    def assign_rows(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The generation batch with prompt ``x``'s row repeated ``N_x`` times (in the prompts' order)."""
        n = self.num_generations
        if len(inputs) % n:
            raise RuntimeError(f"this process got {len(inputs)} rows, not a multiple of num_generations={n}")
        prompts = []
        for g in range(len(inputs) // n):
            block = inputs[g * n:(g + 1) * n]
            if any(row["prompt"] != block[0]["prompt"] for row in block[1:]):
                raise RuntimeError(f"rows {g * n}..{(g + 1) * n - 1} of this process's batch are not one prompt "
                                   "repeated num_generations times; Est hands out whole prompts' rows")
            prompts.append(dataset_prompt(block[0], prompt_id=g))
        counts, p_hat, budget = est_allocation(self.memory, prompts, self.config)
        if budget != len(inputs) or int(counts.sum()) != len(inputs):
            raise RuntimeError(f"Est allocated {int(counts.sum())} samples for {len(inputs)} rows")
        self.step = EstStep(prompts, counts, p_hat, np.repeat(np.arange(len(prompts)), counts))
        # a fresh dict per row: TRL writes a rollout's extra fields into the rows it is given
        return [dict(inputs[g * n]) for g, count in enumerate(counts) for _ in range(int(count))]

    # -- 2. and 3. advantages and memory, from every process's rewards -------------------------------------------------
    def finish(self, values: np.ndarray, rows_per_process: list[int], steps: list[EstStep], *, weights: np.ndarray,
               correctness: list[int], aggregation: str, scale_rewards: str, epsilon: float
               ) -> tuple[np.ndarray, dict[str, float]]:
        """Every process's rows' advantages (process order) and the step's metrics; updates the memory.

        ``values``: ``(rows, K)`` per-function rewards of every process's rows (NaN where a function returned None),
        as TRL gathers them; ``steps``: every process's :class:`EstStep`, in process order.
        """
        offsets = np.cumsum([0] + [len(s.prompts) for s in steps])
        index = np.concatenate([s.index + offsets[i] for i, s in enumerate(steps)])  # (rows,) a global prompt id
        if len(index) != len(values) or [len(s.index) for s in steps] != rows_per_process:
            raise RuntimeError("the rewards TRL gathered do not match the rows Est handed out")
        combined = trl_advantages.combine_rewards(values, weights, index, aggregation=aggregation, epsilon=epsilon)
        batch_mean, batch_std = trl_advantages.mean_std(trl_advantages.moments(combined))
        advantages = trl_advantages.advantages(combined, index, aggregation=aggregation, scale_rewards=scale_rewards,
                                               batch_mean=batch_mean, batch_std=batch_std, epsilon=epsilon)
        reward = trl_advantages.combine_rewards(values, weights, index, aggregation="sum_then_normalize")
        _, reward_std = trl_advantages.set_statistics(reward, index)  # (rows,) TRL's reward over the prompt
        correct = np.nansum(values[:, correctness], axis=1) > self.config.positive_threshold  # (rows,)
        advantages, grad_metrics = weigh_advantages(advantages, pass_rates(correct, index), self.config)

        num_prompts = int(offsets[-1])
        samples = np.bincount(index, minlength=num_prompts)
        positives = np.bincount(index, weights=correct.astype(np.float64), minlength=num_prompts)
        prompts = [p for s in steps for p in s.prompts]
        counts = np.concatenate([s.counts for s in steps])
        p_hat = np.concatenate([s.p_hat for s in steps])
        # TRL's frac_reward_zero_std: the share of rows whose prompt's rewards have zero std, here per prompt
        zero_std = np.isclose(np.nan_to_num(reward_std, nan=0.0), 0.0)  # (rows,) the same for all of a prompt's rows
        zero_prompts = np.bincount(index, weights=zero_std.astype(np.float64), minlength=num_prompts) == samples
        metrics = {**allocation_summary(counts, p_hat), **grad_metrics,
                   "frac_reward_zero_std": float(zero_std.mean()),
                   "zero_variance_fraction": float(zero_prompts.mean()),
                   "positive_fraction": float(correct.mean())}
        remember_visits(self.memory, [prompt_key(p) for p in prompts], positives.tolist(),
                        (samples - positives).tolist())
        metrics["memory_prompts"] = float(len(self.memory))
        self.last_advantages = advantages
        return advantages, metrics

    # -- checkpoints --------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"memory": self.memory.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.memory.load_state_dict(state["memory"])
