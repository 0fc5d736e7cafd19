import numpy as np
import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.research.latency import LatencyModel, TimedGenerator, VirtualEngine, batched_time, run_streaming
from reinforce_ada.research.simulate import SimulatedGenerator, simulated_verifier
from reinforce_ada.research.simulate_multistep import (
    DriftingPassRates,
    StrategySpec,
    default_strategies,
    run_multistep,
    select_initial,
)
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingScheduler
from reinforce_ada.types import Completion, Prompt


def flat(concurrency, base=1.0, per_seq=0.0):
    return LatencyModel(concurrency=concurrency, step_time_base=base, step_time_per_seq=per_seq)


def test_batched_time_is_the_fifo_makespan():
    # two slots: 3 and 5 start at once; 2 starts when 3 ends (step 3) and ends at step 5
    assert batched_time([3, 5, 2], flat(2)) == 5.0
    # per-sequence cost: two running during all 5 steps
    assert batched_time([3, 5, 2], flat(2, 1.0, 0.5)) == pytest.approx(5 * (1.0 + 2 * 0.5))
    # one slot: sequential
    assert batched_time([3, 5, 2], flat(1)) == 10.0
    # varying occupancy: [4, 1] on 2 slots: 1 step with 2 running, then 3 steps with 1
    assert batched_time([4, 1], flat(2, 1.0, 1.0)) == pytest.approx(1 * 3.0 + 3 * 2.0)


def test_cancel_counts_partial_tokens_and_frees_the_slot():
    engine = VirtualEngine(flat(1))
    engine.submit("a", 10)
    engine.submit("b", 4)  # waits for the single slot
    engine.submit("c", 2)
    engine.step = 3  # pretend 3 steps ran for "a"
    engine.cancel("a")
    assert engine.tokens == 3
    engine.cancel("c")  # cancelled while waiting: never generates
    assert engine.advance() == ["b"] and engine.step == 7 and engine.tokens == 7
    assert not engine.busy


def test_round_based_time_adds_up_its_rounds():
    model = flat(4)
    gen = TimedGenerator(SimulatedGenerator(0), model, seed=0)
    prompts = [Prompt(i, "", metadata={"pass_rate": r}) for i, r in enumerate([0.0, 0.5, 1.0])]
    batch = AdaptiveSampler(gen, simulated_verifier, SamplerConfig()).sample(prompts)
    assert len(gen.round_times) == len(batch.rounds)
    assert gen.time == pytest.approx(sum(gen.round_times))
    assert len(gen.lengths) == batch.metrics["total_samples"]
    assert gen.time >= batched_time(gen.lengths, model) - 1e-9  # a barrier never helps


def test_run_streaming_drives_the_real_scheduler():
    prompts = [Prompt(i, "", metadata={"pass_rate": r}) for i, r in enumerate([0.0, 0.5, 0.5, 1.0, 0.3])]
    model = LatencyModel(concurrency=8, length_median=50, max_tokens=200)
    scheduler = StreamingScheduler(prompts, SamplerConfig(), StreamingOptions(max_in_flight=8))

    def make(prompt, rng):
        return Completion(prompt.prompt_id, "1" if rng.random() < prompt.metadata["pass_rate"] else "0")

    run = run_streaming(scheduler, model, simulated_verifier, make, seed=0)
    assert scheduler.done and run.max_running == 8
    drawn = sum(s.pool.num_drawn for s in scheduler.states.values())
    assert len(run.lengths) == drawn
    assert run.tokens >= sum(run.lengths)  # plus the partial tokens of cancelled requests
    assert (run.tokens > sum(run.lengths)) == (scheduler.num_cancelled > 0)
    assert scheduler.states[0].pool.num_drawn == 32 and scheduler.states[3].pool.num_drawn == 32


def test_drifting_rates_follow_the_logistic_model():
    rates = DriftingPassRates(np.array([0.5, 0.2]), np.array([1.0, -0.5]))
    expected = 1 / (1 + np.exp(-(np.log([1.0, 0.25]) + np.array([1.0, -0.5]) * 2)))
    np.testing.assert_allclose(rates.at(2.0), expected)


def test_multistep_runs_every_strategy_on_the_same_prompts():
    rates = DriftingPassRates.draw(np.random.default_rng(0).beta(0.4, 2.0, 96), 0.5, 0.5, 0)
    model = LatencyModel(concurrency=32, length_median=40, max_tokens=200)
    results = [run_multistep(s, rates, num_epochs=2, batch_size=32, latency=model)
               for s in default_strategies(concurrency=32)]
    assert [r.strategy for r in results] == ["ada-balanced", "stream-fixed", "stream-beta", "stream-beta-mem",
                                             "stream-priced", "grpo-n8", "ada-est"]
    for r in results:
        assert r.num_prompts == 2 * 96
        budget = 64 if r.strategy == "stream-priced" else 32
        assert 0 < r.signal_fraction <= 1 and r.total_samples <= budget * r.num_prompts
        assert r.time >= r.batched_time * 0.999 > 0
        assert 0 <= r.hard_share <= 1
    ada = results[0]
    assert ada.num_cancelled == 0 and ada.total_tokens > 0
    assert results[1].samples_per_prompt < ada.samples_per_prompt  # per-sample exits beat M-sized rounds
    grpo8, est = results[-2:]
    assert grpo8.total_samples == est.total_samples == 8 * 2 * 96  # Est spends GRPO-n8's budget exactly
    assert est.time == pytest.approx(est.batched_time)  # one call per step
    # the second epoch knows the first: Est moves samples to the prompts that were hard then
    assert est.hard_share > grpo8.hard_share


def test_select_initial_keeps_the_range_and_seeds_memory():
    rates = DriftingPassRates.draw(np.array([0.0, 1.0, 0.5, 0.4, 0.0005]), 0.0, 0.0, 0)
    kept, estimates = select_initial(rates, 16, 1 / 16, 15 / 16)
    assert len(kept.initial) == len(estimates) >= 2
    assert all(1 / 16 <= e.pass_rate <= 15 / 16 and e.num_samples == 16 for e in estimates)
    assert [e.prompt_id for e in estimates] == list(range(len(estimates)))
    # the estimates' keys are those of the prompts the run builds: pretend they all failed, and all are skipped
    for e in estimates:
        e.pass_rate = 0.0
    memory_spec = StrategySpec("m", SamplerConfig(), StreamingOptions(skip_below=0.7),  # P(any positive in 32 | Beta(1, 17)) = 1 - 17/49
                               {"half_life": 8.0, "empirical_prior": False})
    result = run_multistep(memory_spec, kept, num_epochs=1, batch_size=8, seed_estimates=estimates,
                           latency=LatencyModel(concurrency=16, length_median=20, max_tokens=50))
    assert result.num_skipped == len(estimates)  # seeded memory decided before any sample was drawn


def test_simulate_multistep_cli(tmp_path, capsys):
    import json

    from reinforce_ada.cli import build_parser

    parser = build_parser()
    out = tmp_path / "r.json"
    args = parser.parse_args(["simulate-multistep", "--prompts", "64", "--epochs", "2", "--batch-size", "32",
                              "--concurrency", "32", "--length-median", "30", "--max-tokens", "100",
                              "--select-k", "8", "--sampler", "streaming", "--json", str(out)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "select-prompts: kept" in text and "stream-beta-mem" in text and "ada-balanced" not in text
    assert [r["strategy"] for r in json.loads(out.read_text())] == ["stream-fixed", "stream-beta", "stream-beta-mem",
                                                                    "stream-priced"]
    with pytest.raises(ValueError, match="positive"):
        args = parser.parse_args(["simulate-multistep", "--prompts", "0"])
        args.func(args)
