"""verl advantage estimator ``reinforce_ada``: whole-pool baselines from per-sample pool statistics.

Reinforce-Ada (arXiv 2510.04996, Eq. 5) uses ``A_i = r_i - mean(pool)`` (optionally ``/ (std(pool) + eps)``), where
the pool is every completion drawn for the prompt in this step -- not only the ``n`` kept for training. The pool
never reaches the trainer, so :class:`~reinforce_ada.integrations.verl.rollout.ReinforceAdaRollout` writes each
row's pool statistics into the ``reward_baselines`` column (``(B, 4)``: mean, std, count, num_positive; see
:mod:`reinforce_ada.integrations.verl.convert`), which verl's ``compute_advantage`` hands to every registered
estimator. This function only unpacks verl's tensors and calls :func:`reinforce_ada.core.advantages.compute_advantages`
-- the same code the standalone trainer uses -- so the two agree to float precision, for any real reward.

``r_i`` is ``token_level_rewards.sum(-1)`` (one outcome reward per response, as in verl's GRPO). Padding rows carry
``pool_count = 0`` and an all-zero ``response_mask``; they get advantage 0 and are left out of group statistics.
Settings come from ``algorithm.reinforce_ada`` (``advantage``: ``"pool"`` or ``"group"``, ``normalize_std``,
``epsilon``); verl's ``norm_adv_by_std_in_grpo`` is not read.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from reinforce_ada.core.advantages import compute_advantages
from reinforce_ada.integrations.verl.config import ESTIMATOR_NAME, estimator_settings
from reinforce_ada.integrations.verl.convert import POOL_STATS_COLUMNS


@register_adv_est(ESTIMATOR_NAME)
def compute_reinforce_ada_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Optional[np.ndarray] = None,
    reward_baselines: Optional[torch.Tensor] = None,
    config: Any = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages (and returns, the same tensor) ``(B, T)`` from rewards and per-sample pool statistics.

    Args:
        token_level_rewards: ``(B, T)`` rewards; their sum over tokens is the outcome reward ``r``.
        response_mask: ``(B, T)`` 1 on response tokens.
        index: ``(B,)`` prompt ids (verl's ``uid``); only the ``"group"`` baseline reads it.
        reward_baselines: ``(B, 4)`` pool statistics written by ``ReinforceAdaRollout``.
        config: verl's ``algorithm`` config; its ``reinforce_ada`` block is read.
    """
    num_rows = token_level_rewards.shape[0]
    if reward_baselines is None or tuple(reward_baselines.shape) != (num_rows, len(POOL_STATS_COLUMNS)):
        got = None if reward_baselines is None else tuple(reward_baselines.shape)
        raise ValueError(
            f"the {ESTIMATOR_NAME!r} estimator needs per-sample pool statistics in batch['reward_baselines'] with "
            f"shape ({num_rows}, {len(POOL_STATS_COLUMNS)}) (got {got}). They are written by ReinforceAdaRollout: "
            "run `python -m reinforce_ada.integrations.verl.main_ppo` or set "
            "actor_rollout_ref.rollout.agent.agent_loop_manager_class to the ReinforceAdaAgentLoopManager"
        )
    mode, normalize_std, epsilon = estimator_settings(config if config is not None else {})
    with torch.no_grad():
        rewards = token_level_rewards.sum(dim=-1).detach().cpu().numpy().astype(np.float64)  # (B,)
        stats = reward_baselines.detach().cpu().numpy().astype(np.float64)  # (B, 4)
        pool_mean, pool_std, pool_count = stats[:, 0], stats[:, 1], stats[:, 2]
        real = pool_count > 0  # padding rows carry count 0
        if index is None:
            index = np.arange(num_rows)
        index = np.asarray(index, dtype=object)
        scalars = np.zeros(num_rows, dtype=np.float64)
        if real.any():
            scalars[real] = compute_advantages(mode, rewards[real], index[real], pool_mean=pool_mean[real],
                                               pool_std=pool_std[real], pool_count=pool_count[real],
                                               normalize_std=normalize_std, epsilon=epsilon)
        scalar_tensor = torch.from_numpy(scalars).to(device=token_level_rewards.device,
                                                     dtype=token_level_rewards.dtype)
        advantages = scalar_tensor.unsqueeze(-1) * response_mask  # (B, T)
    return advantages, advantages
