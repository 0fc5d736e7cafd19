"""The async HF adapter on the tiny model, the vLLM AsyncLLM adapter against a fake engine, and select-prompts."""

import asyncio
import json
from types import SimpleNamespace

import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.generation.async_hf import AsyncHFEngine
from reinforce_ada.sampling.sync_engine import AsyncGeneratorEngine
from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine
from reinforce_ada.sampling.memory import PassRateMemory, prompt_key
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model
from reinforce_ada.research.select_prompts import estimate_pass_rates, select_by_pass_rate, write_pass_rates
from reinforce_ada.research.simulate import SimulatedGenerator, simulated_verifier
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
from reinforce_ada.types import Completion, Prompt


def digit_verifier(prompts, completions):
    """Reward 1 when the completion starts with a digit (the untrained tiny model does so now and then)."""
    return [1.0 if c.text[:1].isdigit() else 0.0 for c in completions]


def test_streaming_sampler_on_the_tiny_hf_model():
    from reinforce_ada.generation.hf import HFGenerator

    generator = HFGenerator(build_tiny_model(), build_char_tokenizer(), max_new_tokens=4, seed=0)
    sampler = build_sampler(SamplerConfig(samples_per_round=4, max_rounds=2, group_size=2, mode="streaming",
                                          streaming={"max_in_flight": 16}), generator, digit_verifier)
    assert isinstance(sampler.engine, AsyncGeneratorEngine)
    prompts = [Prompt(i, f"{i}+{i}=") for i in range(4)]
    batch = sampler.sample(prompts)
    assert sorted(batch.pools) == [0, 1, 2, 3]
    for group in batch.groups:
        assert len(group.completions) == 2
        assert all(c.token_ids and c.logprobs is not None for c in group.completions)
    engine = sampler.engine
    assert engine.num_generated == batch.metrics["total_samples"] + engine.num_discarded
    assert engine.num_batches >= 1


def test_async_adapter_never_generates_requests_cancelled_while_queued():
    gen = SimulatedGenerator(0)
    engine = AsyncHFEngine(gen, max_batch_size=2, use_thread=False)

    async def main():
        prompt = Prompt(0, "", metadata={"pass_rate": 0.5})
        tasks = [asyncio.ensure_future(engine.complete(prompt, f"r{i}")) for i in range(6)]
        await asyncio.sleep(0)
        for t in tasks[2:]:
            t.cancel()  # the worker takes two per batch: the rest are still queued
        done = await asyncio.gather(*tasks, return_exceptions=True)
        return done

    results = asyncio.run(main())
    assert sum(isinstance(r, Completion) for r in results) == 2
    assert gen.num_generated == 2 and engine.num_skipped == 4


class FakeAsyncLLM:
    """Mimics vllm's AsyncLLM: ``generate`` yields a final RequestOutput after some steps; ``abort`` records."""

    def __init__(self, steps=5):
        self.steps = steps
        self.aborted = []
        self.params = []

    async def generate(self, inputs, params, request_id):
        self.params.append(params)
        for _ in range(self.steps):
            await asyncio.sleep(0)
        token_ids = [5, 6, 1]
        out = SimpleNamespace(text="ab", token_ids=token_ids, finish_reason="stop",
                              logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in token_ids])
        yield SimpleNamespace(outputs=[out], finished=True, prompt_token_ids=inputs["prompt_token_ids"])

    async def abort(self, request_id):
        self.aborted.append(request_id)


def test_vllm_async_engine_converts_and_aborts_on_cancel():
    fake = FakeAsyncLLM()
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), max_tokens=3, sampling_params_cls=dict)

    async def main():
        done = await engine.complete(Prompt(0, "1+1="), "keep")
        slow = asyncio.ensure_future(engine.complete(Prompt(1, "2+2="), "cancel-me"))
        await asyncio.sleep(0)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return done

    completion = asyncio.run(main())
    assert completion.text == "ab" and completion.token_ids == (5, 6, 1) and completion.logprobs == [-0.5] * 3
    assert fake.aborted == ["cancel-me"] and engine.num_aborted == 1
    assert fake.params[0]["n"] == 1 and fake.params[0]["max_tokens"] == 3


def test_vllm_async_engine_in_the_streaming_sampler():
    fake = FakeAsyncLLM(steps=3)
    engine = VLLMAsyncEngine(fake, build_char_tokenizer(), sampling_params_cls=dict)
    batch = StreamingSampler(engine, lambda ps, cs: [1.0 if c.prompt_id % 2 else 0.0 for c in cs],
                             SamplerConfig(), StreamingOptions(max_in_flight=8)).sample(
        [Prompt(i, f"{i}=") for i in range(3)])
    assert all(p.num_drawn == 32 for p in batch.pools.values())  # all-equal rewards never exit
    assert engine.num_completed == 96


def test_select_prompts_estimates_and_seeds_memory(tmp_path):
    rates = [0.0, 0.5, 1.0, 0.3]
    prompts = [Prompt(i, f"q{i}", metadata={"pass_rate": r}) for i, r in enumerate(rates)]
    estimates = estimate_pass_rates(prompts, SimulatedGenerator(0), simulated_verifier, k=16, prompts_per_call=3)
    assert [e.num_samples for e in estimates] == [16] * 4
    assert estimates[0].pass_rate == 0.0 and estimates[2].pass_rate == 1.0
    assert all(e.pass_rate == e.num_positive / 16 for e in estimates)
    kept = select_by_pass_rate(estimates, 1 / 16, 15 / 16)
    assert {e.prompt_id for e in kept} == {1, 3}
    path = tmp_path / "rates.jsonl"
    write_pass_rates(path, estimates)
    memory = PassRateMemory(empirical_prior=False)
    assert memory.seed_from_file(path) == 4
    assert memory.evidence(Prompt("any", "q0")) == (0.0, 16.0)
    assert json.loads(path.read_text().splitlines()[1])["key"] == prompt_key(prompts[1])
    with pytest.raises(ValueError, match="min"):
        select_by_pass_rate(estimates, 0.9, 0.1)
    with pytest.raises(ValueError, match="k must be positive"):
        estimate_pass_rates(prompts, SimulatedGenerator(0), simulated_verifier, k=0)


def test_select_prompts_cli_on_the_tiny_model(tmp_path):
    from reinforce_ada.cli import build_parser

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n"
                            for i in range(3)))
    parser = build_parser()
    out, rates = tmp_path / "kept.jsonl", tmp_path / "rates.jsonl"
    args = parser.parse_args(["select-prompts", "--data", str(data), "--tiny", "--verifier", "exact", "-k", "4",
                              "--min", "0", "--max", "1", "--max-new-tokens", "3", "--out", str(out),
                              "--pass-rates", str(rates)])
    assert args.func(args) == 0
    assert len(out.read_text().splitlines()) == 3  # [0, 1] keeps everything
    rows = [json.loads(line) for line in rates.read_text().splitlines()]
    assert [r["num_samples"] for r in rows] == [4, 4, 4]


@pytest.mark.fault("select-prompts whose range keeps no prompt (every pass rate outside --min/--max)",
                   "a warning line naming the range, how many fell below and above, and the empty file (it wrote an "
                   "empty file and said only 'kept 0 of 3')")
def test_select_prompts_that_keeps_nothing_says_why(tmp_path, caplog):
    from reinforce_ada.cli import build_parser

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": f"{i}+1=", "answer": "never"}) + "\n" for i in range(3)))
    out = tmp_path / "kept.jsonl"
    args = build_parser().parse_args(["select-prompts", "--data", str(data), "--tiny", "--verifier", "exact", "-k",
                                      "2", "--min", "0.5", "--max", "1", "--max-new-tokens", "3", "--out", str(out)])
    with caplog.at_level("WARNING", logger="reinforce_ada.research.select_prompts"):
        assert args.func(args) == 0
    assert out.read_text() == ""
    assert caplog.messages == [f"kept 0 of 3 prompts: none has a pass rate in [0.5, 1] (3 below --min, 0 above --max, "
                               f"2 samples each); {out} is empty -- widen --min/--max, or raise -k"]
