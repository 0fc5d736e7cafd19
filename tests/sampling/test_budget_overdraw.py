"""Budget mode with over-draw (``budget_overdraw``): more candidate prompts than the budget trains on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts
from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.core.allocation.budget import PoolState, value_curve
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.sampler import AdaptiveSampler


def overdraw_config(**overrides) -> SamplerConfig:
    values = dict(samples_per_round=4, max_rounds=4, group_size=4, exit_rule="mixed", allocation="budget",
                  budget_overdraw=2.0, budget_half_life=None)
    values.update(overrides)
    return SamplerConfig(**values)


def test_the_value_of_a_group_ranks_unknown_promising_hopeless_and_saturated_prompts():
    # value of a group of 4 = P(both classes among 4) = 1 - E[p^4] - E[(1-p)^4] under the prompt's Beta posterior
    uniform = 1 - 2 / 5                                             # Beta(1, 1): E[p^4] = 1/5
    promising = 1 - 2 * (3 * 4 * 5 * 6) / (6 * 7 * 8 * 9)           # Beta(3, 3): 2 positives, 2 negatives remembered
    hopeless = 1 - (1 * 2 * 3 * 4 + 41 * 42 * 43 * 44) / (42 * 43 * 44 * 45)  # Beta(1, 41): 0 of 40 remembered
    assert value_curve(PoolState(1.0, 1.0, 0, 0, 0), 4, 4)[4] == pytest.approx(uniform)
    assert value_curve(PoolState(3.0, 3.0, 0, 0, 0), 4, 4)[4] == pytest.approx(promising)
    assert value_curve(PoolState(1.0, 41.0, 0, 0, 0), 4, 4)[4] == pytest.approx(hopeless)
    assert promising > uniform > 6 * hopeless  # 0.762 > 0.6 > 6 x 0.089


def test_overdraw_gives_the_groups_to_the_best_candidates_and_skips_hopeless_and_saturated_ones():
    # 8 candidates, budget_overdraw 2: the budget is GRPO's for 4 prompts (16 samples). Remembered: 0 hopeless
    # (0/40), 2 saturated (40/40), 4 promising (2/4); the others unknown (uniform prior, value 0.6 for a group).
    memory = PassRateMemory(half_life=None, empirical_prior=False)
    prompts = make_prompts(range(8))
    memory.seed(prompts[0], 0.0, 40)
    memory.seed(prompts[2], 1.0, 40)
    memory.seed(prompts[4], 0.5, 4)
    gen = ScriptedGenerator({}, default=0.0)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), overdraw_config(), memory=memory)
    batch = sampler.sample(prompts)
    # the promising prompt first (0.762 > 0.6), then the unknown ones in order (ties by order): 1, 3, 5; 6 and 7 lose
    # the tie to them, 0 and 2 are worth 0.089 a group. One round: the whole budget went to first groups.
    assert gen.calls == [[(1, 4), (3, 4), (4, 4), (5, 4)]]
    assert batch.metrics["budget"] == 16 and batch.metrics["total_samples"] == 16
    assert batch.metrics["num_skipped"] == 4 and batch.metrics["skipped_fraction"] == 0.5
    assert batch.metrics["num_empty"] == 0
    assert sorted(g.prompt_id for g in batch.groups) == [1, 3, 4, 5]


def test_with_an_empty_memory_the_first_candidates_get_the_groups():
    gen = ScriptedGenerator({}, default=1.0)
    batch = AdaptiveSampler(gen, ScriptedVerifier(), overdraw_config(budget_overdraw=1.5)).sample(make_prompts(range(6)))
    assert gen.calls == [[(0, 4), (1, 4), (2, 4), (3, 4)]]  # floor(6 / 1.5) = 4 groups, ties by order
    assert batch.metrics["num_skipped"] == 2 and [g.prompt_id for g in batch.groups] == [0, 1, 2, 3]


def test_a_skipped_candidate_is_offered_again_with_decayed_evidence():
    # an over-drawn, skipped prompt is not remembered as tried: its evidence only decays (per presentation)
    memory = PassRateMemory(half_life=None, empirical_prior=False)
    prompts = make_prompts(range(4))
    memory.seed(prompts[3], 0.0, 40)
    sampler = AdaptiveSampler(ScriptedGenerator({}, default=0.0), ScriptedVerifier(),
                              overdraw_config(budget_half_life=1.0), memory=memory)
    batch = sampler.sample(prompts)
    assert batch.pools[3].num_drawn == 0 and batch.metrics["num_skipped"] == 2
    assert memory.evidence(prompts[3]) == pytest.approx((0.0, 20.0))


def test_candidate_and_trained_counts_round_trip():
    for overdraw in (1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 7.3):
        config = overdraw_config(budget_overdraw=overdraw)
        for batch_size in range(1, 70):
            candidates = config.candidate_prompts(batch_size)
            assert candidates == math.ceil(round(batch_size * overdraw, 6))
            assert config.trained_prompts(candidates) == batch_size
            assert config.step_budget(candidates) == 4 * batch_size  # default: GRPO's samples for the trained ones


def test_a_budget_below_one_group_per_trained_prompt_fails_before_any_generation():
    gen = ScriptedGenerator({})
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), overdraw_config(sample_budget_per_step=15))
    with pytest.raises(ConfigError, match=r"^sample_budget_per_step=15 is below one group per trained prompt: at "
                                          r"least group_size x prompts = 4 x 4 = 16 \(8 candidates / "
                                          r"budget_overdraw 2\)$"):
        sampler.sample(make_prompts(range(8)))
    assert gen.calls == []
    assert overdraw_config(sample_budget_per_step=16).step_budget(8) == 16


def test_overdraw_settings_are_checked():
    for bad in (0.5, 0.0, -1.0):
        with pytest.raises(ConfigError, match="budget_overdraw must be a number >= 1"):
            overdraw_config(budget_overdraw=bad)
    for bad in (math.inf, math.nan, "2", True):  # not a finite float: the typed-field check names the field first
        with pytest.raises(ConfigError, match=r"config field `budget_overdraw`: expected a finite float, got "):
            overdraw_config(budget_overdraw=bad)
    with pytest.raises(ConfigError, match="budget_overdraw is a setting of budget mode"):
        SamplerConfig(budget_overdraw=2.0)
    with pytest.raises(ConfigError, match=r"budget_overdraw=2.0 needs budget_skip=True: .* \(TRL, verl\)"):
        overdraw_config(budget_skip=False)
    assert overdraw_config(budget_overdraw=1.0, budget_skip=False).trained_prompts(5) == 5


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_candidates=st.integers(1, 12), overdraw=st.sampled_from([1.0, 1.5, 2.0, 3.0]), extra=st.integers(0, 12),
       probe=st.booleans(), min_group=st.booleans(), seed=st.integers(0, 10_000), steps=st.integers(1, 3))
def test_invariants(num_candidates, overdraw, extra, probe, min_group, seed, steps):
    rng = np.random.default_rng(seed)
    rates = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], size=num_candidates)
    gen = ScriptedGenerator(lambda pid, k: float(rng.random() < rates[pid]))
    config = overdraw_config(budget_overdraw=overdraw, budget_probe=2 if probe else None,
                             budget_min_group=2 if probe and min_group else None, budget_half_life=2.0)
    trained = config.trained_prompts(num_candidates)
    config = overdraw_config(budget_overdraw=overdraw, budget_probe=2 if probe else None,
                             budget_min_group=2 if probe and min_group else None, budget_half_life=2.0,
                             sample_budget_per_step=4 * trained + extra)
    sampler = AdaptiveSampler(gen, ScriptedVerifier(), config)
    for _ in range(steps):
        batch = sampler.sample(make_prompts(range(num_candidates)))
        drawn = {pid: pool.num_drawn for pid, pool in batch.pools.items()}
        assert sum(drawn.values()) == batch.metrics["total_samples"] <= 4 * trained + extra, "budget exceeded"
        assert all(k <= config.max_samples for k in drawn.values())
        grouped = {g.prompt_id for g in batch.groups}
        skipped = {pid for pid, k in drawn.items() if k == 0}
        assert grouped | skipped == set(range(num_candidates)) and not grouped & skipped, "a prompt vanished"
        assert batch.metrics["num_skipped"] == len(skipped)
        if overdraw > 1.0 and num_candidates >= 2 and extra == 0 and not probe:
            assert len(skipped) >= num_candidates - trained  # GRPO's budget buys at most `trained` groups
