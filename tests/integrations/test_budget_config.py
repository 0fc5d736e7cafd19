"""Budget mode from TRL's ``AdaGRPOConfig`` and verl's ``algorithm.reinforce_ada`` block: the mapping onto
``SamplerConfig`` and the too-small-budget error, raised before any model loads."""

from __future__ import annotations

import pytest

from reinforce_ada.config import ConfigError


def test_trl_config_maps_budget_mode(tmp_path):
    pytest.importorskip("trl")
    from reinforce_ada.integrations.trl import AdaGRPOConfig

    common = dict(output_dir=str(tmp_path), use_cpu=True, report_to=[], per_device_train_batch_size=8,
                  num_generations=4, allocation="budget", exit_rule="mixed")
    config = AdaGRPOConfig(**common, sample_budget_per_step=12)
    sampler = config.sampler_config()
    assert sampler.is_budget and sampler.sample_budget_per_step == 12 and sampler.exit_rule == "mixed"
    assert sampler.budget_skip is False  # TRL needs a group per prompt
    assert sampler.step_budget(2) == 12
    # 8 rows per generation batch = 2 prompts x 4: the budget must be at least 8
    with pytest.raises(ConfigError, match=r"sample_budget_per_step=6 is below one group per prompt: at least .* = 8"):
        AdaGRPOConfig(**common, sample_budget_per_step=6)
    with pytest.raises(ConfigError, match="exit_rule"):
        AdaGRPOConfig(**{**common, "exit_rule": "positive"})


def test_verl_config_maps_budget_mode():
    from reinforce_ada.integrations.verl.config import sampler_config_from_verl

    def verl(block, train_batch_size=8):
        return {"algorithm": {"reinforce_ada": block}, "actor_rollout_ref": {"rollout": {"n": 4}},
                "data": {"train_batch_size": train_batch_size}}

    sampler = sampler_config_from_verl(verl({"allocation": "budget", "exit_rule": "mixed",
                                             "sample_budget_per_step": 40}))
    assert sampler.is_budget and sampler.sample_budget_per_step == 40 and sampler.budget_skip is False
    with pytest.raises(ConfigError, match=r"algorithm.reinforce_ada.sample_budget_per_step=31 is below one group per "
                                          r"prompt: at least rollout.n x data.train_batch_size = 4 x 8 = 32"):
        sampler_config_from_verl(verl({"allocation": "budget", "exit_rule": "mixed", "sample_budget_per_step": 31}))
    with pytest.raises(ConfigError, match="algorithm.reinforce_ada: sample_budget_per_step is a setting of budget"):
        sampler_config_from_verl(verl({"sample_budget_per_step": 40}))


def test_verl_rollout_keeps_the_memory_across_steps():
    pytest.importorskip("verl")
    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.integrations.verl.rollout import ReinforceAdaRollout

    class Rollout:
        def generate_sequences(self, prompts):  # never called here
            raise AssertionError

    config = SamplerConfig(allocation="budget", exit_rule="mixed", budget_skip=False)
    wrapper = ReinforceAdaRollout(Rollout(), config)
    assert wrapper.memory is not None
    assert ReinforceAdaRollout(Rollout(), SamplerConfig()).memory is None
