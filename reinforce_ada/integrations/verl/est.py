"""Reinforce-Ada-Est (arXiv 2510.04996v3, Algorithm 1) on verl's v1 trainer: the driver's memory, the registered
estimator ``reinforce_ada_est`` and the checkpoint callback that saves the memory.

verl's v1 trainer runs on one driver process (``TaskRunnerV1``): it hands each batch of prompts to the agent-loop
manager, later reads the finished groups back from TransferQueue and calls the registered advantage estimator on
them, and saves checkpoints. Est hooks into those three places and nowhere else:

1. **Allocation** (:meth:`EstDriver.allocate`, called by
   :class:`~reinforce_ada.integrations.verl.agent_loop_v1.ReinforceAdaEstAgentLoopManager`): ``N_x`` for each of
   the batch's prompts from the memory, by :func:`~reinforce_ada.sampling.estimate.est_allocation` (the standalone
   sampler's function), written into verl's per-prompt ``__rollout_n__``; the prompt's ``uid`` is remembered with its
   memory key.
2. **Advantage and memory** (:func:`compute_reinforce_ada_est_advantage`, registered as ``reinforce_ada_est``): for
   the step's rows, grouped by ``uid``, ``A_i = w_grad(rbar_x) (r_i - rbar_x)`` by
   :func:`~reinforce_ada.sampling.estimate.est_advantages`; then each group's visit ``(key, positives,
   negatives)`` goes into the memory by :func:`~reinforce_ada.sampling.estimate.remember_visits`. The estimator is
   the one place where a step's uids and rewards reach the driver together, so the update lives there.
3. **Checkpoint** (:class:`EstCheckpointCallback`, ``trainer.checkpoint_callback_class``): the memory and the
   allocations still waiting for their rewards go into ``<global_step_N>/reinforce_ada_est.json``; the manager reads
   them back when verl resumes from that folder.

In verl's asynchronous modes (``trainer.v1.trainer_mode`` ``colocate_async`` / ``separate_async``) prompts are
handed to generation ahead of training (the warm-up, each step's batch, the replay buffer's refills), so a prompt is
allocated from the memory as it stands when it is submitted, and its visit lands when its group is trained, some
steps later (the lag, reported per estimator call). A group verl drops before training (the replay buffer's staleness
rule, a failed session) never reaches the estimator: it updates the memory not at all, and its allocation is
released (:meth:`EstDriver.release`) once verl no longer holds it. A prompt verl dispatches again with its uid (the
in-flight prompts a resumed run re-issues) keeps the count it was allocated.

The estimator and the manager run in the same driver process and share one :class:`EstDriver`
(:func:`install_driver` / :func:`current_driver`): verl calls an estimator with tensors and the ``algorithm`` config
only, so a module-level handle is the one way to reach the memory without a copied trainer.

Rows the estimator does not own: verl's synthetic padding rows (added to make the batch divisible, all-masked
responses, a ``uid`` no prompt has) get advantage 0 and no memory visit. A row with real response tokens whose
``uid`` this driver never allocated is an error, as is a ``uid`` with more rows than it was allocated (an agent loop
that returns several outputs per session: Est's mean would count them as samples).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import torch
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.core_algos import register_adv_est

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.allocation import allocation_summary
from reinforce_ada.integrations.verl.est_config import EST_ESTIMATOR_NAME
from reinforce_ada.sampling.estimate import est_advantages, est_allocation, est_memory, remember_visits
from reinforce_ada.sampling.memory import PassRateMemory, prompt_key
from reinforce_ada.types import Prompt

__all__ = ["CHECKPOINT_FILE", "EstCheckpointCallback", "EstDriver", "compute_reinforce_ada_est_advantage",
           "current_driver", "install_driver"]

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "reinforce_ada_est.json"
"""Est's state inside each verl ``global_step_N`` folder."""
STATE_VERSION = 1
METRIC_PREFIX = "reinforce_ada_est/"


@dataclass
class Allocation:
    """A prompt handed to generation, waiting for its rewards: its memory key, ``N_x``, and the step it was sent."""

    key: str
    num_samples: int
    step: int


class EstDriver:
    """Est's state on verl's driver: the pass-rate memory and the allocations not yet scored.

    ``metrics_path``: a JSON-lines file that gets one line per allocation and per estimator call (verl's v1 trainer
    has no hook through which a plugin adds to its logged metrics; see docs/verl.md); None: log them only.
    """

    def __init__(self, config: SamplerConfig, memory: PassRateMemory | None = None,
                 metrics_path: str | None = None):
        if config.mode != "est":
            raise ValueError(f"EstDriver runs mode='est' (got mode={config.mode!r})")
        self.config = config
        self.memory = memory if memory is not None else est_memory(config)
        self.pending: dict[str, Allocation] = {}
        self.metrics_path = metrics_path
        self.last_metrics: dict[str, float] = {}
        # The step of the latest submission. verl submits the step's batch first thing in every step
        # (PPOTrainer.prepare_step), so this is the step the estimator's groups are trained in.
        self.latest_step = 0

    # -- step 1-2: allocation -------------------------------------------------------------------------------------
    def allocate(self, uids: Sequence[str], prompts: Sequence[Prompt], step: int) -> np.ndarray:
        """``N_x`` ``(B,)`` for a batch of prompts (``prompts[i]`` carries ``uids[i]``), from the memory as it is;
        each uid is remembered until its rewards arrive.

        The budget is per prompt, ``est.samples_per_prompt x`` the prompts allocated, whatever the call's size (a
        step's batch, an async warm-up, a refill of one prompt). A uid already waiting for its rewards is a prompt
        verl dispatches again (a resumed run re-issues its in-flight prompts with their uids): it keeps its count
        and is not allocated again."""
        if len(uids) != len(prompts):
            raise ValueError(f"{len(uids)} uids for {len(prompts)} prompts")
        uids = [str(uid) for uid in uids]
        self.latest_step = max(self.latest_step, int(step))
        fresh = [i for i, uid in enumerate(uids) if uid not in self.pending]
        counts = np.array([self.pending[uid].num_samples if uid in self.pending else 0 for uid in uids], dtype=np.int64)
        metrics = {f"{METRIC_PREFIX}redispatched_prompts": float(len(uids) - len(fresh))}
        if fresh:
            fresh_counts, p_hat, budget = est_allocation(self.memory, [prompts[i] for i in fresh], self.config)
            for i, n in zip(fresh, fresh_counts):
                counts[i] = int(n)
                self.pending[uids[i]] = Allocation(prompt_key(prompts[i]), int(n), int(step))
            metrics.update({f"{METRIC_PREFIX}{k}": v for k, v in allocation_summary(fresh_counts, p_hat).items()})
            metrics[f"{METRIC_PREFIX}budget"] = float(budget)
        self._report("allocate", step, metrics)
        return counts

    def release(self, uids: Sequence[str]) -> None:
        """Forget the allocations of groups verl dropped before training (the replay buffer's staleness rule, a
        failed session): their rewards never reach the estimator, so they update the memory not at all."""
        released = [self.pending.pop(str(uid)) for uid in uids if str(uid) in self.pending]
        if not released:
            return
        lags = np.array([self.latest_step - a.step for a in released], dtype=np.float64)
        self._report("release", self.latest_step, {f"{METRIC_PREFIX}released_prompts": float(len(released)),
                                                   f"{METRIC_PREFIX}released_lag/max": float(lags.max()),
                                                   f"{METRIC_PREFIX}pending_prompts": float(len(self.pending))})

    # -- steps 4-5: advantages, then the memory -------------------------------------------------------------------
    def advantages(self, rewards: np.ndarray, index: np.ndarray, has_response: np.ndarray) -> np.ndarray:
        """Est's advantage ``(B,)`` for one estimator call's rows, and the visits into the memory.

        ``rewards`` ``(B,)`` outcome rewards; ``index`` ``(B,)`` uids; ``has_response`` ``(B,)`` whether the row has a
        response token (verl's padding rows have none)."""
        index = np.asarray([str(u) for u in index], dtype=object)  # (B,)
        ours = np.array([u in self.pending for u in index], dtype=bool)  # (B,)
        stray = ~ours & has_response
        if stray.any():
            raise RuntimeError(f"the {EST_ESTIMATOR_NAME} estimator got rows of uid {index[stray][0]!r}, which "
                               "ReinforceAdaEstAgentLoopManager never allocated in this process: every training "
                               "prompt must go through that manager (actor_rollout_ref.rollout.agent."
                               "agent_loop_manager_class)")
        advantages = np.zeros(len(rewards), dtype=np.float64)  # (B,)
        if not ours.any():
            return advantages
        uids, rows = np.unique(index[ours], return_counts=True)
        for uid, num_rows in zip(uids, rows):
            if num_rows > self.pending[uid].num_samples:
                raise RuntimeError(f"uid {uid!r} has {num_rows} rows but was allocated "
                                   f"{self.pending[uid].num_samples} samples: the agent loop returned several outputs "
                                   "per session, which Est would count as samples; use a single-output agent loop")
        advantages[ours], weight_metrics = est_advantages(rewards[ours], index[ours], self.config)
        positive = rewards[ours] > self.config.positive_threshold  # (S,)
        keys, num_positive, num_negative = [], [], []
        for uid in uids:
            in_group = index[ours] == uid
            keys.append(self.pending[uid].key)
            num_positive.append(float(positive[in_group].sum()))
            num_negative.append(float((~positive[in_group]).sum()))
        lags = np.array([self.latest_step - self.pending[uid].step for uid in uids], dtype=np.float64)  # (G,)
        for uid in uids:
            del self.pending[uid]
        remember_visits(self.memory, keys, num_positive, num_negative)
        metrics = {f"{METRIC_PREFIX}{k}": v for k, v in weight_metrics.items()}
        metrics[f"{METRIC_PREFIX}memory_prompts"] = float(len(self.memory))
        metrics[f"{METRIC_PREFIX}pending_prompts"] = float(len(self.pending))
        metrics[f"{METRIC_PREFIX}prompts"] = float(len(uids))
        metrics[f"{METRIC_PREFIX}rows"] = float(rows.sum())
        metrics[f"{METRIC_PREFIX}rows_per_prompt/min"] = float(rows.min())
        metrics[f"{METRIC_PREFIX}rows_per_prompt/max"] = float(rows.max())
        metrics[f"{METRIC_PREFIX}lag/min"] = float(lags.min())
        metrics[f"{METRIC_PREFIX}lag/mean"] = float(lags.mean())
        metrics[f"{METRIC_PREFIX}lag/max"] = float(lags.max())
        self._report("advantage", self.latest_step, metrics)
        return advantages

    def _report(self, event: str, step: int, metrics: dict[str, float]) -> None:
        self.last_metrics = metrics
        logger.info("reinforce_ada_est %s step %d: %s", event, step,
                    ", ".join(f"{k[len(METRIC_PREFIX):]}={v:.4g}" for k, v in metrics.items()))
        if self.metrics_path:
            os.makedirs(os.path.dirname(os.path.abspath(self.metrics_path)), exist_ok=True)
            with open(self.metrics_path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"event": event, "step": step, **metrics}) + "\n")

    # -- checkpointing --------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "memory": self.memory.state_dict(),
                "pending": {uid: [a.key, a.num_samples, a.step] for uid, a in self.pending.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"Est's verl state has version {state.get('version')!r}, expected {STATE_VERSION}")
        self.memory.load_state_dict(state["memory"])
        self.pending = {uid: Allocation(key, int(n), int(step)) for uid, (key, n, step) in state["pending"].items()}
        self.latest_step = max([self.latest_step] + [a.step for a in self.pending.values()])

    def save(self, folder: str) -> str:
        """Write the state into a verl ``global_step_N`` folder; returns the file's path."""
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, CHECKPOINT_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(self.state_dict(), out)
        os.replace(tmp, path)
        return path

    def load(self, folder: str) -> None:
        """Read the state from a verl ``global_step_N`` folder; an error when the folder holds none."""
        path = os.path.join(folder, CHECKPOINT_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"verl resumes from {folder}, which holds no {CHECKPOINT_FILE}: it was not saved "
                                    "by a Reinforce-Ada-Est run (trainer.checkpoint_callback_class="
                                    "reinforce_ada.integrations.verl.est.EstCheckpointCallback), so Est's memory "
                                    "cannot be restored; resume from a checkpoint Est saved, or set "
                                    "trainer.resume_mode=disable to start afresh")
        with open(path, encoding="utf-8") as src:
            self.load_state_dict(json.load(src))
        logger.info("restored Est's memory (%d prompts, %d allocations waiting) from %s", len(self.memory),
                    len(self.pending), path)


_DRIVER: EstDriver | None = None


def install_driver(driver: EstDriver | None) -> None:
    """Make ``driver`` the one the ``reinforce_ada_est`` estimator uses in this process (None: remove it)."""
    global _DRIVER
    _DRIVER = driver


def current_driver() -> EstDriver:
    """The driver installed in this process; an error naming the missing piece when there is none."""
    if _DRIVER is None:
        raise RuntimeError(f"the {EST_ESTIMATOR_NAME} estimator runs on verl's driver next to "
                           "ReinforceAdaEstAgentLoopManager, which was not created in this process: set "
                           "actor_rollout_ref.rollout.agent.agent_loop_manager_class="
                           "reinforce_ada.integrations.verl.agent_loop_v1.ReinforceAdaEstAgentLoopManager and "
                           "trainer.use_v1=true")
    return _DRIVER


@register_adv_est(EST_ESTIMATOR_NAME)
def compute_reinforce_ada_est_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Optional[np.ndarray] = None,
    config: Any = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Est's advantages (and returns, the same tensor) ``(B, T)``, grouped by ``uid``; records the step's visits.

    Args:
        token_level_rewards: ``(B, T)`` rewards; their sum over tokens is the outcome reward ``r``.
        response_mask: ``(B, T)`` 1 on response tokens.
        index: ``(B,)`` prompt ids (verl's ``uid``).
        config: verl's ``algorithm`` config (the driver holds the same block, read once at start-up).
    """
    if index is None:
        raise ValueError(f"the {EST_ESTIMATOR_NAME} estimator groups rows by uid, and verl passed none")
    driver = current_driver()
    with torch.no_grad():
        rewards = token_level_rewards.sum(dim=-1).detach().cpu().numpy().astype(np.float64)  # (B,)
        has_response = (response_mask.sum(dim=-1) > 0).detach().cpu().numpy()  # (B,)
        scalars = driver.advantages(rewards, np.asarray(index, dtype=object), has_response)  # (B,)
        scalar_tensor = torch.from_numpy(scalars).to(device=token_level_rewards.device,
                                                     dtype=token_level_rewards.dtype)
        advantages = scalar_tensor.unsqueeze(-1) * response_mask  # (B, T)
    return advantages, advantages


class EstCheckpointCallback(CheckpointCallback):
    """``trainer.checkpoint_callback_class``: after verl saves ``global_step_N``, Est's memory goes into it."""

    def on_save(self, trainer: Any, global_step: int, checkpoint_dir: str, async_save: bool = False,
                **kwargs: Any) -> None:
        path = current_driver().save(checkpoint_dir)
        logger.info("saved Est's memory for step %d to %s", global_step, path)
