"""VLLMAsyncEngine without vLLM (every CI pass): the engine's one event loop for its life, a dead engine mapped to
FatalGenerationError (never retried), and the trainer stopping with a named cause on it. The real AsyncLLM is
tests/generation/test_vllm_async.py (vllm pass)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine, is_engine_dead
from reinforce_ada.generation.vllm.loop import EngineLoop
from reinforce_ada.models.tiny import build_char_tokenizer
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationRequest
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
from reinforce_ada.types import Prompt


class EngineDeadError(Exception):
    """Named like vLLM's (vllm.v1.engine.exceptions.EngineDeadError), which is a plain Exception: transient by the
    library's retry rule unless the backend maps it."""


class LoopBoundAsyncLLM:
    """Like vLLM's AsyncLLM: bound to the event loop it first serves in (its output handler is a task there); a
    request from any other loop finds the engine dead, and it stays dead."""

    def __init__(self, steps: int = 2, dead: bool = False):
        self.steps, self.loop, self.errored = steps, None, dead
        self.calls = 0
        self.aborted: list[str] = []

    async def generate(self, inputs, params, request_id):
        self.calls += 1
        loop = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = loop
        if loop is not self.loop:
            self.errored = True
        if self.errored:
            raise EngineDeadError("EngineCore encountered an issue. See stack trace (above) for the root cause.")
        for _ in range(self.steps):
            await asyncio.sleep(0)
        token_ids = [5 + self.calls % 2, 1]
        out = SimpleNamespace(text="ab", token_ids=token_ids, finish_reason="stop",
                              logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in token_ids])
        yield SimpleNamespace(outputs=[out], finished=True)

    async def abort(self, request_id):
        self.aborted.append(request_id)


def parity_verifier(prompts, completions):
    return [float(c.token_ids[0] % 2) for c in completions]


def streaming(engine, **options) -> StreamingSampler:
    return StreamingSampler(engine, parity_verifier, SamplerConfig(samples_per_round=4, max_rounds=2, group_size=4),
                            StreamingOptions(**{"max_in_flight": 8, **options}))


def test_the_engine_serves_every_sample_call_from_its_one_loop():
    fake = LoopBoundAsyncLLM()
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    sampler = streaming(engine)
    try:
        for step in range(3):  # one asyncio.run loop per call would kill the engine at the second
            batch = sampler.sample([Prompt(10 * step + i, f"{i}=") for i in range(3)])
            assert batch.metrics["total_samples"] > 0
        assert fake.loop is engine.loop.loop and not fake.errored
        groups = engine.generate([GenerationRequest(Prompt(99, "1="), 3)])  # evaluation: the same loop
        assert [len(g) for g in groups] == [3]
    finally:
        engine.close()
    assert engine.loop.closed
    with pytest.raises(RuntimeError, match="closed"):
        engine.loop.run(asyncio.sleep(0))


def test_a_dead_engine_is_fatal_and_never_retried():
    fake = LoopBoundAsyncLLM(dead=True)
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    try:
        with pytest.raises(FatalGenerationError, match="the vLLM engine is dead .*EngineDeadError"):
            streaming(engine, max_in_flight=1, max_attempts=3).sample([Prompt(0, "1=")])
        assert fake.calls == 1 and fake.aborted == []  # stopped at once; a dead engine is not asked to abort
    finally:
        engine.close()


def test_is_engine_dead_by_class_name_or_the_errored_flag():
    assert is_engine_dead(EngineDeadError("x"))
    assert not is_engine_dead(RuntimeError("x"))
    assert is_engine_dead(RuntimeError("x"), SimpleNamespace(errored=True))
    assert not is_engine_dead(RuntimeError("x"), SimpleNamespace(errored=False))


def test_the_loop_refuses_a_call_from_inside_itself():
    loop = EngineLoop()
    try:
        async def inner():
            with pytest.raises(RuntimeError, match="inside its own loop"):
                loop.run(asyncio.sleep(0))
            return "ok"

        assert loop.run(inner()) == "ok"
    finally:
        loop.close()


def test_generate_puts_every_sample_of_every_prompt_in_flight_at_once():
    class Counting(LoopBoundAsyncLLM):
        in_flight = peak = 0

        async def generate(self, inputs, params, request_id):
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                async for out in super().generate(inputs, params, request_id):
                    yield out
            finally:
                self.in_flight -= 1

    fake = Counting(steps=3)
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    try:
        groups = engine.generate([GenerationRequest(Prompt(i, f"{i}="), 2) for i in range(3)])
    finally:
        engine.close()
    assert [len(g) for g in groups] == [2, 2, 2] and fake.peak == 6  # not prompt by prompt
