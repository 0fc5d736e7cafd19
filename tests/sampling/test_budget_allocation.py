"""Budget mode: the allocation arithmetic (core/allocation/budget.py) and the round-based sampler running it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts
from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.core.allocation import STEP_ALLOCATION_RULES
from reinforce_ada.core.allocation.budget import PoolState, allocate, best_increment, budget, value_curve
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.sampler import AdaptiveSampler

UNIFORM = PoolState(1.0, 1.0, 0, 0, 0)


def budget_config(**overrides) -> SamplerConfig:
    values = dict(samples_per_round=4, max_rounds=4, group_size=4, exit_rule="mixed", allocation="budget")
    values.update(overrides)
    return SamplerConfig(**values)


# -- arithmetic ------------------------------------------------------------------------------------------------------
def test_value_of_an_empty_uniform_pool_is_one_minus_two_over_k_plus_one_once_a_group_fits():
    # P(both classes among k) under p ~ U(0, 1) = 1 - E[p^k] - E[(1-p)^k] = 1 - 2/(k+1); 0 until k >= n = 4
    expected = [0.0, 0.0, 0.0, 0.0] + [1 - 2 / (k + 1) for k in range(4, 9)]
    assert value_curve(UNIFORM, 8, group_size=4) == pytest.approx(expected)


def test_value_of_a_pool_with_only_negatives_is_the_chance_of_a_first_positive():
    # 4 negatives: posterior Beta(1, 5); P(a positive among k) = 1 - E[(1-p)^k] = 1 - 5/(5+k) = k/(5+k)
    curve = value_curve(PoolState(1.0, 1.0, 4, 0, 4), 6, group_size=4)
    assert curve == pytest.approx([k / (5 + k) for k in range(7)])


def test_balanced_value_needs_two_of_each():
    # uniform prior, n = 4, balanced: P(J_4 = 2) = 1/5 (Beta-binomial with a = b = 1 is uniform on 0..k)
    curve = value_curve(UNIFORM, 4, group_size=4, exit_rule="balanced")
    assert curve[4] == pytest.approx(1 / 5)
    # k = 5: J in {2, 3} -> 2/6
    assert value_curve(UNIFORM, 5, group_size=4, exit_rule="balanced")[5] == pytest.approx(2 / 6)


def test_best_increment_is_the_best_average_gain_per_sample():
    values = [0.0, 0.0, 0.0, 0.0, 0.6, 2 / 3]
    assert best_increment(values, 0, 5) == pytest.approx((0.6 / 4, 4))  # 0.15 > (2/3)/5 = 0.133
    assert best_increment(values, 4, 1) == pytest.approx(((2 / 3 - 0.6) / 1, 1))
    assert best_increment(values, 0, 3) == (0.0, 0)  # no group fits in 3: nothing worth buying
    assert best_increment(values, 0, 0) == (0.0, 0)


def test_allocate_follows_the_marginal_values():
    # prompt 0: gains 0.5 then 0.1; prompt 1: gains 0.3 then 0.2 -> 0.5 (p0), 0.3 (p1), 0.2 (p1), budget spent
    assert allocate([[0.0, 0.5, 0.6], [0.0, 0.3, 0.5]], 3) == [1, 2]
    assert allocate([[0.0, 0.5, 0.6], [0.0, 0.3, 0.5]], 10) == [2, 2]  # caps bind: never more than len - 1
    assert allocate([[0.0, 0.5, 0.6], [0.0, 0.3, 0.5]], 0) == [0, 0]
    with pytest.raises(ValueError, match="exceed the budget"):
        allocate([[0.0, 0.5]], 0, required=[1])


def test_a_confidently_saturated_prompt_is_skipped_for_a_uniform_one():
    """Budget 8, n = 4. Uniform prompt: group of 4 worth 0.6 (0.15 per sample), then 2/((k+1)(k+2)) per sample:
    0.0667, 0.0476, 0.0357, 0.0278. Saturated prompt, Beta(30, 1): V(4) = 1 - 30/34 - 4!/(31*32*33*34) = 0.11763,
    0.0294 per sample. Order of purchase: uniform 4, +1, +1, +1 (7 used); the saturated group no longer fits in the
    one sample left, so the uniform prompt gets it: [8, 0]."""
    saturated = PoolState(30.0, 1.0, 0, 0, 0)
    v4 = 1 - 30 / 34 - 24 / (31 * 32 * 33 * 34)
    assert value_curve(saturated, 4, group_size=4)[4] == pytest.approx(v4)
    curves = [value_curve(UNIFORM, 32, group_size=4), value_curve(saturated, 32, group_size=4)]
    assert allocate(curves, 8) == [8, 0]
    # this round draws the uniform prompt's group only (its first request is n); the rest is re-planned
    assert budget([UNIFORM, saturated], 8, samples_per_round=8, max_samples=32, group_size=4) == [4, 0]
    # skip=False (TRL, verl): every prompt gets its group first
    assert budget([UNIFORM, saturated], 8, samples_per_round=8, max_samples=32, group_size=4, skip=False) == [4, 4]


def test_hopeless_and_saturated_prompts_get_nothing_when_the_budget_is_short():
    states = [PoolState(0.3, 40.0, 0, 0, 0), PoolState(2.0, 2.0, 0, 0, 0), PoolState(40.0, 0.3, 0, 0, 0),
              PoolState(3.0, 5.0, 0, 0, 0)]
    sizes = budget(states, 8, samples_per_round=4, max_samples=16, group_size=4)
    assert sizes == [0, 4, 0, 4]


def test_a_probe_with_both_classes_stops_as_a_short_group_with_min_group_two():
    # probes of 2: prompt 0 gets 1+0 (signal: it exits with 2), prompts 1 and 2 get 0+0 and share what is left
    script = {0: [1.0, 0.0], 1: [0.0, 0.0, 1.0, 0.0, 0.0], 2: [0.0, 0.0, 0.0, 1.0, 0.0]}
    gen = ScriptedGenerator(script, default=0.0)
    config = budget_config(budget_probe=2, budget_min_group=2)
    batch = AdaptiveSampler(gen, ScriptedVerifier(), config).sample(make_prompts(range(3)))
    assert gen.calls[0] == [(0, 2), (1, 2), (2, 2)]
    assert all(pid != 0 for call in gen.calls[1:] for pid, _ in call)  # prompt 0 stopped at its probe
    assert gen.calls[1] == [(1, 2), (2, 2)]  # each fills its group of 4 and finds its positive: all exit
    assert batch.pools[0].exited and batch.pools[0].count == 2 and batch.groups[0].has_signal
    # 2 of the 12 are left over: nobody is without signal any more, so nothing is worth spending them on
    assert batch.metrics["total_samples"] == 10 and batch.metrics["budget_used_fraction"] == 10 / 12
    assert batch.metrics["num_short_groups"] == 1 and batch.metrics["signal_fraction"] == 1.0
    with pytest.raises(ConfigError, match="budget_min_group"):
        budget_config(budget_min_group=1)


def test_first_request_probe_and_the_rule_is_registered():
    assert STEP_ALLOCATION_RULES.get("budget") is budget
    sizes = budget([UNIFORM] * 3, 12, samples_per_round=8, max_samples=32, group_size=4, first_request=2)
    assert sizes == [2, 2, 2]
    with pytest.raises(ValueError, match="exit rule"):
        budget([UNIFORM], 4, samples_per_round=4, max_samples=8, group_size=4, exit_rule="positive")


# -- the sampler in budget mode ---------------------------------------------------------------------------------------
def test_with_an_empty_memory_and_grpos_budget_it_is_grpo():
    script = {pid: [float((pid + j) % 3 == 0) for j in range(8)] for pid in range(5)}
    budget_batch = AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(),
                                   budget_config(selection="random")).sample(make_prompts(range(5)))
    grpo_gen = ScriptedGenerator(script)
    grpo_batch = AdaptiveSampler(grpo_gen, ScriptedVerifier(), SamplerConfig.grpo(4)).sample(make_prompts(range(5)))
    assert budget_batch.metrics["total_samples"] == grpo_batch.metrics["total_samples"] == 20
    assert len(budget_batch.rounds) == 1
    # every pool is its group of 4 (kept in draw order), so the whole-pool baseline is GRPO's group baseline
    assert np.allclose(budget_batch.advantages, grpo_batch.advantages)
    assert budget_batch.metrics["num_skipped"] == 0 and budget_batch.metrics["budget_used_fraction"] == 1.0


def test_a_larger_budget_goes_in_rounds_to_the_prompts_still_without_signal():
    # prompt 0 has signal after its group; prompts 1 and 2 are all-negative for 4, then get positives
    script = {0: [1.0, 0.0, 0.0, 0.0], 1: [0.0] * 4 + [1.0] * 8, 2: [0.0] * 4 + [1.0] * 8}
    gen = ScriptedGenerator(script)
    batch = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(sample_budget_per_step=20)).sample(
        make_prompts(range(3)))
    assert gen.calls[0] == [(0, 4), (1, 4), (2, 4)]
    assert gen.calls[1] == [(1, 4), (2, 4)]  # 8 left: the two prompts without signal, 4 each (M = 4)
    assert batch.metrics["total_samples"] == 20 and batch.metrics["signal_fraction"] == 1.0


def test_the_budget_is_spent_exactly_while_prompts_stay_informative():
    gen = ScriptedGenerator({}, default=0.0)  # never a positive: every prompt stays without signal
    batch = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(sample_budget_per_step=40)).sample(
        make_prompts(range(4)))
    assert batch.metrics["total_samples"] == 40  # 16 (groups) + 16 (4 each, M = 4) + 8 (2 each)
    assert [sum(k for _, k in call) for call in gen.calls] == [16, 16, 8]


def test_memory_skips_the_saturated_and_hopeless_prompts_and_is_checkpointed():
    # prompts 0 (0/40 before) and 2 (40/40 before) are confidently hopeless / saturated; 1, 3, 4, 5 are unknown
    # (uniform prior) and turn out all-negative for 4 samples, then positive
    script = {pid: [0.0] * 4 + [1.0] * 8 for pid in (1, 3, 4, 5)}
    gen = ScriptedGenerator(script, default=0.0)
    memory = PassRateMemory(half_life=None, max_evidence=64.0, empirical_prior=False)
    memory.seed(make_prompts([0])[0], 0.0, 40)
    memory.seed(make_prompts([2])[0], 1.0, 40)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(), memory=memory)
    batch = sampler.sample(make_prompts(range(6)))
    # budget 24: groups for the four unknown prompts; the 8 left buy a 5th and 6th sample for each of them (a first
    # positive after 4 negatives has chance 1/6 under Beta(1, 5), far above the skipped prompts' ~0.02 per sample)
    assert gen.calls == [[(1, 4), (3, 4), (4, 4), (5, 4)], [(1, 2), (3, 2), (4, 2), (5, 2)]]
    assert batch.metrics["num_skipped"] == 2 and batch.metrics["num_empty"] == 0
    assert batch.metrics["total_samples"] == 24 and batch.metrics["signal_fraction"] == 4 / 6
    assert {g.prompt_id for g in batch.groups} == {1, 3, 4, 5}
    state = sampler.state_dict()
    assert len(state["memory"]["entries"]) == 6, "the step's counts are remembered, and travel with the state"
    # a sampler built as this one was (the memory's parameters are its own; the state brings the counts)
    restored = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(),
                               memory=PassRateMemory(half_life=None, max_evidence=64.0, empirical_prior=False))
    restored.load_state_dict(state)
    assert restored.memory.state_dict() == sampler.memory.state_dict()


def test_a_budget_below_one_group_per_prompt_fails_before_any_generation():
    gen = ScriptedGenerator({})
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(sample_budget_per_step=15))
    with pytest.raises(ConfigError, match=r"sample_budget_per_step=15 .* at least group_size x prompts = 4 x 4 = 16"):
        sampler.sample(make_prompts(range(4)))
    assert gen.calls == []


def test_budget_settings_are_checked():
    with pytest.raises(ConfigError, match="exit_rule"):
        budget_config(exit_rule="positive")
    with pytest.raises(ConfigError, match="sample_budget_per_step is a setting of budget mode"):
        SamplerConfig(sample_budget_per_step=64)
    with pytest.raises(ConfigError, match="budget_probe"):
        budget_config(budget_probe=5)
    with pytest.raises(ValueError, match="budget mode only"):
        AdaptiveSampler(ScriptedGenerator({}), ScriptedVerifier(), SamplerConfig(), memory=PassRateMemory())
    from reinforce_ada.sampling.factory import build_sampler

    with pytest.raises(ConfigError, match="round-based sampler"):
        build_sampler(replace(budget_config(), mode="streaming"), ScriptedGenerator({}), ScriptedVerifier())


# -- invariants -----------------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_prompts=st.integers(1, 6), n=st.integers(2, 4), m=st.integers(1, 6), rounds=st.integers(1, 4),
       extra=st.integers(0, 30), skip=st.booleans(), probe=st.booleans(), exit_rule=st.sampled_from(["mixed", "balanced"]),
       seed=st.integers(0, 10_000), steps=st.integers(1, 3), min_group=st.booleans())
def test_invariants(num_prompts, n, m, rounds, extra, skip, probe, exit_rule, seed, steps, min_group):
    if m * rounds < n:
        rounds = -(-n // m)
    rng = np.random.default_rng(seed)
    rates = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], size=num_prompts)
    gen = ScriptedGenerator(lambda pid, k: float(rng.random() < rates[pid]))
    budget_total = n * num_prompts + extra
    config = budget_config(samples_per_round=m, max_rounds=rounds, group_size=n, exit_rule=exit_rule,
                           sample_budget_per_step=budget_total, budget_skip=skip, budget_probe=1 if probe else None,
                           budget_min_group=2 if min_group else None)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), config)
    prompts = make_prompts(range(num_prompts))
    for _ in range(steps):
        first_call = len(gen.calls)
        batch = sampler.sample(prompts)
        total = batch.metrics["total_samples"]
        assert total <= budget_total  # never over the budget
        drawn = {pid: pool.num_drawn for pid, pool in batch.pools.items()}
        assert all(k <= config.max_samples for k in drawn.values())
        assert set(batch.pools) == set(range(num_prompts))  # no prompt vanishes: grouped, or skipped and counted
        grouped = {g.prompt_id for g in batch.groups}
        skipped = {pid for pid, k in drawn.items() if k == 0}
        assert grouped | skipped == set(range(num_prompts)) and not grouped & skipped
        assert batch.metrics["num_skipped"] == len(skipped)
        if not skip:
            assert not skipped
        for group in batch.groups:  # groups of n whenever the pool allows
            assert len(group.completions) == min(n, batch.pools[group.prompt_id].count)
        if not probe:  # without a probe, a sampled prompt always gets at least its group
            assert all(k == 0 or k >= n for k in drawn.values())
        for pool in batch.pools.values():  # a prompt exits only with the pool size its rule needs
            assert not pool.exited or pool.count >= (2 if min_group and skip else n)
        exited_in: dict = {}
        for call_number, call in enumerate(gen.calls[first_call:], 1):  # nothing drawn after a prompt exited
            for pid, _ in call:
                assert pid not in exited_in
            for pid, pool in batch.pools.items():
                if pool.exit_round == call_number:
                    exited_in[pid] = call_number


def test_evidence_decays_per_presentation_so_a_skipped_prompt_is_retried():
    hopeless = make_prompts([0])[0]
    memory = PassRateMemory(half_life=None, empirical_prior=False)
    memory.seed(hopeless, 0.0, 40)
    gen = ScriptedGenerator({}, default=0.0)  # prompts 1 and 2 are unknown to the memory (and fail, too)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), budget_config(budget_half_life=1.0), memory=memory)
    drawn = []
    for _ in range(8):
        batch = sampler.sample(make_prompts([0, 1, 2]))
        drawn.append(batch.pools[0].num_drawn)
    # step 1: 40 negatives -> 20 (half-life of one visit): skipped; the 4 samples left after the two unknown prompts'
    # groups go to them (a first positive after 0/4 has chance 1/6 under Beta(1, 5), the skipped prompt's ~0.04)
    assert drawn[0] == 0 and gen.calls[0] == [(1, 4), (2, 4)] and gen.calls[1] == [(1, 2), (2, 2)]
    assert any(drawn), "the skipped prompt's evidence decayed with each presentation until it was sampled again"
    first = drawn.index(next(d for d in drawn if d))
    # a skipped presentation adds no evidence: the 40 negatives are halved once per visit until sampled again
    assert memory.evidence(hopeless)[1] <= 40 * 0.5 ** (first + 1) + drawn[first] + 1e-9
    assert PassRateMemory.scale.__doc__
    with pytest.raises(ValueError, match="factor"):
        memory.scale(hopeless, 1.5)
