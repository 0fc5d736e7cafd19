"""Budget mode with a price of signal (``budget_min_signal_rate``): skip what is worth less, leave it unspent."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts
from reinforce_ada.config import ConfigError, SamplerConfig, TrainConfig
from reinforce_ada.core.allocation.budget import PoolState, allocate, budget, value_curve
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.sampler import AdaptiveSampler


def priced_config(**overrides) -> SamplerConfig:
    values = dict(samples_per_round=4, max_rounds=4, group_size=4, exit_rule="mixed", allocation="budget",
                  budget_half_life=None, budget_min_signal_rate=0.1)
    values.update(overrides)
    return SamplerConfig(**values)


def concave_curves(rng: np.random.Generator, num: int) -> list[list[float]]:
    curves = []
    for _ in range(num):
        cap = int(rng.integers(0, 8))
        steps = np.sort(rng.random(cap))[::-1] * rng.random() / max(cap, 1)  # decreasing increments
        curves.append([0.0] + list(np.cumsum(steps)))
    return curves


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), num=st.integers(1, 6), budget_=st.integers(0, 30),
       price=st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3]))
def test_every_priced_increment_is_worth_its_price_and_a_zero_price_changes_nothing(seed, num, budget_, price):
    curves = concave_curves(np.random.default_rng(seed), num)
    plan = allocate(curves, budget_, min_rate=price)
    assert sum(plan) <= budget_
    for curve, k in zip(curves, plan):
        # each increment given had rate >= price, so their sum (telescoping) is worth at least price x samples
        assert curve[k] - curve[0] >= price * k - 1e-12
    assert allocate(curves, budget_, min_rate=0.0) == allocate(curves, budget_)


def test_a_price_below_an_unseen_prompts_first_group_never_skips_it():
    unseen = PoolState(1.0, 1.0, 0, 0, 0)
    first_rate = value_curve(unseen, 4, 4)[4] / 4
    assert first_rate == pytest.approx((4 - 1) / (4 + 1) / 4) == pytest.approx(0.15)
    kwargs = dict(samples_per_round=4, max_samples=4, group_size=4)  # at most one group each
    assert budget([unseen] * 3, 12, min_rate=0.149, **kwargs) == [4, 4, 4]
    assert budget([unseen] * 3, 12, min_rate=0.151, **kwargs) == [0, 0, 0]  # nothing is worth that much
    hopeless, saturated = PoolState(1.0, 41.0, 0, 0, 0), PoolState(41.0, 1.0, 0, 0, 0)
    assert budget([hopeless, unseen, saturated], 12, min_rate=0.1, **kwargs) == [0, 4, 0]
    assert budget([hopeless, unseen, saturated], 12, **kwargs) == [4, 4, 4]  # no price: the budget is spent


def test_skipped_prompts_samples_are_left_unspent_not_given_to_others():
    # 4 prompts, budget 16 (GRPO's). Remembered: 0 hopeless (0/40), 2 saturated (40/40); 1 and 3 unseen and mixed.
    def run(price: float):
        memory = PassRateMemory(half_life=None, empirical_prior=False)
        prompts = make_prompts(range(4))
        memory.seed(prompts[0], 0.0, 40)
        memory.seed(prompts[2], 1.0, 40)
        gen = ScriptedGenerator({1: [1.0, 0.0, 1.0, 0.0], 3: [0.0, 1.0, 0.0, 0.0]}, default=1.0)
        batch = AdaptiveSampler(gen, ScriptedVerifier(), priced_config(budget_min_signal_rate=price),
                                memory=memory).sample(prompts)
        return gen, batch

    gen, batch = run(0.1)
    assert gen.calls == [[(1, 4), (3, 4)]]  # both exit with signal; 0 and 2 are worth 0.022 a sample: unspent
    assert batch.metrics["budget"] == 16 and batch.metrics["total_samples"] == 8
    assert batch.metrics["budget_used_fraction"] == 0.5 and batch.metrics["num_skipped"] == 2
    assert sorted(g.prompt_id for g in batch.groups) == [1, 3]
    gen, batch = run(0.0)  # the default spends the whole budget: once 1 and 3 exit, 0 and 2 get what is left
    assert gen.calls == [[(1, 4), (3, 4)], [(0, 4), (2, 4)]] and batch.metrics["total_samples"] == 16


def test_a_skipped_prompt_is_retried_once_its_memory_has_decayed():
    memory = PassRateMemory(half_life=None, empirical_prior=False)
    prompts = make_prompts(range(2))
    # saturated, 16 of 16, read after one visit's decay as 8 of 8: a group is worth 1 - E[p^4] - E[(1-p)^4] = 0.31
    # under Beta(9, 1), 0.077 a sample, below the price 0.1; after the next visit 4 of 4: 0.44, 0.109 a sample
    memory.seed(prompts[0], 1.0, 16)
    gen = ScriptedGenerator({}, default=1.0)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), priced_config(budget_half_life=1.0), memory=memory)
    sampler.sample(prompts)
    assert gen.calls[0] == [(1, 4)]  # 0 skipped
    gen.calls.clear()
    sampler.sample([prompts[0]])
    assert gen.calls[0] == [(0, 4)]  # 4 of 4 after another visit: worth more than the price again


def test_the_price_is_checked():
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match=r"budget_min_signal_rate must be a number in \[0, 1\]"):
            priced_config(budget_min_signal_rate=bad)
    for bad in (math.nan, "0.1", True):
        with pytest.raises(ConfigError, match="budget_min_signal_rate"):
            priced_config(budget_min_signal_rate=bad)
    with pytest.raises(ConfigError, match="budget_min_signal_rate is a setting of budget mode"):
        SamplerConfig(budget_min_signal_rate=0.1)
    with pytest.raises(ConfigError, match=r"budget_min_signal_rate=0.1 needs budget_skip=True: .* \(TRL, verl\)"):
        priced_config(budget_skip=False)
    assert priced_config(budget_min_signal_rate=0.0, budget_skip=False).budget_min_signal_rate == 0.0
    with pytest.raises(ConfigError, match="budget_min_signal_rate is a setting of strategy='ada-budget'"):
        TrainConfig(strategy="grpo", sampler={"budget_min_signal_rate": 0.1})
    assert TrainConfig(strategy="ada-budget", sampler={"budget_min_signal_rate": 0.1}).sampler.budget_min_signal_rate \
        == 0.1
    with pytest.raises(ValueError, match=r"min_rate must be in \[0, 1\]"):
        allocate([[0.0, 0.5]], 1, min_rate=2.0)
