"""verl's agent-loop manager with Reinforce-Ada sampling on its training calls.

verl (>= 0.9, legacy ``RayPPOTrainer``) builds its rollout manager from
``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` and calls ``generate_sequences`` once per step on the
prompt batch repeated ``rollout.n`` times. This subclass answers training calls with
:class:`~reinforce_ada.integrations.verl.rollout.ReinforceAdaRollout`, whose rounds go to the unchanged parent
``generate_sequences`` (vLLM / SGLang servers, agent loops and the streaming reward loop all as configured).
Validation calls (``meta_info["validate"]``) pass straight through. Each round is padded to a multiple of the
number of agent-loop workers, because the parent splits a batch into equal chunks. Rewards must be computed during
generation (verl's reward loop, which it runs unless a reward model shares the actor's GPUs): the exit rule needs
them between rounds.
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop import AgentLoopManager

from reinforce_ada.config import ConfigError
from reinforce_ada.integrations.verl.config import check_verl_config
from reinforce_ada.integrations.verl.rollout import ReinforceAdaRollout


class _ParentRollout:
    """The parent class's ``generate_sequences`` of one manager, as a rollout object for the wrapper."""

    def __init__(self, manager: "ReinforceAdaAgentLoopManager"):
        self.manager = manager

    def generate_sequences(self, prompts: Any) -> Any:
        return AgentLoopManager.generate_sequences(self.manager, prompts)


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
            self.reinforce_ada = ReinforceAdaRollout(_ParentRollout(self), self.sampler_config,
                                                     size_divisor=max(1, len(self.agent_loop_workers)))
        return self.reinforce_ada.generate_sequences(prompts)
