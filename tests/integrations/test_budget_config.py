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
    pytest.importorskip("verl")  # the plugin package imports verl (CI runs this file again in its verl pass)
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


def test_trl_trains_in_budget_mode_and_saves_the_memory(tmp_path):
    pytest.importorskip("trl")
    import json

    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    def reward(prompts, completions, **kwargs):
        return [float(ord(c[0]) % 2) if c else 0.0 for c in completions]

    dataset = Dataset.from_dict({"prompt": [f"{i}+{i}=" for i in range(1, 9)], "answer": [str(2 * i) for i in range(1, 9)]})
    # 8 rows per generation batch = 4 prompts x n=2; budget 12 = GRPO's 8 + 4 allocated by value
    args = AdaGRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, report_to=[], bf16=False, save_strategy="steps",
                         save_steps=2, per_device_train_batch_size=8, num_generations=2, samples_per_round=2,
                         max_rounds=3, exit_rule="mixed", allocation="budget", sample_budget_per_step=12,
                         max_completion_length=4, max_steps=2, logging_steps=1, learning_rate=1e-2, seed=0)
    trainer = AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=reward, args=args, train_dataset=dataset,
                             processing_class=build_char_tokenizer())
    trainer.train()
    batch = trainer.ada_last_batch
    assert batch.metrics["budget"] == 12 and batch.metrics["total_samples"] <= 12
    assert batch.metrics["num_skipped"] == 0 and all(len(g.completions) == 2 for g in batch.groups)
    saved = json.loads((tmp_path / "run" / "checkpoint-2" / "ada_sampler_state_0.json").read_text())
    assert saved["sampler"]["memory"]["entries"], "TRL's checkpoint carries the pass-rate memory"


def test_trl_and_verl_refuse_whole_pool_selection(tmp_path):
    """``selection="all"`` gives groups of varying size; both backends train on exactly n rows per prompt."""
    pytest.importorskip("trl")
    pytest.importorskip("verl")
    from reinforce_ada.integrations.trl import AdaGRPOConfig
    from reinforce_ada.integrations.verl.config import sampler_config_from_verl

    with pytest.raises(ConfigError, match="selection='all' keeps whole pools .* exactly num_generations"):
        AdaGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], per_device_train_batch_size=8,
                      num_generations=4, selection="all")
    with pytest.raises(ConfigError, match=r"algorithm.reinforce_ada.selection='all' keeps whole pools .* rollout.n"):
        sampler_config_from_verl({"algorithm": {"reinforce_ada": {"selection": "all"}},
                                  "actor_rollout_ref": {"rollout": {"n": 4}}})
