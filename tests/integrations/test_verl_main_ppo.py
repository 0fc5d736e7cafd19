"""The verl plugin's configuration and ``main_ppo`` entry point, on CPU (nothing here starts Ray or loads a model).

What is *not* run here: a real training step, which needs GPUs, vLLM/SGLang and a model
(``examples/verl/gpu_check.sh`` does that on a GPU machine).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from omegaconf import OmegaConf  # noqa: E402

from reinforce_ada.config import ConfigError  # noqa: E402
from reinforce_ada.integrations.verl.config import (  # noqa: E402
    AGENT_LOOP_MANAGER_FQN,
    check_verl_config,
    compose_trainer_config,
    sampler_config_from_verl,
)

# Enough for verl's own validate_config on a 1-GPU layout.
RUNNABLE = [
    "actor_rollout_ref.model.path=/models/none",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "data.train_batch_size=8",
    "trainer.n_gpus_per_node=1",
]


@pytest.fixture(scope="module")
def trainer_config():
    return compose_trainer_config(RUNNABLE)


def test_composed_config_is_verls_ppo_trainer_plus_the_plugin(trainer_config):
    cfg = trainer_config
    assert cfg.algorithm.adv_estimator == "reinforce_ada"
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class == AGENT_LOOP_MANAGER_FQN
    assert cfg.trainer.use_v1 is False
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == "reinforce_ada.integrations.verl"
    # verl's own defaults are all there (the actor's clip range, the rollout engine, ...).
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == 0.2 and cfg.actor_rollout_ref.rollout.mode == "async"
    sampler = check_verl_config(cfg)
    assert (sampler.samples_per_round, sampler.max_rounds, sampler.group_size) == (8, 4, 4)  # the paper's M, N, n


def test_overrides_reach_the_sampler_and_group_size_is_rollout_n():
    cfg = compose_trainer_config(RUNNABLE + ["algorithm.reinforce_ada.max_rounds=2", "actor_rollout_ref.rollout.n=8",
                                             "algorithm.reinforce_ada.exit_rule=positive"])
    sampler = sampler_config_from_verl(cfg)
    assert (sampler.max_rounds, sampler.group_size, sampler.exit_rule) == (2, 8, "positive")


def test_the_plugin_config_passes_verls_own_validation(trainer_config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=trainer_config, use_reference_policy=need_reference_policy(trainer_config),
                    use_critic=need_critic(trainer_config))
    assert need_critic(trainer_config) is False  # no value model: an outcome-reward estimator


@pytest.mark.parametrize("key, value, message", [
    ("algorithm.adv_estimator", "grpo", "adv_estimator"),
    ("trainer.use_v1", True, "use_v1"),
    ("actor_rollout_ref.rollout.agent.agent_loop_manager_class", None, "agent_loop_manager_class"),
    ("algorithm.use_kl_in_reward", True, "use_kl_in_reward"),
    ("algorithm.reinforce_ada.max_rounds", 0, "max_rounds"),
    ("algorithm.reinforce_ada.exit_rule", "sometimes", "exit_rule"),
    ("actor_rollout_ref.rollout.n", 64, "group_size=64 exceeds"),
    ("trainer.resume_mode", "bogus", "trainer.resume_mode='bogus': verl knows auto, disable, resume_path"),
])
def test_bad_settings_are_rejected_with_the_key_named(trainer_config, key, value, message):
    cfg = OmegaConf.create(OmegaConf.to_container(trainer_config))
    OmegaConf.update(cfg, key, value)
    with pytest.raises(ConfigError, match=message):
        check_verl_config(cfg)


def test_unknown_and_excluded_sampler_keys_are_rejected():
    cfg = {"algorithm": {"reinforce_ada": {"group_sise": 4}}, "actor_rollout_ref": {"rollout": {"n": 4}}}
    with pytest.raises(ConfigError, match="unknown key.*group_sise"):
        sampler_config_from_verl(cfg)
    # a SamplerConfig field the plugin does not take: refused with its reason, not as an unknown key
    cfg["algorithm"]["reinforce_ada"] = {"group_size": 4}
    with pytest.raises(ConfigError, match="reinforce_ada.group_size is not taken .*actor_rollout_ref.rollout.n"):
        sampler_config_from_verl(cfg)


def test_main_ppo_runs_verls_ppo_with_our_task_runner(trainer_config, monkeypatch):
    import ray
    import verl.trainer.main_ppo as verl_main_ppo
    from verl.trainer.main_ppo_v0 import TaskRunner as VerlTaskRunner

    from reinforce_ada.integrations.verl import main_ppo

    captured = {}
    monkeypatch.setattr(verl_main_ppo, "run_ppo", lambda config, task_runner_class: captured.update(
        config=config, runner=task_runner_class))
    main_ppo.main(trainer_config)  # hydra's decorator passes a given config straight through
    assert captured["config"] is trainer_config
    runner_class = captured["runner"].__ray_metadata__.modified_class.__ray_actor_class__
    assert runner_class is main_ppo.ReinforceAdaTaskRunner
    assert issubclass(runner_class, main_ppo._plain_class(VerlTaskRunner))
    assert not ray.is_initialized()


def test_task_runner_registers_the_plugin_and_rechecks_before_verls_run(trainer_config, monkeypatch):
    from reinforce_ada.integrations.verl import main_ppo

    calls = []
    base = main_ppo.ReinforceAdaTaskRunner.__mro__[1]
    monkeypatch.setattr(base, "run", lambda self, config: calls.append(config))
    runner = main_ppo.ReinforceAdaTaskRunner()
    runner.run(trainer_config)
    assert calls == [trainer_config]
    bad = OmegaConf.create(OmegaConf.to_container(trainer_config))
    bad.algorithm.adv_estimator = "gae"
    with pytest.raises(ConfigError):
        runner.run(bad)
    assert len(calls) == 1


def test_bad_config_fails_before_ray_starts(monkeypatch):
    from reinforce_ada.integrations.verl import main_ppo

    import verl.trainer.main_ppo as verl_main_ppo

    monkeypatch.setattr(verl_main_ppo, "run_ppo", lambda *a, **k: pytest.fail("run_ppo must not be reached"))
    cfg = compose_trainer_config(RUNNABLE + ["algorithm.adv_estimator=grpo"])
    with pytest.raises(ConfigError, match="adv_estimator"):
        main_ppo.run(cfg)
    with pytest.raises(ConfigError, match="trainer.resume_mode='bogus'"):
        main_ppo.run(compose_trainer_config(RUNNABLE + ["trainer.resume_mode=bogus"]))


@pytest.mark.slow
@pytest.mark.parametrize("config_name, override", [
    ("reinforce_ada_trainer", "trainer.resume_mode=bogus"),
    ("reinforce_ada_est_trainer", "+algorithm.reinforce_ada.memory.seed=/nonexistent/seed.jsonl"),
])
def test_the_entry_point_refuses_a_bad_setting_in_one_line_before_ray(config_name, override, tmp_path):
    # the command a user types: hydra composes the config, our checks refuse it -- one line, exit 2, no traceback
    # (above it, on a machine without a GPU, verl's own warnings from importing its engines)
    done = subprocess.run([sys.executable, "-m", "reinforce_ada.integrations.verl.main_ppo", "--config-name",
                           config_name, *RUNNABLE, override], capture_output=True, text=True, env=_env(), timeout=300,
                          cwd=tmp_path)  # hydra's outputs/ folder
    ours = [line for line in done.stderr.splitlines() if line.startswith("reinforce-ada verl: ")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(ours) == 1 and done.stderr.rstrip().endswith(ours[0]), done.stderr[-2000:]
    assert override.split("=")[0].lstrip("+") in ours[0], ours


# -- the examples --------------------------------------------------------------------------------------------------
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "verl")


def _env():
    root = os.path.abspath(os.path.join(EXAMPLES, "..", ".."))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_paper_recipe_script_composes_with_the_papers_settings():  # also runs `python -m ...main_ppo` (hydra)
    shown = subprocess.run(["bash", os.path.join(EXAMPLES, "run_reinforce_ada.sh"), "--cfg", "job"],
                           capture_output=True, text=True, env={**_env(), "MODEL_PATH": "/models/none"}, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    cfg = OmegaConf.create(shown.stdout)
    sampler = check_verl_config(cfg)
    assert (sampler.samples_per_round, sampler.max_rounds, sampler.group_size) == (8, 4, 4)
    assert (sampler.exit_rule, sampler.selection, sampler.normalize_std) == ("balanced", "balanced", False)
    assert cfg.data.train_batch_size == 512 and cfg.trainer.n_gpus_per_node == 8
    actor = cfg.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
    assert actor.optim.lr == 1e-6 and actor.use_kl_loss is False


@pytest.mark.slow
def test_gpu_check_dry_run_builds_a_valid_run(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, "gpu_check.py"), "--dry-run", "--workdir",
                           str(tmp_path)], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DRY RUN OK" in done.stderr
    assert (tmp_path / "model" / "model.safetensors").exists() and (tmp_path / "train.parquet").exists()


def test_gpu_check_reads_the_training_log():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(EXAMPLES, "gpu_check.py"))
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    metrics = ("total_samples:48", "rounds_used:2", "pool/score/mean:0.4", "kept/score/mean:0.5", "round_s/max:3.1",
               "perf/gen_throughput:900.0")
    good = "\n".join(f"step:{s} - " + " - ".join(f"timing_s/reinforce_ada/{m}" for m in metrics) for s in (1, 2))
    assert gpu_check.check_log(good) == []
    assert gpu_check.check_log(good.replace("kept/score", "kept/scores")) == [
        "timing_s/reinforce_ada/kept/score/mean was not logged"]
    problems = gpu_check.check_log("step:1 - actor/pg_loss:0.1")
    assert "no metrics line for step 2" in problems
    assert any("reinforce_ada/total_samples" in p for p in problems)


def test_verls_own_main_ppo_config_accepts_the_plugin_with_documented_overrides():
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[
            "algorithm.adv_estimator=reinforce_ada", "trainer.use_v1=false", "actor_rollout_ref.rollout.n=4",
            f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={AGENT_LOOP_MANAGER_FQN}",
            "+algorithm.reinforce_ada.max_rounds=2"])
    assert check_verl_config(cfg).max_rounds == 2
