"""The ``algorithm.reinforce_ada`` block of verl's hydra config, read into a :class:`SamplerConfig`.

verl keeps its settings in one hydra/OmegaConf tree; ours live under ``algorithm.reinforce_ada`` and use the
:class:`~reinforce_ada.config.SamplerConfig` field names (the paper's names)::

    algorithm:
      adv_estimator: reinforce_ada
      reinforce_ada:
        samples_per_round: 8      # M
        max_rounds: 4             # N
        exit_rule: balanced
        selection: balanced
        normalize_std: false

``group_size`` (n) is *not* set here: it is verl's ``actor_rollout_ref.rollout.n``, the number of rows per prompt the
trainer expects back from generation. Every check runs here, before Ray starts or a model loads, and a bad value
raises :class:`~reinforce_ada.config.ConfigError` naming the key.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.integrations.verl.keys import ESTIMATOR_NAME, get_key as _get, to_plain as _to_plain

NOT_IN_VERL: dict[str, str] = {
    "group_size": "it is verl's actor_rollout_ref.rollout.n (the rows per prompt its trainer expects)",
    "importance_weights": "the verl estimator does not apply per-completion weights",
    "budget_skip": "verl expects rows for every prompt: always False (each prompt gets its group first)",
    "budget_probe": "a setting of budget_skip=True, which verl cannot use",
    "budget_min_group": "a setting of budget_skip=True, which verl cannot use",
    "budget_overdraw": "needs budget_skip=True: verl trains every prompt it hands out",
    "budget_min_signal_rate": "needs budget_skip=True: verl trains every prompt it hands out",
    "mode": "the legacy trainer runs the round-based sampler (Seq) inside its agent loop; Reinforce-Ada-Est "
            "(mode: est) runs on verl's v1 trainer instead: set algorithm.adv_estimator=reinforce_ada_est and "
            "trainer.use_v1=true (the reinforce_ada_est_trainer config; docs/verl.md, 'Reinforce-Ada-Est')",
    "streaming": "verl runs the round-based sampler inside its agent loop",
    "memory": "the rollout keeps its own pass-rate memory for budget mode",
    "est": "Reinforce-Ada-Est's settings: Est runs on the v1 trainer (see mode)",
    "objective": "the Seq estimator on the legacy trainer trains on the linear objective; the objective family runs "
                 "with Est on the v1 trainer (see mode) and in the standalone trainer",
    "sample_share": "a setting of objective, which this estimator does not take",
    "objective_eps": "a setting of objective, which this estimator does not take",
    "max_grad_weight": "a setting of objective, which this estimator does not take",
}
"""The :class:`SamplerConfig` fields ``algorithm.reinforce_ada`` does not take, each with the reason."""

SAMPLER_KEYS = tuple(f.name for f in fields(SamplerConfig) if f.name not in NOT_IN_VERL)
"""Keys accepted under ``algorithm.reinforce_ada``: every :class:`SamplerConfig` field (same name, default and
check) except :data:`NOT_IN_VERL`."""

CONFIG_DIR = Path(__file__).resolve().parent / "conf"
"""Holds ``reinforce_ada_trainer.yaml``: verl's ``ppo_trainer`` plus this plugin's settings."""
CONFIG_NAME = "reinforce_ada_trainer"
EST_CONFIG_NAME = "reinforce_ada_est_trainer"
"""``--config-name`` of Reinforce-Ada-Est on verl's v1 trainer (``conf/reinforce_ada_est_trainer.yaml``)."""

AGENT_LOOP_MANAGER_FQN = "reinforce_ada.integrations.verl.agent_loop.ReinforceAdaAgentLoopManager"
"""What ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` must name for the sampler to run."""


def sampler_settings(algorithm: Any) -> dict[str, Any]:
    """The ``reinforce_ada`` block of an ``algorithm`` config as a plain dict (empty when absent).

    >>> sampler_settings({"reinforce_ada": {"max_rounds": 2}})
    {'max_rounds': 2}
    """
    block = _get(algorithm, ESTIMATOR_NAME, {}) or {}
    block = _to_plain(block)
    if not isinstance(block, dict):
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME} must be a mapping (got {type(block).__name__})")
    excluded = [key for key in block if key in NOT_IN_VERL]
    if excluded:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.{excluded[0]} is not taken by the verl plugin: "
                          f"{NOT_IN_VERL[excluded[0]]}")
    unknown = sorted(set(block) - set(SAMPLER_KEYS))
    if unknown:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME} has unknown key(s) {unknown}; accepted: {list(SAMPLER_KEYS)} "
                          "(group_size is actor_rollout_ref.rollout.n)")
    return {k: v for k, v in block.items() if v is not None}


def sampler_config_from_verl(config: Any) -> SamplerConfig:
    """Build the sampler's config from a full verl config (``algorithm.reinforce_ada`` + ``rollout.n``).

    >>> cfg = sampler_config_from_verl({"algorithm": {"reinforce_ada": {"samples_per_round": 8, "max_rounds": 4}},
    ...                                 "actor_rollout_ref": {"rollout": {"n": 4}}})
    >>> (cfg.samples_per_round, cfg.max_rounds, cfg.group_size)
    (8, 4, 4)
    """
    settings = sampler_settings(_get(config, "algorithm", {}))
    group_size = _get(config, "actor_rollout_ref.rollout.n")
    if group_size is None:
        raise ConfigError("actor_rollout_ref.rollout.n is missing: it is the group size n the trainer trains on")
    try:
        # budget_skip=False: verl expects rows for every prompt, so budget mode gives each its group first
        sampler = SamplerConfig(group_size=int(group_size), budget_skip=False, **settings)
    except ConfigError as err:
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}: {err}") from None
    if sampler.selection == "all":
        raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.selection='all' keeps whole pools of varying size; verl trains "
                          "on exactly rollout.n rows per prompt: choose balanced, positive_focused or random")
    prompts_per_step = _get(config, "data.train_batch_size")
    if sampler.sample_budget_per_step is not None and isinstance(prompts_per_step, int):
        minimum = sampler.group_size * prompts_per_step
        if sampler.sample_budget_per_step < minimum:
            raise ConfigError(f"algorithm.{ESTIMATOR_NAME}.sample_budget_per_step={sampler.sample_budget_per_step} "
                              f"is below one group per prompt: at least rollout.n x data.train_batch_size = "
                              f"{sampler.group_size} x {prompts_per_step} = {minimum}")
    return sampler


def estimator_settings(algorithm: Any) -> tuple[str, bool, float]:
    """``(advantage mode, normalize_std, epsilon)`` for the estimator, from the same block with the same defaults."""
    settings = sampler_settings(algorithm)
    defaults = SamplerConfig()
    return (settings.get("advantage", defaults.advantage), bool(settings.get("normalize_std", defaults.normalize_std)),
            float(settings.get("epsilon", defaults.epsilon)))


def check_verl_config(config: Any) -> SamplerConfig:
    """Reject settings this plugin cannot honour, with the key to change; return the sampler config.

    Reinforce-Ada-Est (``algorithm.adv_estimator=reinforce_ada_est`` or ``algorithm.reinforce_ada.mode=est``) is
    checked by :func:`~reinforce_ada.integrations.verl.est_config.check_est_config` (verl's v1 trainer). Otherwise
    the round-based sampler (Seq) is checked: the estimator is ``reinforce_ada``; the legacy (v0) trainer is selected
    (verl 0.9.1's v1 trainer cannot carry the pool statistics to the estimator: docs/verl.md, "Why Seq does not run
    on the v1 trainer"); the agent-loop manager is ours; no in-reward KL (the pool baseline is over raw rewards); the
    sampler settings. For both: ``trainer.resume_mode`` is one verl knows.
    """
    from reinforce_ada.integrations.verl.est_config import check_est_config, check_resume_mode, est_selected

    check_resume_mode(config)
    if est_selected(config):
        return check_est_config(config)
    estimator = _get(config, "algorithm.adv_estimator")
    if estimator != ESTIMATOR_NAME:
        raise ConfigError(f"algorithm.adv_estimator={estimator!r}: set it to {ESTIMATOR_NAME!r} to train with "
                          "Reinforce-Ada's pool advantages")
    if bool(_get(config, "trainer.use_v1", False)):
        raise ConfigError("trainer.use_v1=True is not supported by the round-based sampler (Seq) with verl 0.9: its "
                          "v1 trainer reads a fixed list of fields into the advantage step "
                          "(PPOTrainer._compute_advantage), so the whole-pool statistics cannot reach the "
                          "reinforce_ada estimator (see docs/verl.md, 'Why Seq does not run on the v1 trainer'); set "
                          "trainer.use_v1=False (the reinforce_ada_trainer config does), or run Reinforce-Ada-Est on "
                          "v1 (algorithm.reinforce_ada.mode=est, the reinforce_ada_est_trainer config)")
    manager = _get(config, "actor_rollout_ref.rollout.agent.agent_loop_manager_class")
    if manager != AGENT_LOOP_MANAGER_FQN:
        raise ConfigError(f"actor_rollout_ref.rollout.agent.agent_loop_manager_class={manager!r}: set it to "
                          f"{AGENT_LOOP_MANAGER_FQN!r} so generation runs the adaptive sampler")
    if bool(_get(config, "algorithm.use_kl_in_reward", False)):
        raise ConfigError("algorithm.use_kl_in_reward=True is not supported with reinforce_ada: the pool baseline is "
                          "computed from raw rewards; use actor_rollout_ref.actor.use_kl_loss instead")
    return sampler_config_from_verl(config)


def compose_trainer_config(overrides: Sequence[str] = (), config_name: str = CONFIG_NAME) -> Any:
    """The full trainer config ``main_ppo`` would run with these command-line overrides (hydra ``compose``);
    ``config_name``: :data:`CONFIG_NAME` (Seq, legacy trainer) or :data:`EST_CONFIG_NAME` (Est, v1 trainer)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides))
