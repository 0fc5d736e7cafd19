"""Reinforce-Ada as a verl plugin: a registered advantage estimator plus a rollout wrapper -- no fork.

verl (>= 0.9) imports this package in every process that imports verl when it is installed as a ``verl.plugins``
entry point or named in ``VERL_USE_EXTERNAL_MODULES``; importing it registers the advantage estimators
``reinforce_ada`` (:mod:`.advantage`, the round-based sampler on the legacy trainer) and ``reinforce_ada_est``
(:mod:`.est`, Reinforce-Ada-Est on the v1 trainer). The pieces:

* :mod:`.rollout` -- :class:`ReinforceAdaRollout` wraps anything with verl's ``generate_sequences`` (a worker group,
  the agent-loop manager) and runs the core :class:`~reinforce_ada.sampling.sampler.AdaptiveSampler` on it: rounds of ``M``
  samples per active prompt, exits, downsampling to ``n``, exactly ``n`` rows per prompt back, pool statistics in
  ``reward_baselines``, short groups filled with masked padding rows.
* :mod:`.agent_loop` -- :class:`~.agent_loop.ReinforceAdaAgentLoopManager`, the class to name in
  ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` (imported lazily: it pulls in verl's agent loop).
* :mod:`.est`, :mod:`.agent_loop_v1`, :mod:`.est_config` -- Reinforce-Ada-Est on verl's v1 trainer: the driver's
  pass-rate memory, the ``reinforce_ada_est`` estimator (grouped by ``uid``), the checkpoint callback that saves the
  memory, and :class:`~.agent_loop_v1.ReinforceAdaEstAgentLoopManager` (imported lazily: it needs TransferQueue),
  which sets each prompt's ``__rollout_n__``.
* :mod:`.metrics` -- what a step reports: pool vs kept rows with verl's definitions, per-round timing combined
  (never summed), all generated tokens.
* :mod:`.config` -- the ``algorithm.reinforce_ada`` hydra block and the checks run before training.
* :mod:`.convert` -- DataProto <-> :class:`Prompt` / :class:`Completion` / :class:`Group`.
* :mod:`.main_ppo` -- ``python -m reinforce_ada.integrations.verl.main_ppo``: verl's PPO with all of the above.

Install: ``pip install 'reinforce-ada[verl]'`` (see docs/verl.md).
"""

from __future__ import annotations

from importlib import metadata

SUPPORTED_VERL = ">=0.9,<0.10"
"""The verl versions this plugin was written and tested against (tests ran on 0.9.1)."""


def _check_verl() -> str:
    try:
        version = metadata.version("verl")
    except metadata.PackageNotFoundError:
        raise ImportError("reinforce_ada.integrations.verl needs verl, which is not installed: "
                          f"pip install 'reinforce-ada[verl]'  (verl{SUPPORTED_VERL}); see docs/verl.md") from None
    from packaging.version import Version

    if not Version("0.9") <= Version(version) < Version("0.10"):
        raise ImportError(f"reinforce_ada.integrations.verl supports verl{SUPPORTED_VERL} but verl {version} is "
                          "installed")
    return version


VERL_VERSION = _check_verl()

from reinforce_ada.integrations.verl.advantage import compute_reinforce_ada_advantage  # noqa: E402 -- registers
from reinforce_ada.integrations.verl.est import compute_reinforce_ada_est_advantage  # noqa: E402 -- registers
from reinforce_ada.integrations.verl.config import (  # noqa: E402
    AGENT_LOOP_MANAGER_FQN,
    ESTIMATOR_NAME,
    check_verl_config,
    sampler_config_from_verl,
)
from reinforce_ada.integrations.verl.convert import (  # noqa: E402
    VerlCompletion,
    assemble_training_batch,
    completions_from_dataproto,
    groups_from_dataproto,
    prompts_from_dataproto,
)
from reinforce_ada.integrations.verl.rollout import (  # noqa: E402
    ReinforceAdaRollout,
    RolloutRewardVerifier,
    VerlRolloutGenerator,
)

__all__ = [
    "AGENT_LOOP_MANAGER_FQN",
    "ESTIMATOR_NAME",
    "ReinforceAdaRollout",
    "RolloutRewardVerifier",
    "VERL_VERSION",
    "VerlCompletion",
    "VerlRolloutGenerator",
    "assemble_training_batch",
    "check_verl_config",
    "completions_from_dataproto",
    "compute_reinforce_ada_advantage",
    "compute_reinforce_ada_est_advantage",
    "groups_from_dataproto",
    "prompts_from_dataproto",
    "sampler_config_from_verl",
]
