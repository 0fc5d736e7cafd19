"""Every YAML config in examples/ loads into a valid TrainConfig (with the data file its header asks for)."""

from pathlib import Path

import pytest

from reinforce_ada.config import TrainConfig, load_config

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_config_loads(path):
    config = load_config(TrainConfig, str(path), {"data": "prompts.jsonl"})
    assert config.max_steps > 0


def test_the_est_example_is_algorithm_1_at_grpo_n8s_budget():
    config = load_config(TrainConfig, str(EXAMPLES[0].parent / "est_qwen_math_1.5b.yaml"), {"data": "p.jsonl"})
    sampler = config.sampler
    assert (config.strategy, sampler.mode, sampler.selection, sampler.objective_in_use) == ("ada-est", "est", "all",
                                                                                            "log")
    assert sampler.sample_share_in_use == 0.5 and sampler.est.step_budget(config.batch_size) == 8 * 512
