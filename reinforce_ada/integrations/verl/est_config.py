"""Reinforce-Ada-Est on verl's v1 trainer: the ``algorithm.reinforce_ada`` block read into a :class:`SamplerConfig`
with ``mode="est"``, and every check run before Ray starts.

::

    algorithm:
      adv_estimator: reinforce_ada_est
      reinforce_ada:
        mode: est
        est:                      # the standalone trainer's sampler.est.*: same names, same defaults
          samples_per_prompt: 8   # = actor_rollout_ref.rollout.n
          min_samples: 2
          max_samples: 32
          decay: 0.9
        objective: log            # the objective family: objective, sample_share, objective_eps, max_grad_weight
    actor_rollout_ref.rollout.n: 8
    actor_rollout_ref.rollout.agent.agent_loop_manager_class: <EST_AGENT_LOOP_MANAGER_FQN>
    trainer.use_v1: true
    trainer.checkpoint_callback_class: <EST_CHECKPOINT_CALLBACK_FQN>

A bad value raises :class:`~reinforce_ada.config.ConfigError` naming the key; so, before Ray starts, do a memory seed
file with a bad row and a resume whose ``global_step_N`` folder holds no readable ``reinforce_ada_est.json``
(:func:`resumed_checkpoint_folder`). This module imports no part of verl when it is imported (the resume check calls
verl's ``find_latest_ckpt_path``, and reads the state with :mod:`~reinforce_ada.integrations.verl.est`).
"""

from __future__ import annotations

import os
from typing import Any

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.errors import DataError
from reinforce_ada.integrations.verl.keys import (EST_ESTIMATOR_NAME, ESTIMATOR_NAME, get_key as _get,
                                                  to_plain as _to_plain)

__all__ = ["EST_AGENT_LOOP_MANAGER_FQN", "EST_CHECKPOINT_CALLBACK_FQN", "EST_ESTIMATOR_NAME", "EST_KEYS",
           "RESUME_MODES", "check_est_config", "check_resume_mode", "est_sampler_config", "est_selected",
           "resumed_checkpoint_folder"]

RESUME_MODES = ("auto", "disable", "resume_path")
"""verl's ``trainer.resume_mode`` values (``PPOTrainer._load_checkpoint``)."""

EST_AGENT_LOOP_MANAGER_FQN = "reinforce_ada.integrations.verl.agent_loop_v1.ReinforceAdaEstAgentLoopManager"
"""What ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` must name: it sets each prompt's
``__rollout_n__`` from the pass-rate memory."""

EST_CHECKPOINT_CALLBACK_FQN = "reinforce_ada.integrations.verl.est.EstCheckpointCallback"
"""What ``trainer.checkpoint_callback_class`` must name: it saves the memory into each verl checkpoint."""

EST_KEYS: dict[str, str] = {
    "mode": "est",
    "est": "Est's settings (reinforce_ada.config.EstConfig), as the standalone trainer's sampler.est.*",
    "objective": "the objective f: linear, log (Est's default) or power:A",
    "sample_share": "the share of f's weight paid in samples (Est's default 1/2)",
    "objective_eps": "keeps w(p) finite at p = 0",
    "max_grad_weight": "the cap on the gradient weight",
    "positive_threshold": "a sample counts as a success in the memory when reward > positive_threshold",
    "normalize_std": "divide the centred rewards by the prompt's reward std + epsilon before the gradient weight",
    "epsilon": "see normalize_std",
    "memory": "memory.seed: a select-prompts pass-rate file to start the memory from",
}
"""The ``algorithm.reinforce_ada`` keys ``mode: est`` takes on verl; every other :class:`SamplerConfig` field is a
setting of the round-based sampler (Seq) and is refused."""

NOT_IN_VERL_EST: dict[str, str] = {
    "budget": "verl hands prompts to generation in calls of varying size (data.gen_batch_size chunks, refills): give "
              "est.samples_per_prompt, the budget per prompt (= actor_rollout_ref.rollout.n)",
}
"""``est.*`` settings the v1 trainer cannot honour, each with the reason."""


def est_selected(config: Any) -> bool:
    """Whether the config asks for Reinforce-Ada-Est (by its estimator or by ``algorithm.reinforce_ada.mode``)."""
    return (_get(config, "algorithm.adv_estimator") == EST_ESTIMATOR_NAME
            or _get(config, f"algorithm.{ESTIMATOR_NAME}.mode") == "est")


def est_sampler_config(algorithm: Any) -> SamplerConfig:
    """The :class:`SamplerConfig` (``mode="est"``) from an ``algorithm`` config's ``reinforce_ada`` block.

    >>> cfg = est_sampler_config({"reinforce_ada": {"mode": "est", "est": {"decay": 0.5}}})
    >>> (cfg.mode, cfg.est.decay, cfg.est.samples_per_prompt, cfg.objective_in_use)
    ('est', 0.5, 8, 'log')
    """
    block = _to_plain(_get(algorithm, ESTIMATOR_NAME, {}) or {})
    if not isinstance(block, dict):
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME} must be a mapping (got {type(block).__name__})")
    block = {k: v for k, v in block.items() if v is not None}
    if block.get("mode", "est") != "est":
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.mode={block['mode']!r} with algorithm.adv_estimator="
                          f"{EST_ESTIMATOR_NAME}: set mode to 'est', or the estimator to {ESTIMATOR_NAME!r} for Seq")
    seq_keys = sorted(set(block) - set(EST_KEYS))
    if seq_keys:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.{seq_keys[0]} is not taken with mode=est: it is a setting of "
                          f"the round-based sampler (Seq); Est takes {sorted(EST_KEYS)}")
    est = block.get("est", {})
    if not isinstance(est, dict):
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.est must be a mapping (got {type(est).__name__})")
    for key, reason in NOT_IN_VERL_EST.items():
        if est.get(key) is not None:
            raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.est.{key} is not taken by the verl plugin: {reason}")
    settings = {k: v for k, v in block.items() if k != "mode"}
    try:
        return SamplerConfig.reinforce_ada_est(**settings)
    except (ConfigError, TypeError) as err:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}: {err}") from None


def check_resume_mode(config: Any) -> None:
    """``trainer.resume_mode`` is one verl knows, and ``resume_path`` comes with a ``trainer.resume_from_path`` naming
    a ``global_step_N`` folder (verl asserts both only once its workers run, or logs an unknown mode and fails on a
    variable it never set)."""
    mode = _get(config, "trainer.resume_mode", "auto")
    if mode not in RESUME_MODES:
        raise ConfigError(f"trainer.resume_mode={mode!r}: verl knows {', '.join(RESUME_MODES)}")
    if mode == "resume_path":
        path = _get(config, "trainer.resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            raise ConfigError(f"trainer.resume_mode=resume_path needs trainer.resume_from_path naming a global_step_N "
                              f"folder (got {path!r})")


def resumed_checkpoint_folder(config: Any) -> str | None:
    """The ``global_step_N`` folder verl's v1 trainer resumes from under this config, or None for a fresh start
    (the decision of ``PPOTrainer._load_checkpoint``, read again: verl passes the manager only the config), found the
    same way before Ray starts and in the manager."""
    check_resume_mode(config)
    mode = _get(config, "trainer.resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "auto":
        from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

        folder = _get(config, "trainer.default_local_dir")
        if folder is None:
            return None
        return find_latest_ckpt_path(os.path.join(os.getcwd(), folder) if not os.path.isabs(folder) else folder)
    folder = str(_get(config, "trainer.resume_from_path"))
    return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)


def check_est_config(config: Any) -> SamplerConfig:
    """Reject a v1 Est config this plugin cannot honour, with the key to change; return the sampler config.

    Checked: the estimator is ``reinforce_ada_est``; the v1 trainer is selected; the agent-loop manager and the
    checkpoint callback are ours (without the callback the memory would not be saved, and a resumed run would start
    from an empty one); ``rollout.n`` equals ``est.samples_per_prompt`` (so a step has GRPO-n's rows and verl's
    mini-batches, ``ppo_mini_batch_size x rollout.n`` rows, are unchanged); no in-reward KL and no DAPO filtering
    (the memory must see every group's raw rewards); the ``algorithm.reinforce_ada`` block; every row of the memory
    seed file; ``trainer.resume_mode``, and the ``reinforce_ada_est.json`` of the folder verl will resume from (a
    missing or damaged one, named; it was found only inside Ray, after the workers started).
    """
    estimator = _get(config, "algorithm.adv_estimator")
    if estimator != EST_ESTIMATOR_NAME:
        raise ConfigError(f"algorithm.adv_estimator={estimator!r} with algorithm.{ESTIMATOR_NAME}.mode=est: set it "
                          f"to {EST_ESTIMATOR_NAME!r}")
    if not bool(_get(config, "trainer.use_v1", True)):
        raise ConfigError("trainer.use_v1=False with Reinforce-Ada-Est: Est runs on verl's v1 trainer (per-prompt "
                          "__rollout_n__); set trainer.use_v1=true (the reinforce_ada_est_trainer config does)")
    manager = _get(config, "actor_rollout_ref.rollout.agent.agent_loop_manager_class")
    if manager != EST_AGENT_LOOP_MANAGER_FQN:
        raise ConfigError(f"actor_rollout_ref.rollout.agent.agent_loop_manager_class={manager!r}: set it to "
                          f"{EST_AGENT_LOOP_MANAGER_FQN!r} so each prompt's sample count comes from the memory")
    callback = _get(config, "trainer.checkpoint_callback_class")
    if callback != EST_CHECKPOINT_CALLBACK_FQN:
        raise ConfigError(f"trainer.checkpoint_callback_class={callback!r}: set it to {EST_CHECKPOINT_CALLBACK_FQN!r} "
                          "so Est's pass-rate memory is saved with verl's checkpoints")
    if bool(_get(config, "algorithm.use_kl_in_reward", False)):
        raise ConfigError("algorithm.use_kl_in_reward=True is not supported with reinforce_ada_est: the baseline and "
                          "the memory are over raw rewards; use actor_rollout_ref.actor.use_kl_loss instead")
    if bool(_get(config, "algorithm.filter_groups.enable", False)):
        raise ConfigError("algorithm.filter_groups.enable=True is not supported with reinforce_ada_est: a filtered "
                          "group never reaches the estimator, so the memory would never learn that its prompt is "
                          "solved or hopeless (Est spends few samples there instead of filtering)")
    sampler = est_sampler_config(_get(config, "algorithm", {}))
    try:
        sampler.est.step_budget(1)  # samples_per_prompt within [min_samples, max_samples]: any batch can be spent
    except ConfigError as err:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}: {err}") from None
    rollout_n = _get(config, "actor_rollout_ref.rollout.n")
    if rollout_n is None or int(rollout_n) != sampler.est.samples_per_prompt:
        raise ConfigError(f"actor_rollout_ref.rollout.n={rollout_n} differs from algorithm.{ESTIMATOR_NAME}.est."
                          f"samples_per_prompt={sampler.est.samples_per_prompt}: set them equal, so a step draws "
                          "GRPO-n's rows and verl's mini-batches (ppo_mini_batch_size x rollout.n rows) are unchanged")
    if sampler.memory.seed:
        from reinforce_ada.sampling.memory import read_pass_rates

        try:
            read_pass_rates(sampler.memory.seed)
        except DataError as err:
            raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.memory.seed: {err}") from None
    folder = resumed_checkpoint_folder(config)
    if folder is not None:
        from reinforce_ada.integrations.verl.est import EstDriver

        EstDriver(sampler).load(folder)  # what the manager will read: a missing or damaged file, named
    return sampler
