"""The streaming sampler on an engine bound to one event loop (as vLLM's AsyncLLM is): the engine's own loop lives
across sample() calls; a dead engine is a FatalGenerationError, never retried, and stops the trainer (exit 3). Fakes
only (every CI pass); tests/engine/test_vllm_async.py runs the real AsyncLLM."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.generation.vllm_async import EngineLoop, VLLMAsyncEngine, is_engine_dead
from reinforce_ada.models.tiny import build_char_tokenizer
from reinforce_ada.sampling.protocols import FatalGenerationError, is_transient
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
from reinforce_ada.types import Prompt


class EngineDeadError(RuntimeError):
    """Named as vLLM's (vllm.v1.engine.exceptions.EngineDeadError, a RuntimeError subclass there too)."""


class LoopBoundAsyncLLM:
    """Like AsyncLLM: bound to the event loop of its first request; from another loop every request dies."""

    def __init__(self, steps=3):
        self.steps = steps
        self.bound = None
        self.calls = 0
        self.aborted = []
        self.dead = False

    @property
    def errored(self):
        return self.dead

    async def generate(self, inputs, params, request_id):
        self.calls += 1
        loop = asyncio.get_running_loop()
        if self.dead:
            raise EngineDeadError("EngineCore encountered an issue")
        if self.bound is None:
            self.bound = loop
        elif self.bound is not loop:
            raise EngineDeadError("the output handler is bound to another event loop")
        for _ in range(self.steps):
            await asyncio.sleep(0)
        token_ids = [5, 6, 1]
        out = SimpleNamespace(text="ab", token_ids=token_ids, finish_reason="stop",
                              logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in token_ids])
        yield SimpleNamespace(outputs=[out], finished=True)

    async def abort(self, request_id):
        self.aborted.append(request_id)

    def shutdown(self):
        self.shut = True


def prompts(num=4):
    return [Prompt(i, f"{i}+1=", str(i + 1)) for i in range(num)]


def half_right(ps, cs):
    return [1.0 if c.prompt_id % 2 else 0.0 for c in cs]


def test_the_sampler_survives_sample_calls_on_an_engine_bound_to_its_loop():
    fake = LoopBoundAsyncLLM()
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    sampler = StreamingSampler(engine, half_right, SamplerConfig(samples_per_round=2, max_rounds=2, group_size=2),
                               StreamingOptions(max_in_flight=8))
    try:
        for _ in range(3):
            batch = sampler.sample(prompts())
            assert batch.metrics["total_samples"] > 0 and batch.generation_error is None
        assert fake.bound is engine.loop.loop  # every step ran in the engine's one loop
    finally:
        engine.close()
    assert engine.loop.closed and fake.shut


def test_the_synchronous_generate_runs_on_the_engines_loop_too():
    from reinforce_ada.sampling.protocols import GenerationRequest

    fake = LoopBoundAsyncLLM()
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    try:
        out = engine.generate([GenerationRequest(p, 3) for p in prompts(2)])
        out2 = engine.generate([GenerationRequest(p, 1) for p in prompts(2)])
    finally:
        engine.close()
    assert [len(o) for o in out] == [3, 3] and [len(o) for o in out2] == [1, 1]
    assert out[0][0].token_ids == (5, 6, 1) and out[0][0].logprobs == [-0.5] * 3


def test_the_loop_refuses_work_after_close():
    loop = EngineLoop()
    assert loop.run(asyncio.sleep(0, result=7)) == 7
    loop.close()
    loop.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        loop.run(asyncio.sleep(0))


def test_a_dead_engine_is_fatal_and_stops_the_step_at_once_without_retries():
    fake = LoopBoundAsyncLLM()
    fake.dead = True
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    sampler = StreamingSampler(engine, half_right, SamplerConfig(samples_per_round=2, max_rounds=2, group_size=2,
                                                                 generation_retries=3),
                               StreamingOptions(max_in_flight=1))
    try:
        with pytest.raises(FatalGenerationError, match="the vLLM engine is dead"):
            sampler.sample(prompts())
    finally:
        engine.close()
    assert fake.calls == 1  # one request, no retry, nothing else submitted
    assert not is_transient(FatalGenerationError("x"))
    assert is_engine_dead(EngineDeadError("x")) and not is_engine_dead(RuntimeError("x"))
    assert is_engine_dead(RuntimeError("x"), SimpleNamespace(errored=True))


def test_a_fatal_generation_error_stops_the_trainer_with_exit_3_and_a_stopped_event(tmp_path, monkeypatch, capsys):
    """The trainer maps FatalGenerationError to a RunStopped (GenerationStopped): the CLI exits 3, one line."""
    from reinforce_ada import cli
    from reinforce_ada.generation.hf import HFGenerator

    def dead(self, requests):
        raise FatalGenerationError("the vLLM engine is dead (EngineDeadError: boom); it cannot serve another request")

    monkeypatch.setattr(HFGenerator, "generate", dead)
    run = tmp_path / "run"
    code = cli.main(["train", "--max-steps", "2", "--output-dir", str(run), "--eval-prompts", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3, err
    assert err[-1].startswith("error: step 1: the generator failed for good and was not retried: the vLLM engine is")
    events = [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped" and "EngineDeadError" in events[-1]["reason"]
