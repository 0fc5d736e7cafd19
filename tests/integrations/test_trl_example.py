"""examples/trl_qwen_math.py: its defaults are the paper's setup, and its --smoke_test runs two CPU steps."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("math_verify")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_qwen_math.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_qwen_math", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_defaults_are_the_paper_setup(example, tmp_path):
    # --use_cpu only so that the bf16 default validates on a machine without a GPU.
    script_args, args = example.parse_args(["--output_dir", str(tmp_path), "--use_cpu", "true"])
    assert script_args.model_name_or_path == "Qwen/Qwen2.5-Math-1.5B"
    assert (args.num_generations, args.samples_per_round, args.max_rounds) == (4, 8, 4)
    assert (args.exit_rule, args.selection, args.advantage, args.scale_rewards) == ("balanced", "balanced", "pool",
                                                                                   "none")
    assert (args.epsilon, args.epsilon_high, args.delta, args.loss_type, args.beta) == (0.2, 0.28, 3.0, "dapo", 0.0)
    assert (args.use_vllm, args.vllm_mode) == (True, "server")
    # Each process holds whole groups of n = 4.
    assert args.per_device_train_batch_size * args.steps_per_generation % args.num_generations == 0


def test_command_line_overrides_a_sampling_field(example, tmp_path):
    _, args = example.parse_args(["--output_dir", str(tmp_path), "--use_cpu", "true", "--exit_rule", "positive",
                                  "--max_rounds", "2"])
    assert (args.exit_rule, args.max_rounds, args.samples_per_round) == ("positive", 2, 8)


def test_boxed_accuracy_reward(example):
    completions = ["so the answer is $\\boxed{\\frac{1}{2}}$", [{"role": "assistant", "content": "\\boxed{0.5}"}],
                   "\\boxed{3}"]
    assert example.boxed_accuracy(completions, ["$\\frac{1}{2}$"] * 3) == [1.0, 1.0, 0.0]


def test_smoke_test_trains_two_steps(example, tmp_path):
    trainer = example.main(["--smoke_test", "--output_dir", str(tmp_path)])
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "ada/samples_per_prompt" in h]
    assert len(logged) == 2
    assert all(2 <= h["ada/samples_per_prompt"] <= 2 * 2 for h in logged)


def test_est_defaults_and_smoke_test(example, tmp_path):
    _, args = example.parse_args(["--est", "--output_dir", str(tmp_path), "--use_cpu", "true"])
    assert (args.mode, args.num_generations, args.est_samples_per_prompt, args.scale_rewards) == ("est", 8, 8, "none")
    assert (args.loss_type, args.epsilon, args.epsilon_high, args.use_vllm) == ("dapo", 0.2, 0.28, True)
    trainer = example.main(["--est", "--smoke_test", "--output_dir", str(tmp_path)])
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "ada/est/alloc_mean" in h]
    assert [h["ada/est/alloc_mean"] for h in logged] == [8.0, 8.0]  # 16 rows over 2 prompts each step
