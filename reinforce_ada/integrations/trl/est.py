"""Reinforce-Ada-Est (arXiv 2510.04996v3, Alg. 1) inside a TRL ``GRPOTrainer`` step (``AdaGRPOConfig(mode="est")``).

TRL hands each of its ``P`` processes a generation batch of ``L = B_local x num_generations`` rows: ``B_local``
prompts, each repeated ``num_generations`` times in a contiguous block. Algorithm 1 splits the *step's* budget over
the *step's* prompts -- every process's -- so one allocation is made for all of them (:class:`EstStep`):

1. **One allocation across processes.** Each process's prompts (one dataset row per prompt) are gathered from every
   process, in process order -- the step's ``B = P x B_local`` prompts, one ``gather_object`` per training
   generation. :func:`~reinforce_ada.sampling.estimate.est_allocation` -- the function the standalone sampler uses
   -- gives prompt ``x`` its ``N_x`` from the memory (``N_x`` proportional to ``1 / sqrt(p_hat_x)``, clipped to
   ``[est_min_samples, est_max_samples]``, summing to the step's budget ``est_samples_per_prompt x B = P x L``, as
   the config checks ``est_samples_per_prompt == num_generations``). Every process computes the same allocation
   from the same prompts and the same memory: it is deterministic and identical everywhere, and a process that drew
   two hard prompts borrows rows from one that drew two easy ones.
2. **Rows.** The step's ``P x L`` rows are laid out globally, in process order: ``N_x`` copies of each prompt's
   dataset row (every column follows its prompt), then process ``p`` keeps rows ``[p L, (p + 1) L)`` -- exactly the
   ``L`` rows TRL gave it, so no shape in TRL changes. A prompt's rows may straddle two processes. TRL's own
   ``_generate_and_score_completions`` runs on each process's rows: TRL's generation path (one completion per row:
   plain transformers, vLLM server, vLLM colocate), TRL's reward functions, log-probabilities and masks. No row is
   padding and no row is added.
3. **Advantages** over the global index (an id per row, never a reshape by ``num_generations``), from the rewards
   TRL gathers from every process anyway: TRL's formula (:mod:`~reinforce_ada.integrations.trl.advantages`) with the
   prompt's rows as the set, then Est's gradient weight ``w_grad(rbar_x)``
   (:func:`~reinforce_ada.sampling.pools.weigh_advantages`; ``rbar_x``: the mean of TRL's reward, the weighted sum of
   the reward functions, over the prompt's rows on every process). With ``scale_rewards="none"``:
   ``A = (r - rbar_x) / sqrt(rbar_x + objective_eps)`` (capped at ``max_grad_weight``), Alg. 1's advantage.
   ``"group"`` first divides ``r - rbar_x`` by the std of the prompt's rows + 1e-4, ``"batch"`` by the std of every
   reward of the step + 1e-4; ``multi_objective_aggregation="normalize_then_sum"`` is TRL's batch normalisation of the
   per-function normalised sum, then the weight. A prompt whose rows straddle two processes has one baseline. Each
   process then takes its own rows' slice.
4. **Memory.** Every process applies the whole step's visits, ``(prompt key, samples, positives)`` in the global order
   (:func:`~reinforce_ada.sampling.estimate.remember_visits`), so the memories are identical after every step and a
   prompt keeps its estimate whichever process draws it next. A positive is a row whose correctness functions'
   rewards sum above ``positive_threshold``; a row every correctness function returned ``None`` for counts as not
   correct. The key is :func:`~reinforce_ada.sampling.memory.prompt_key` of the prompt and its ``answer`` (or
   ``solution``) column: stable across epochs, processes and runs, and the key ``select-prompts`` writes, so
   ``memory_seed`` can seed it.

On one process this is exactly the single-process allocation; on ``P`` processes it is the allocation one process
holding the whole step's batch would make (tests/integrations/test_trl_distributed.py checks both, counts, advantages
and memory). ``steps_per_generation > 1`` and ``num_iterations > 1`` reuse TRL's buffered generation batch, and with
it the allocation and the advantages made for it. The memory travels with TRL's checkpoints
(:meth:`AdaGRPOTrainer._save_rng_state`), so a resumed run continues with the memory it stopped with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.allocation import allocation_summary
from reinforce_ada.integrations.trl import advantages as trl_advantages
from reinforce_ada.sampling.estimate import est_allocation, est_memory, remember_visits
from reinforce_ada.sampling.memory import PassRateMemory, prompt_key
from reinforce_ada.sampling.pools import weigh_advantages
from reinforce_ada.types import Prompt

__all__ = ["EstStep", "TRLEst", "dataset_prompt"]


def dataset_prompt(row: dict[str, Any], prompt_id: Any = None) -> Prompt:
    """The :class:`Prompt` of a dataset row: its ``prompt`` column and its ``answer`` (or ``solution``) column, which
    together make the memory's key."""
    return Prompt(prompt_id=prompt_id, prompt=row["prompt"], answer=row.get("answer", row.get("solution")))


@dataclass
class EstStep:
    """A training generation's one allocation over every process's prompts (the same object on every process)."""

    prompts: list[Prompt]  # (B,) the step's prompts, every process's, in process order
    counts: np.ndarray  # (B,) N_x
    p_hat: np.ndarray  # (B,) the estimates the counts came from
    index: np.ndarray  # (P * L,) the prompt of each of the step's rows, in the global row order
    rows_per_process: int  # L
    process_index: int  # this process's p: its rows are [p L, (p + 1) L) of the global order

    @property
    def local_rows(self) -> slice:
        """This process's slice of the step's rows (and of its advantages)."""
        start = self.process_index * self.rows_per_process
        return slice(start, start + self.rows_per_process)


Gather = Callable[[list], list]
"""Every process's list, concatenated in process order (accelerate's ``gather_object``; the identity on one)."""


class TRLEst:
    """Est's state in an ``AdaGRPOTrainer``: the memory, and the step being trained (see the module docstring)."""

    def __init__(self, config: SamplerConfig, num_generations: int):
        self.config = config
        self.num_generations = num_generations
        self.memory: PassRateMemory = est_memory(config)
        self.step: EstStep | None = None
        """The allocation of the training generation in progress (None outside one)."""
        self.last_advantages: np.ndarray | None = None
        """Every process's rows' advantages (float64, the global row order) at the last training generation."""

    # -- 1. and 2. one allocation, then this process's rows -----------------------------------------------------------
    def assign_rows(self, inputs: list[dict[str, Any]], gather: Gather, process_index: int = 0,
                    num_processes: int = 1) -> list[dict[str, Any]]:
        """This process's ``L`` rows of the step's global layout: prompt ``x``'s dataset row repeated ``N_x`` times,
        the step's prompts in process order, and this process's slice of it (see the module docstring)."""
        n = self.num_generations
        if len(inputs) % n:
            raise RuntimeError(f"this process got {len(inputs)} rows, not a multiple of num_generations={n}")
        local = []
        for g in range(len(inputs) // n):
            block = inputs[g * n:(g + 1) * n]
            if any(row["prompt"] != block[0]["prompt"] for row in block[1:]):
                raise RuntimeError(f"rows {g * n}..{(g + 1) * n - 1} of this process's batch are not one prompt "
                                   "repeated num_generations times; Est hands out whole prompts' rows")
            local.append(block[0])
        rows = gather(local)  # (B,) one dataset row per prompt, every process's, in process order
        if len(rows) != len(local) * num_processes:
            raise RuntimeError(f"gathered {len(rows)} prompts from {num_processes} processes holding "
                               f"{len(local)} each: the processes' generation batches differ in size")
        prompts = [dataset_prompt(row, prompt_id=g) for g, row in enumerate(rows)]
        counts, p_hat, budget = est_allocation(self.memory, prompts, self.config)
        total = len(inputs) * num_processes
        if budget != total or int(counts.sum()) != total:
            raise RuntimeError(f"Est allocated {int(counts.sum())} samples for the step's {total} rows")
        self.step = EstStep(prompts, counts, p_hat, np.repeat(np.arange(len(prompts)), counts), len(inputs),
                            process_index)
        # a fresh dict per row: TRL writes a rollout's extra fields into the rows it is given
        return [dict(rows[g]) for g in self.step.index[self.step.local_rows]]

    # -- 3. and 4. advantages and memory, from every process's rewards -------------------------------------------------
    def finish(self, values: np.ndarray, *, weights: np.ndarray, correctness: list[int], aggregation: str,
               scale_rewards: str, epsilon: float) -> tuple[np.ndarray, dict[str, float]]:
        """The step's rows' advantages (the global row order) and the step's metrics; updates the memory and ends the
        step.

        ``values``: ``(P x L, K)`` per-function rewards of every process's rows (NaN where a function returned
        None), as TRL gathers them.
        """
        step, self.step = self.step, None
        if step is None:
            raise RuntimeError("Est finished a step it never allocated")
        index = step.index  # (rows,) the global prompt of each row
        if len(index) != len(values):
            raise RuntimeError(f"TRL gathered {len(values)} rewards for the step's {len(index)} rows")
        combined = trl_advantages.combine_rewards(values, weights, index, aggregation=aggregation, epsilon=epsilon)
        batch_mean, batch_std = trl_advantages.mean_std(trl_advantages.moments(combined))
        advantages = trl_advantages.advantages(combined, index, aggregation=aggregation, scale_rewards=scale_rewards,
                                               batch_mean=batch_mean, batch_std=batch_std, epsilon=epsilon)
        reward = trl_advantages.combine_rewards(values, weights, index, aggregation="sum_then_normalize")
        rbar, reward_std = trl_advantages.set_statistics(reward, index)  # (rows,) TRL's reward over the prompt
        advantages, grad_metrics = weigh_advantages(advantages, np.nan_to_num(rbar, nan=0.0), self.config)

        correct = np.nansum(values[:, correctness], axis=1) > self.config.positive_threshold  # (rows,)
        num_prompts = len(step.prompts)
        samples = np.bincount(index, minlength=num_prompts)
        positives = np.bincount(index, weights=correct.astype(np.float64), minlength=num_prompts)
        # TRL's frac_reward_zero_std: the share of rows whose prompt's rewards have zero std, here per prompt
        zero_std = np.isclose(np.nan_to_num(reward_std, nan=0.0), 0.0)  # (rows,) the same for all of a prompt's rows
        zero_prompts = np.bincount(index, weights=zero_std.astype(np.float64), minlength=num_prompts) == samples
        metrics = {**allocation_summary(step.counts, step.p_hat), **grad_metrics,
                   "frac_reward_zero_std": float(zero_std.mean()),
                   "zero_variance_fraction": float(zero_prompts.mean()),
                   "positive_fraction": float(correct.mean())}
        remember_visits(self.memory, [prompt_key(p) for p in step.prompts], positives.tolist(),
                        (samples - positives).tolist())
        metrics["memory_prompts"] = float(len(self.memory))
        self.last_advantages = advantages
        return advantages, metrics

    # -- checkpoints --------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"memory": self.memory.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.memory.load_state_dict(state["memory"])
