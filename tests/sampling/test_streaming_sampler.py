import asyncio

import numpy as np
import pytest

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.core.exits import balanced
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.research.simulate import SimulatedGenerator, simulated_verifier
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.protocols import GenerationError
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler, StreamingScheduler
from reinforce_ada.types import Completion, Prompt

from streaming_fakes import SteppedTokenEngine, TokenEngine, text_verifier

ENGINES = pytest.mark.parametrize("engine_cls", [TokenEngine, SteppedTokenEngine],
                                  ids=["async", "stepped"])  # asyncio-driven, and stepped like the colocated vLLM

RATES = [0.0, 1.0, 0.5, 0.3, 0.7, 0.1, 0.9, 0.5, 0.05, 0.6]


def prompts(rates=RATES):
    return [Prompt(i, f"q{i}", metadata={"pass_rate": r}) for i, r in enumerate(rates)]


class LoggingScheduler(StreamingScheduler):
    """Writes ("exit", prompt_id) into the engine's token log the moment the scheduler decides an exit."""

    engine: TokenEngine

    def record(self, results):
        before = {pid for pid, s in self.states.items() if s.pool.exited or s.gave_up}
        out = super().record(results)
        for pid, s in self.states.items():
            if (s.pool.exited or s.gave_up) and pid not in before:
                self.engine.log.append(("exit", pid))
        return out


def run_with_log(options, engine_cls=TokenEngine):
    engine = engine_cls()
    sampler = StreamingSampler(engine, text_verifier, SamplerConfig(), options)
    sampler.scheduler_class = type("S", (LoggingScheduler,), {"engine": engine})
    return engine, sampler.sample(prompts())


@ENGINES
def test_cancellation_really_stops_work(engine_cls):
    # target 0.95 asks for many samples at once, so most prompts exit with requests still generating
    engine, batch = run_with_log(StreamingOptions(target=0.95), engine_cls)
    assert batch.metrics["num_cancelled"] > 5
    assert engine.tokens_after_exit() == {}
    # every request started was either finished or cancelled: nothing is left generating
    cancelled = sum(engine.started.values()) - sum(engine.finished.values())
    assert cancelled == batch.metrics["num_cancelled"]
    if engine_cls is SteppedTokenEngine:
        assert engine.cancelled == cancelled and not engine.running


@ENGINES
def test_without_cancellation_the_same_counter_sees_wasted_tokens(engine_cls):
    engine, batch = run_with_log(StreamingOptions(target=0.95, cancel_on_exit=False), engine_cls)
    assert batch.metrics["num_cancelled"] == 0
    assert sum(engine.tokens_after_exit().values()) > 0


@ENGINES
def test_give_up_also_cancels_in_flight_work(engine_cls):
    engine, batch = run_with_log(StreamingOptions(target=0.95, give_up_below=0.3, prior=(0.5, 4.0)), engine_cls)
    assert batch.metrics["num_gave_up"] >= 1
    assert engine.tokens_after_exit() == {}
    assert batch.pools[0].num_drawn < 32  # pass rate 0: given up before the whole budget


def check_batch_like_the_core(batch, cfg):
    pools = batch.pools
    assert sorted(pools) == list(range(len(RATES)))  # no prompt vanishes
    for group in batch.groups:
        pool = pools[group.prompt_id]
        assert len(group.completions) == cfg.group_size
        assert all(c.prompt_id == group.prompt_id for c in group.completions)
        assert pool.num_drawn <= cfg.max_samples
        assert pool.mean == pytest.approx(np.mean([c.reward for c in pool.completions]))
    start = 0
    for group in batch.groups:
        expected = np.array(group.rewards) - pools[group.prompt_id].mean  # whole-pool baseline
        np.testing.assert_allclose(batch.advantages[start:start + len(group.completions)], expected)
        start += len(group.completions)
    assert start == len(batch.advantages)


@ENGINES
@pytest.mark.parametrize("allocation", ["beta", "fixed"])
def test_batch_has_the_core_semantics(allocation, engine_cls):
    cfg = SamplerConfig()
    sampler = StreamingSampler(engine_cls(), text_verifier, cfg, StreamingOptions(allocation=allocation))
    batch = sampler.sample(prompts())
    check_batch_like_the_core(batch, cfg)
    pools = batch.pools
    # pass rate 0 and 1 can never meet the balanced rule: the whole budget, then a fallback group
    assert pools[0].num_drawn == pools[1].num_drawn == cfg.max_samples
    assert not pools[0].exited and not pools[1].exited
    for pool in pools.values():
        if pool.exited:
            assert balanced(pool.num_positive, pool.num_negative, cfg.group_size)
    assert batch.metrics["total_samples"] == sum(p.num_drawn for p in pools.values())


@ENGINES
def test_fixed_allocation_requests_m_at_a_time(engine_cls):
    engine = engine_cls()
    cfg = SamplerConfig(samples_per_round=3, max_rounds=4, group_size=4)
    batch = StreamingSampler(engine, text_verifier, cfg, StreamingOptions(allocation="fixed", fill_idle=False)).sample(prompts())
    assert engine.started[0] == 12  # four waves of three for the hopeless prompt
    assert {c.round for c in batch.pools[0].completions} == {1, 2, 3, 4}


def test_max_in_flight_bounds_the_engine():
    class Counting(TokenEngine):
        running = peak = 0

        async def complete(self, prompt, request_id):
            Counting.running += 1
            Counting.peak = max(Counting.peak, Counting.running)
            try:
                return await super().complete(prompt, request_id)
            finally:
                Counting.running -= 1

    StreamingSampler(Counting(), text_verifier, SamplerConfig(), StreamingOptions(max_in_flight=5)).sample(prompts())
    assert Counting.peak == 5


def test_max_in_flight_bounds_a_stepped_engine():
    class Counting(SteppedTokenEngine):
        peak = 0

        def step(self):
            Counting.peak = max(Counting.peak, len(self.running))
            return super().step()

    StreamingSampler(Counting(), text_verifier, SamplerConfig(), StreamingOptions(max_in_flight=5)).sample(prompts())
    assert Counting.peak == 5


def test_a_stepped_engine_that_fails_stops_the_step_and_cancels_what_it_was_generating():
    class Failing(SteppedTokenEngine):
        def step(self):
            if self.num_steps == 4:
                raise RuntimeError("engine step failed")
            return super().step()

    engine = Failing()
    with pytest.raises(RuntimeError, match="engine step failed"):
        StreamingSampler(engine, text_verifier, SamplerConfig()).sample(prompts())
    assert not engine.running and engine.cancelled > 0  # nothing left generating in the engine


def test_memory_skips_hopeless_prompts_and_stays_out_of_the_pools():
    memory = PassRateMemory(empirical_prior=False)
    hopeless = Prompt(0, "q0", metadata={"pass_rate": 0.0})
    memory.seed(hopeless, 0.0, 32)
    sure = Prompt(1, "q1", metadata={"pass_rate": 0.5})
    memory.seed(sure, 1.0, 32)  # memory says always right; this step it is a coin flip
    config = SamplerConfig(mode="streaming", streaming={"skip_below": 0.6},  # P(any positive in 32 | Beta(1, 33))
                           memory={"enabled": True})  # = 1 - 33/65
    sampler = build_sampler(config, TokenEngine(), text_verifier, memory=memory)
    batch = sampler.sample([hopeless, sure] + prompts()[2:])
    assert batch.metrics["num_skipped"] == 2 and batch.metrics["num_empty"] == 0
    assert batch.pools[0].num_drawn == 0 and batch.pools[1].num_drawn == 0
    assert sorted(batch.pools) == list(range(len(RATES)))
    for group in batch.groups:  # the pool mean is this step's completions only
        pool = batch.pools[group.prompt_id]
        assert pool.mean == pytest.approx(np.mean([c.reward for c in pool.completions]))
    assert memory.step == 1 and memory.evidence(Prompt(9, "q2"))[0] + memory.evidence(Prompt(9, "q2"))[1] > 0
    # evidence decays: after enough steps the hopeless prompt is tried again
    memory.advance(40)
    batch = sampler.sample([hopeless])
    assert batch.metrics["num_skipped"] == 0 and batch.pools[0].num_drawn > 0


def test_memory_sizes_the_first_request():
    memory = PassRateMemory(empirical_prior=False)
    easy = Prompt(0, "e", metadata={"pass_rate": 0.5})
    memory.seed(easy, 0.5, 32)
    options = StreamingOptions(target=0.5, max_in_flight=1000, fill_idle=False)
    scheduler = StreamingScheduler([easy], SamplerConfig(), options, memory)
    first = len(scheduler.want())
    uniform = len(StreamingScheduler([easy], SamplerConfig(), options).want())
    assert first < uniform  # a known 50% prompt needs fewer samples for a balanced group than an unknown one


def test_state_dict_includes_memory():
    memory = PassRateMemory()
    sampler = build_sampler(SamplerConfig(mode="streaming"), TokenEngine(), text_verifier, memory=memory)
    sampler.sample(prompts())
    state = sampler.state_dict()
    fresh = PassRateMemory()
    clone = build_sampler(SamplerConfig(mode="streaming"), TokenEngine(), text_verifier, memory=fresh)
    clone.load_state_dict(state)
    assert fresh.state_dict() == memory.state_dict()


def test_engine_failures_are_retried_then_end_the_step_with_the_work_done():
    class Flaky(TokenEngine):
        def __init__(self, fail_ids):
            super().__init__()
            self.fail_ids = fail_ids
            self.failures = 0

        async def complete(self, prompt, request_id):
            if prompt.prompt_id in self.fail_ids:
                self.failures += 1
                raise ConnectionError("boom")
            return await super().complete(prompt, request_id)

    engine = Flaky({3})
    batch = StreamingSampler(engine, text_verifier, SamplerConfig(generation_retries=2)).sample(prompts())
    assert batch.generation_error is not None and "3 times" in batch.generation_error
    assert engine.failures >= 3  # every in-flight sample of prompt 3 is retried until one has failed 3 times
    assert batch.pools[3].num_drawn == 0
    assert sorted(batch.pools) == list(range(len(RATES)))
    with pytest.raises(GenerationError):
        StreamingSampler(Flaky(set(range(10))), text_verifier, SamplerConfig()).sample(prompts())


def test_build_sampler_kinds():
    from reinforce_ada.config import DynamicSamplingConfig
    from reinforce_ada.sampling.sampler import DynamicSampler

    gen = SimulatedGenerator(0)
    assert type(build_sampler(SamplerConfig(), gen, simulated_verifier)) is AdaptiveSampler
    assert type(build_sampler(DynamicSamplingConfig(batch_size=4), gen, simulated_verifier)) is DynamicSampler
    streaming = build_sampler(SamplerConfig(mode="streaming", streaming={"target": 0.7}), gen, simulated_verifier)
    assert isinstance(streaming, StreamingSampler) and streaming.options.target == 0.7
    batch = streaming.sample(prompts())
    assert len(batch.pools) == len(RATES)
    # a synchronous batch cannot be interrupted: what was cancelled after generation is generated but not drawn
    assert batch.metrics["total_samples"] <= gen.num_generated
    assert gen.num_generated <= batch.metrics["total_samples"] + batch.metrics["num_cancelled"]
    budget = build_sampler(SamplerConfig(allocation="budget", exit_rule="mixed", memory={"max_evidence": 64.0}), gen,
                           simulated_verifier)  # budget mode keeps a memory decayed per visit, not per step
    assert type(budget) is AdaptiveSampler and (budget.memory.half_life, budget.memory.max_evidence) == (None, 64.0)
    with pytest.raises(ConfigError, match="memory.seed, streaming.skip_below and streaming.cap_below need"):
        SamplerConfig(memory={"seed": "rates.jsonl"})  # outside budget mode the seed needs memory.enabled
    with pytest.raises(ConfigError, match="mode='nope' is not one of"):
        SamplerConfig(mode="nope")
    with pytest.raises(ValueError, match=r"streaming options \['fill_idle'\] need mode='streaming'"):
        build_sampler(SamplerConfig(), gen, simulated_verifier, fill_idle=True)
    with pytest.raises(ValueError, match=r"\['target'\] are settings of config.streaming"):
        build_sampler(SamplerConfig(mode="streaming"), gen, simulated_verifier, target=0.5)
    with pytest.raises(ValueError, match="keeps a memory only in budget mode"):
        build_sampler(SamplerConfig(), gen, simulated_verifier, memory=PassRateMemory())
    with pytest.raises(ConfigError, match=r"streaming.target must be in \(0, 1\]"):
        SamplerConfig(mode="streaming", streaming={"target": 1.5})
    with pytest.raises(ConfigError, match="threshold exit rule"):
        build_sampler(SamplerConfig(mode="streaming", exit_rule=lambda p, n, g: p > 0), gen, simulated_verifier)
    with pytest.raises(TypeError, match="generate"):
        build_sampler(SamplerConfig(mode="streaming"), object(), simulated_verifier)
    stepped = SteppedTokenEngine()  # an engine the sampler steps itself (the colocated vLLM engine) is not wrapped
    assert build_sampler(SamplerConfig(mode="streaming"), stepped, text_verifier).engine is stepped


def test_sample_inside_a_running_loop_points_to_sample_async():
    sampler = StreamingSampler(TokenEngine(), text_verifier)

    async def main():
        with pytest.raises(RuntimeError, match="sample_async"):
            sampler.sample(prompts())
        return await sampler.sample_async(prompts())

    assert len(asyncio.run(main()).pools) == len(RATES)


def test_verifier_failures_follow_the_config():
    def flaky_verifier(ps, cs):
        return [None if c.text.endswith("-0") else (1.0 if c.text[0] == "1" else 0.0) for c in cs]

    cfg = SamplerConfig(on_verifier_failure="drop")
    batch = StreamingSampler(TokenEngine(), flaky_verifier, cfg, StreamingOptions(allocation="fixed")).sample(prompts())
    for pool in batch.pools.values():  # sample 0 of a prompt fails (unless cancelled because the prompt exited)
        assert pool.num_verifier_failures <= 1
        assert pool.count == pool.num_drawn - pool.num_verifier_failures
    assert sum(p.num_verifier_failures for p in batch.pools.values()) >= 5


def test_build_sampler_with_a_seeded_memory_and_json_checkpoint(tmp_path):
    import json

    path = tmp_path / "rates.jsonl"
    from reinforce_ada.sampling.memory import prompt_key

    path.write_text(json.dumps({"key": prompt_key(prompts()[0]), "pass_rate": 0.0, "num_samples": 16}) + "\n")
    config = SamplerConfig(mode="streaming", streaming={"target": 0.4}, memory={"enabled": True, "seed": str(path)})
    sampler = build_sampler(config, SimulatedGenerator(0), simulated_verifier)
    assert sampler.options.target == 0.4 and sampler.options.fill_idle is False  # synchronous generator
    assert sampler.memory.evidence(prompts()[0]) == (0.0, 16.0)
    sampler.sample(prompts())
    state = json.loads(json.dumps(sampler.state_dict()))  # what the trainer writes
    clone = build_sampler(SamplerConfig(mode="streaming", memory={"enabled": True}), SimulatedGenerator(0),
                          simulated_verifier)
    clone.load_state_dict(state)
    assert clone.memory.state_dict() == sampler.memory.state_dict()
    with pytest.raises(ConfigError, match="need memory.enabled=True"):
        SamplerConfig(mode="streaming", streaming={"skip_below": 0.1})


def test_min_signal_rate_gives_up_a_one_class_pool_at_its_price():
    # uniform prior: after m negatives the chance the next is positive is 1 / (m + 2); below 0.1 from m = 9 on
    cfg = SamplerConfig(samples_per_round=1, max_rounds=32, exit_rule="mixed")
    options = StreamingOptions(allocation="fixed", min_signal_rate=0.1, fill_idle=False)
    batch = StreamingSampler(TokenEngine(), text_verifier, cfg, options).sample(prompts([0.0, 1.0, 0.5]))
    assert batch.pools[0].num_drawn == 9 and batch.pools[1].num_drawn == 9
    assert batch.metrics["num_gave_up"] == 2
    assert batch.pools[2].exited  # a coin-flip prompt finds both classes long before


def test_min_signal_rate_caps_beta_requests_and_cancels_in_flight_work():
    engine, batch = run_with_log(StreamingOptions(target=0.95, min_signal_rate=0.1))
    assert batch.pools[0].num_drawn <= 9  # never asked for samples past its give-up point
    assert batch.metrics["num_gave_up"] >= 2
    assert engine.tokens_after_exit() == {}


def test_signal_rate_matches_monte_carlo():
    rng = np.random.default_rng(0)
    cfg = SamplerConfig(samples_per_round=1, max_rounds=12)
    prior = (0.7, 3.0)
    scheduler = StreamingScheduler([Prompt(0, "q")], cfg, StreamingOptions(prior=prior))
    state = scheduler.states[0]
    rates = []
    for k in range(4, 13):  # signal-prompts per sample of budget k, simulated
        p = rng.beta(*prior, size=40000)
        draws = rng.random((len(p), k)) < p[:, None]
        pos = np.cumsum(draws, axis=1)
        both = (pos > 0) & (pos < np.arange(1, k + 1))
        first = np.where(both.any(axis=1), both.argmax(axis=1) + 1, k)
        rates.append(both[:, -1].mean() / np.maximum(first, cfg.group_size).mean())
    assert scheduler.allocation.signal_rate(state) == pytest.approx(max(rates), rel=0.03)


def test_memory_and_min_signal_rate_move_budget_to_promising_prompts():
    memory = PassRateMemory(empirical_prior=False, prior=(0.4, 2.0), max_evidence=128)
    hopeless, rare, fresh = (Prompt(i, f"m{i}", metadata={"pass_rate": 0.03}) for i in range(3))
    memory.seed(hopeless, 0.0, 96)   # 0 of 96 before: skipped at once
    memory.seed(rare, 2 / 64, 64)    # 2 of 64 before: worth more than M * N samples
    cfg = SamplerConfig(exit_rule="mixed", samples_per_round=1, max_rounds=32)
    options = StreamingOptions(allocation="fixed", min_signal_rate=0.01, budget=128, fill_idle=False)
    scheduler = StreamingScheduler([hopeless, rare, fresh], cfg, options, memory)
    assert scheduler.states[0].skipped and not scheduler.states[1].skipped
    # one-class pools: how long each keeps going before its next sample is priced out
    assert scheduler.allocation.samples_before_give_up(scheduler.states[1]) == 128  # 2.4 / (66.4 + j) >= 0.01 up to j = 173
    assert scheduler.allocation.samples_before_give_up(scheduler.states[2]) == 38  # no memory: 0.4 / (2.4 + j) >= 0.01
    with pytest.raises(ConfigError, match="budget=3 is below group_size=4"):
        StreamingScheduler([fresh], cfg, StreamingOptions(budget=3))
    with pytest.raises(ConfigError, match="min_signal_rate"):
        StreamingOptions(min_signal_rate=1.5)


def test_the_config_tree_streaming_section_has_the_scheduler_options_defaults():
    """``SamplerConfig.streaming`` (what a run sets) and the scheduler's StreamingOptions (which also holds research
    knobs) share these fields; their defaults must agree, and the factory passes every one of them through."""
    from dataclasses import fields

    from reinforce_ada.config import StreamingConfig

    options = {f.name: f.default for f in fields(StreamingOptions)}
    section = {f.name: f.default for f in fields(StreamingConfig)}
    assert set(section) <= set(options)
    assert {name: options[name] for name in section} == section
    chosen = StreamingConfig(allocation="fixed", target=0.5, give_up_below=0.1, min_signal_rate=0.2, budget=40,
                             max_in_flight=7, skip_below=0.3, cap_below=0.4)
    sampler = build_sampler(SamplerConfig(mode="streaming", streaming=chosen, memory={"enabled": True}),
                            TokenEngine(), text_verifier)
    assert {name: getattr(sampler.options, name) for name in section} == chosen.options()
    assert sampler.options.fill_idle is True  # an async engine keeps StreamingOptions' default


def test_fill_idle_gives_each_wave_at_most_fill_idle_per_wave_extra_samples():
    cfg = SamplerConfig()
    budget = cfg.samples_per_round * cfg.max_rounds

    def in_flight(scheduler):
        return [len(state.in_flight) for state in scheduler.states.values()]

    def scheduler(**options):
        made = StreamingScheduler(prompts([0.0, 0.0]), cfg, StreamingOptions(allocation="fixed", **options))
        made.want()
        return made

    assert in_flight(scheduler(fill_idle=False)) == [cfg.samples_per_round] * 2
    assert in_flight(scheduler(fill_idle_per_wave=None)) == [budget] * 2  # the tail filled up to the budgets
    capped = scheduler(fill_idle_per_wave=1)
    assert in_flight(capped) == [cfg.samples_per_round + 1] * 2
    assert capped.want() == []  # the wave has had its extra sample
    failed = [(request, Completion(state.prompt.prompt_id, "0"), 0.0)
              for state in capped.states.values() for request in list(state.in_flight.values())]
    assert capped.record(failed) == []  # one class only: no exit
    capped.want()  # the next wave, and again one extra sample each
    assert in_flight(capped) == [cfg.samples_per_round + 1] * 2
    assert [state.wave for state in capped.states.values()] == [2, 2]


def test_an_engine_whose_sequences_share_compute_gets_one_extra_sample_per_wave():
    cfg = SamplerConfig(mode="streaming")
    gpu_like = SteppedTokenEngine()
    assert build_sampler(cfg, gpu_like, text_verifier).options.fill_idle_per_wave is None  # up to the budgets
    cpu_like = SteppedTokenEngine()
    cpu_like.sequences_share_compute = True  # as VLLMGenerator on vLLM's CPU platform
    sampler = build_sampler(cfg, cpu_like, text_verifier)
    assert sampler.options.fill_idle and sampler.options.fill_idle_per_wave == 1
    assert build_sampler(cfg, cpu_like, text_verifier, fill_idle_per_wave=None).options.fill_idle_per_wave is None
    assert len(sampler.sample(prompts()).groups) == len(RATES)
    assert len(build_sampler(cfg, gpu_like, text_verifier).sample(prompts()).groups) == len(RATES)
    # fewer samples started only to be cancelled when their prompt exits
    assert len(cpu_like.request_ids) < len(gpu_like.request_ids) and cpu_like.cancelled < gpu_like.cancelled
