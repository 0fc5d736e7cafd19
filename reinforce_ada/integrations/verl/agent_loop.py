"""verl's agent-loop manager with Reinforce-Ada sampling on its training calls.

verl (>= 0.9, legacy ``RayPPOTrainer``) builds its rollout manager from
``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` and calls ``generate_sequences`` once per step on the
prompt batch repeated ``rollout.n`` times. This subclass answers training calls with
:class:`~reinforce_ada.integrations.verl.rollout.ReinforceAdaRollout`, whose rounds go to the parent's agent-loop
workers (vLLM / SGLang servers, agent loops and the streaming reward loop all as configured). Validation calls
(``meta_info["validate"]``) pass straight through to the parent. A training round is dispatched as the parent
does it (:meth:`ReinforceAdaAgentLoopManager.generate_round`), but split unevenly (sizes differ by at most one; a
worker gets nothing when the round has fewer rows than there are workers): the parent's ``generate_sequences``
needs a batch divisible by the number of workers, which would mean generating, scoring and throwing away padding
rows. Rewards must be computed during generation (verl's reward loop, which it runs unless a reward model shares
the actor's GPUs): the exit rule needs them between rounds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from verl import DataProto
from verl.experimental.agent_loop import AgentLoopManager
from verl.utils.ray_utils import auto_await

from reinforce_ada.config import ConfigError
from reinforce_ada.integrations.verl.config import check_verl_config
from reinforce_ada.integrations.verl.rollout import ReinforceAdaRollout


def split_rows(num_rows: int, num_parts: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` ranges of ``num_rows`` rows over at most ``num_parts`` parts, sizes differing by at
    most one, no empty part.

    >>> split_rows(6, 4)
    [(0, 2), (2, 4), (4, 5), (5, 6)]
    >>> split_rows(2, 4)
    [(0, 1), (1, 2)]
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1 (got {num_parts})")
    base, extra = divmod(num_rows, num_parts)
    ranges, start = [], 0
    for part in range(num_parts):
        size = base + (part < extra)
        if size:
            ranges.append((start, start + size))
        start += size
    return ranges


class _RoundRollout:
    """One manager's agent-loop workers as a rollout for the wrapper: a round is split over them without padding."""

    def __init__(self, manager: "ReinforceAdaAgentLoopManager"):
        self.manager = manager

    def generate_sequences(self, prompts: Any) -> Any:
        return self.manager.generate_round(prompts)


class ReinforceAdaAgentLoopManager(AgentLoopManager):
    """``AgentLoopManager`` whose training ``generate_sequences`` runs the adaptive sampler."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any):
        self.sampler_config = check_verl_config(config)
        super().__init__(config, *args, **kwargs)
        if self.reward_loop_worker_handles is None:
            raise ConfigError("reinforce_ada scores completions between rounds, so verl must score them during "
                              "generation: use a rule-based reward, or give the reward model its own resource pool "
                              "(reward.reward_model.enable_resource_pool=True)")
        self.reinforce_ada: ReinforceAdaRollout | None = None

    def generate_sequences(self, prompts: Any) -> Any:  # type: ignore[override]
        if prompts.meta_info.get("validate", False):
            return AgentLoopManager.generate_sequences(self, prompts)
        if self.reinforce_ada is None:
            self.reinforce_ada = ReinforceAdaRollout(_RoundRollout(self), self.sampler_config)
        return self.reinforce_ada.generate_sequences(prompts)

    @auto_await
    async def generate_round(self, prompts: Any) -> Any:
        """The parent's dispatch (priorities, workers, timing) with the round split by :func:`split_rows`."""
        if "priority" not in prompts.non_tensor_batch:
            prompts.non_tensor_batch["priority"] = np.arange(len(prompts), dtype=np.int64)
        ranges = split_rows(len(prompts), len(self.agent_loop_workers))
        outputs = await asyncio.gather(*[
            worker.generate_sequences.remote(prompts.slice(start, end))
            for worker, (start, end) in zip(self.agent_loop_workers, ranges)
        ])
        output = DataProto.concat(outputs)
        metrics = [out.meta_info.pop("metrics") for out in outputs]
        output.meta_info = {"timing": self._performance_metrics(metrics, output), **outputs[0].meta_info}
        return output
