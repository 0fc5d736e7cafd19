"""``python -m reinforce_ada.integrations.verl.main_ppo``: verl's PPO trainer with Reinforce-Ada plugged in.

This is verl's ``main_ppo`` (hydra config, Ray cluster, legacy ``RayPPOTrainer`` for the round-based sampler) with
three differences, all configuration rather than copied trainer code:

* the config is ``conf/reinforce_ada_trainer.yaml``: verl's ``ppo_trainer`` plus
  ``algorithm.adv_estimator=reinforce_ada``, the ``algorithm.reinforce_ada`` sampler block, our agent-loop manager
  and ``trainer.use_v1=false``;
* the settings are checked (:func:`~reinforce_ada.integrations.verl.config.check_verl_config`) before Ray starts;
  a setting, file or checkpoint they refuse is one line on stderr and exit status 2, as in ``reinforce-ada`` itself
  (not hydra's traceback);
* the task runner is verl's, subclassed only to import the plugin (registering the estimator) and re-check the
  config inside its own Ray process.

Any verl override works as usual, e.g.
``python -m reinforce_ada.integrations.verl.main_ppo data.train_files=... actor_rollout_ref.model.path=...``.

Reinforce-Ada-Est runs on verl's v1 trainer: ``--config-name reinforce_ada_est_trainer`` (``trainer.use_v1=true``,
``algorithm.adv_estimator=reinforce_ada_est``, the Est agent-loop manager and checkpoint callback); the config is
checked the same way and verl's ``TaskRunnerV1`` runs it (:class:`ReinforceAdaEstTaskRunner`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import hydra
import ray

from reinforce_ada.errors import UserError
from reinforce_ada.integrations.verl.config import CONFIG_DIR, CONFIG_NAME, check_verl_config

logger = logging.getLogger(__name__)


def _plain_class(actor_class: Any) -> type:
    """The class a ``@ray.remote`` decorator wrapped (so it can be subclassed)."""
    modified = getattr(getattr(actor_class, "__ray_metadata__", None), "modified_class", None)
    plain = getattr(modified, "__ray_actor_class__", modified)
    if not isinstance(plain, type):
        raise RuntimeError(f"cannot find the class behind Ray actor {actor_class!r}; this Ray version is unsupported")
    return plain


def _verl_task_runner() -> type:
    from verl.trainer.main_ppo_v0 import TaskRunner

    return _plain_class(TaskRunner)


class ReinforceAdaTaskRunner(_verl_task_runner()):  # type: ignore[misc]
    """verl's (v0) ``TaskRunner``; ``run`` first registers the plugin in this Ray process and re-checks the config."""

    def run(self, config: Any) -> Any:
        import reinforce_ada.integrations.verl  # noqa: F401 -- registers the ``reinforce_ada`` estimator here

        check_verl_config(config)
        return super().run(config)


def _verl_task_runner_v1() -> type:
    from verl.trainer.main_ppo import TaskRunnerV1

    return _plain_class(TaskRunnerV1)


class ReinforceAdaEstTaskRunner(_verl_task_runner_v1()):  # type: ignore[misc]
    """verl's ``TaskRunnerV1``; ``run`` first registers the plugin in this Ray process and re-checks the config."""

    def run(self, config: Any) -> Any:
        import reinforce_ada.integrations.verl  # noqa: F401 -- registers the ``reinforce_ada_est`` estimator here

        check_verl_config(config)
        return super().run(config)


def run(config: Any) -> None:
    """Check the config, then run verl's PPO with :class:`ReinforceAdaTaskRunner` (legacy trainer, Seq) or
    :class:`ReinforceAdaEstTaskRunner` (v1 trainer, Est) (verl's ``main`` steps)."""
    launch(config, check(config))


def check(config: Any) -> Any:
    """Everything checked before Ray starts: the plugin's settings and files (:func:`check_verl_config`), then verl's
    own ``validate_config``; the sampler's config."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    sampler_config = check_verl_config(config)
    logger.info("reinforce_ada sampler: %s", sampler_config.to_dict())
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    return sampler_config


def launch(config: Any, sampler_config: Any) -> None:
    """verl's ``run_ppo`` (Ray) with the task runner for the sampler's mode."""
    from verl.trainer.main_ppo import run_ppo

    runner = ReinforceAdaEstTaskRunner if sampler_config.mode == "est" else ReinforceAdaTaskRunner
    run_ppo(config, task_runner_class=ray.remote(runner))


@hydra.main(config_path=str(CONFIG_DIR), config_name=CONFIG_NAME, version_base=None)
def main(config: Any) -> None:
    try:
        sampler_config = check(config)
    except UserError as err:  # ours, before Ray: one line (what Ray's workers raise later keeps its traceback)
        print(f"reinforce-ada verl: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    launch(config, sampler_config)


if __name__ == "__main__":
    main()
