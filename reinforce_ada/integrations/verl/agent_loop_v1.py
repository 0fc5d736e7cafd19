"""verl's v1 agent-loop manager with Reinforce-Ada-Est's per-prompt sample counts.

verl's v1 trainer (``trainer.use_v1=true``) builds the class named by
``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` on its driver and hands it every batch of training
prompts (``generate_sequences(batch)``, a TensorDict with one row per prompt); its workers run ``n`` sessions per
prompt, where ``n`` is the prompt's ``__rollout_n__`` when the batch carries one and ``rollout.n`` otherwise
(``verl/trainer/ppo/v1/agent_loop_tq.py``, ``AgentLoopWorkerTQ._run_prompt``). This subclass of verl's
``AgentLoopManagerTQ`` writes ``__rollout_n__`` from Est's memory
(:meth:`~reinforce_ada.integrations.verl.est.EstDriver.allocate`) and then dispatches as verl does. Validation
batches pass through untouched (``val_kwargs.n`` samples each).

Every training submission comes through here: ``PPOTrainer._submit_batch_to_rollout`` (the step's batch, the
asynchronous modes' warm-up and the replay buffer's refills) and ``_reissue_inflight_prompts`` (a resumed
asynchronous run's in-flight prompts, with their uids). Before allocating, the manager releases the allocations of
groups TransferQueue no longer holds -- the replay buffer cleared them (``ReplayBuffer._clear_groups``: a stale or
failed group) -- so they are neither remembered nor left waiting.

It also owns the driver's :class:`~reinforce_ada.integrations.verl.est.EstDriver`: created (and installed for the
``reinforce_ada_est`` estimator) when verl builds the manager, which is after the trainer has loaded its
checkpoint; when verl resumed from a ``global_step_N`` folder, the memory is read back from the same folder, found
the way verl's ``PPOTrainer._load_checkpoint`` finds it (``trainer.resume_mode``, ``default_local_dir``,
``resume_from_path``; :func:`resumed_checkpoint_folder`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import transfer_queue as tq
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
from verl.utils import tensordict_utils as tu
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from reinforce_ada.config import ConfigError
from reinforce_ada.integrations.verl.config import _get, check_verl_config
from reinforce_ada.integrations.verl.convert import _ground_truth
from reinforce_ada.integrations.verl.est import EstDriver, install_driver
from reinforce_ada.types import Prompt

__all__ = ["ROLLOUT_N_KEY", "ReinforceAdaEstAgentLoopManager", "est_prompts", "resumed_checkpoint_folder"]

logger = logging.getLogger(__name__)

ROLLOUT_N_KEY = "__rollout_n__"
"""The per-prompt sample count verl's v1 agent-loop workers read from a batch row."""
METRICS_FILE = "reinforce_ada_est_metrics.jsonl"
"""Est's per-step metrics, next to verl's checkpoints (``trainer.default_local_dir``)."""
TRAIN_PARTITION = "train"
"""The TransferQueue partition verl's v1 trainer keeps training prompts and trajectories in (keys ``{uid}`` and
``{uid}_{session}_{index}``; ``PPOTrainer._submit_batch_to_rollout``, ``ReplayBuffer``)."""


def _plain(value: Any) -> Any:
    """numpy arrays (what parquet datasets give for chat messages) as lists, so a prompt's key is its content's."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def est_prompts(batch: Any) -> tuple[list[str], list[Prompt]]:
    """A v1 training batch's ``uid`` column and one :class:`Prompt` per row, keyed as the rest of the library keys
    prompts: ``Prompt.prompt`` is ``raw_prompt`` (the chat messages), ``Prompt.answer`` the
    ``reward_model["ground_truth"]`` (:func:`reinforce_ada.sampling.memory.prompt_key`)."""
    uids = [str(u) for u in tu.get(batch, "uid")]
    raw_prompts = tu.get(batch, "raw_prompt")
    if raw_prompts is None:
        raise ValueError("a training batch without raw_prompt: Est keys its memory by the prompt's messages "
                         "(verl's RLHFDataset gives raw_prompt)")
    reward_models = tu.get(batch, "reward_model") or [None] * len(uids)
    prompts = [Prompt(prompt_id=uid, prompt=_plain(raw), answer=_ground_truth(reward) if reward is not None else None)
               for uid, raw, reward in zip(uids, raw_prompts, reward_models, strict=True)]
    return uids, prompts


def resumed_checkpoint_folder(config: Any) -> str | None:
    """The ``global_step_N`` folder verl's v1 trainer resumed from under this config, or None for a fresh start
    (the decision of ``PPOTrainer._load_checkpoint``, read again: verl passes the manager only the config)."""
    mode = _get(config, "trainer.resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "auto":
        folder = _get(config, "trainer.default_local_dir")
        if folder is None:
            return None
        return find_latest_ckpt_path(os.path.join(os.getcwd(), folder) if not os.path.isabs(folder) else folder)
    if mode == "resume_path":
        folder = str(_get(config, "trainer.resume_from_path"))
        return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)
    raise ConfigError(f"trainer.resume_mode={mode!r}: verl knows auto, disable and resume_path")


class ReinforceAdaEstAgentLoopManager(AgentLoopManagerTQ):
    """``AgentLoopManagerTQ`` whose training batches carry Est's ``__rollout_n__``."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any):
        sampler_config = check_verl_config(config)
        if sampler_config.mode != "est":
            raise ConfigError("ReinforceAdaEstAgentLoopManager runs Reinforce-Ada-Est: set "
                              "algorithm.adv_estimator=reinforce_ada_est (algorithm.reinforce_ada.mode=est)")
        super().__init__(config, *args, **kwargs)
        folder = _get(config, "trainer.default_local_dir")
        self.est = EstDriver(sampler_config, metrics_path=os.path.join(folder, METRICS_FILE) if folder else None)
        resumed = resumed_checkpoint_folder(config)
        if resumed is not None:
            self.est.load(resumed)
        install_driver(self.est)

    def generate_sequences(self, prompts: Any) -> None:  # type: ignore[override]
        if not tu.get(prompts, "validate", False):
            self.release_dropped_groups()
            uids, est_prompts_ = est_prompts(prompts)
            counts = self.est.allocate(uids, est_prompts_, step=int(tu.get(prompts, "global_steps", 0)))
            tu.assign_non_tensor_stack(prompts, ROLLOUT_N_KEY, [int(n) for n in counts])
        return super().generate_sequences(prompts)

    def release_dropped_groups(self) -> None:
        """Release the allocations whose group TransferQueue holds neither the prompt nor a trajectory of: verl's
        replay buffer dropped it before training (its staleness rule, ``trainer.v1.sampler.
        max_off_policy_threshold``, or a failed session), and it refills right away, through this manager. With
        nothing pending (a sync step trains every group it submitted) TransferQueue is not asked."""
        if not self.est.pending:
            return
        held = tq.kv_list(TRAIN_PARTITION) or {}
        live = {key.split("_", 1)[0] for key in held.get(TRAIN_PARTITION, {})}
        self.est.release([uid for uid in self.est.pending if uid not in live])
