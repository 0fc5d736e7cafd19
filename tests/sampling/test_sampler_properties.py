"""Property tests of the sampling loop over random scripted rewards, budgets, exit rules and selection rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts, requested_ids
from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.core.exits import get_exit_rule
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler

REWARDS = st.sampled_from([0.0, 1.0, 0.0, 1.0, 0.25, 0.75, -1.0, 2.5, None])


def two_of_each(num_positive: int, num_negative: int, group_size: int) -> bool:
    """A custom exit rule: two completions of each class."""
    return num_positive >= 2 and num_negative >= 2


@st.composite
def scenarios(draw):
    m = draw(st.integers(1, 6))
    n_rounds = draw(st.integers(1, 4))
    if m * n_rounds < 2:
        n_rounds = 2
    group_size = draw(st.integers(2, min(m * n_rounds, 8)))
    num_prompts = draw(st.integers(1, 6))
    with_failures = draw(st.booleans())
    reward = REWARDS if with_failures else REWARDS.filter(lambda r: r is not None)
    script = {pid: draw(st.lists(reward, min_size=m * n_rounds, max_size=m * n_rounds)) for pid in range(num_prompts)}
    config = SamplerConfig(
        samples_per_round=m, max_rounds=n_rounds, group_size=group_size,
        exit_rule=draw(st.sampled_from(["balanced", "positive", "once", two_of_each])),
        min_positive=draw(st.integers(1, 3)),
        selection=draw(st.sampled_from(["balanced", "positive_focused", "random", "all"])),
        unexited=draw(st.sampled_from(["keep", "drop"])),
        advantage=draw(st.sampled_from(["pool", "group"])),
        normalize_std=draw(st.booleans()),
        importance_weights=draw(st.booleans()),
        on_verifier_failure=draw(st.sampled_from(["zero", "drop"])),
        positive_threshold=draw(st.sampled_from([0.5, 0.0, 0.9])),
        seed=draw(st.integers(0, 2**16)),
    )
    max_return = draw(st.sampled_from([None, None, 1, max(1, m - 1)]))
    return config, script, max_return


# No deadline and no speed health checks: the machine running the suite may be busy; the tests check behaviour only.
QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much]


@settings(max_examples=150, deadline=None, suppress_health_check=QUIET)
@given(scenarios())
def test_sampler_invariants(scenario):
    cfg, script, max_return = scenario
    generator, verifier = ScriptedGenerator(script, max_return=max_return), ScriptedVerifier()
    returned = cfg.samples_per_round if max_return is None else min(cfg.samples_per_round, max_return)
    prompts = make_prompts(list(script))
    batch = AdaptiveSampler(generator, verifier, cfg).sample(prompts)
    m, n = cfg.samples_per_round, cfg.group_size
    rule = get_exit_rule(cfg.exit_rule, min_positive=cfg.min_positive)

    # No prompt vanishes: every prompt is a group, a counted unexited drop or a counted empty pool.
    assert len(batch.groups) + batch.num_dropped_unexited + batch.num_empty == len(prompts) == batch.num_prompts
    group_ids = [g.prompt_id for g in batch.groups]
    assert len(set(group_ids)) == len(group_ids)
    assert set(batch.pools) == set(script)

    # Requests: at most N rounds, M per request, nothing asked for a prompt after it exited.
    rounds = requested_ids(generator)
    assert len(rounds) == len(batch.rounds) <= cfg.max_rounds
    for call in generator.calls:
        assert all(num == m for _, num in call)
    for pid, pool in batch.pools.items():
        asked_in = [r for r, ids in enumerate(rounds, start=1) if pid in ids]
        assert asked_in == list(range(1, len(asked_in) + 1)), "a prompt is asked every round until it leaves"
        if pool.exited:
            assert asked_in[-1] == pool.exit_round
        else:
            assert len(asked_in) == len(rounds)
        assert pool.num_drawn == generator.drawn[pid] == returned * len(asked_in) <= cfg.max_samples
        assert pool.num_rounds == len(asked_in)

        # The pool is exactly the scored completions, and its statistics are numpy's.
        rewards = np.array([c.reward for c in pool.completions], dtype=np.float64)
        expected_failures = sum(r is None for r in script[pid][: pool.num_drawn])
        assert pool.num_verifier_failures == expected_failures
        assert pool.count == len(pool.completions) == pool.num_drawn - (
            expected_failures if cfg.on_verifier_failure == "drop" else 0)
        if pool.count:
            assert pool.mean == pytest.approx(rewards.mean(), abs=1e-12)
            assert pool.std == pytest.approx(rewards.std(ddof=1) if pool.count > 1 else 0.0, abs=1e-9)
        assert pool.num_positive == int((rewards > cfg.positive_threshold).sum())

        # The exit rule first holds (with a full group's worth of completions) in the exit round, never before.
        rounds_of = np.array([c.round for c in pool.completions], dtype=np.int64)
        pos = rewards > cfg.positive_threshold
        met = [bool((rounds_of <= r).sum() >= n and rule(int(pos[rounds_of <= r].sum()),
                                                         int((~pos[rounds_of <= r]).sum()), n))
               for r in range(1, len(asked_in) + 1)]
        first = met.index(True) + 1 if True in met else None
        assert pool.exit_round == first

    # Groups: exactly group_size when the pool allows it (the whole pool with selection="all"), drawn from the pool,
    # with the pool's statistics.
    for group in batch.groups:
        pool = batch.pools[group.prompt_id]
        if cfg.selection == "all":
            assert group.completions == pool.completions and pool.count > 0
        else:
            assert len(group.completions) == min(n, pool.count) > 0
        if pool.exited:
            assert len(group.completions) == (pool.count if cfg.selection == "all" else n) >= n
        else:
            assert cfg.unexited == "keep"
        pool_ids = {id(c) for c in pool.completions}
        assert all(id(c) in pool_ids for c in group.completions)
        assert len({id(c) for c in group.completions}) == len(group.completions)
        assert (group.pool_mean, group.pool_std, group.pool_count) == (pool.mean, pool.std, pool.count)
        assert group.exited == pool.exited
        if cfg.selection == "balanced" and pool.exited and cfg.exit_rule == "balanced":
            assert sum(r > cfg.positive_threshold for r in group.rewards) == n // 2

    # Advantages (and weights) are aligned with batch.completions() and use the configured baseline.
    completions = batch.completions()
    assert batch.advantages.shape == (len(completions),)
    assert np.all(np.isfinite(batch.advantages))
    expected = []
    for group in batch.groups:
        rewards = np.array(group.rewards)
        if cfg.advantage == "pool":
            mean, std, count = group.pool_mean, group.pool_std, group.pool_count
        else:
            mean, std, count = rewards.mean(), (rewards.std(ddof=1) if len(rewards) > 1 else 0.0), len(rewards)
        adv = rewards - mean
        if cfg.normalize_std:
            adv = adv / (std + cfg.epsilon)
        expected.extend(adv if count > 1 else np.zeros_like(rewards))
    np.testing.assert_allclose(batch.advantages, expected, rtol=1e-9, atol=1e-9)
    if cfg.importance_weights:
        assert batch.weights is not None and batch.weights.shape == (len(completions),)
        assert np.all(batch.weights > 0)
        if cfg.selection == "all":
            np.testing.assert_allclose(batch.weights, 1.0, rtol=1e-12)  # nothing was downsampled
    else:
        assert batch.weights is None

    # Metrics agree with the pools.
    assert batch.metrics["total_samples"] == sum(generator.drawn.values())
    assert batch.metrics["num_verifier_failures"] == sum(p.num_verifier_failures for p in batch.pools.values())
    assert math.isclose(batch.metrics["samples_per_prompt"], sum(generator.drawn.values()) / len(prompts))
    assert sum(s.num_exits for s in batch.rounds) == sum(p.exited for p in batch.pools.values())


@st.composite
def dynamic_scenarios(draw):
    group_size = draw(st.integers(2, 5))
    num_prompts = draw(st.integers(1, 25))
    # Each prompt is all-wrong, all-right or mixed; mixed prompts have signal.
    kinds = draw(st.lists(st.sampled_from(["0", "1", "mixed"]), min_size=num_prompts, max_size=num_prompts))
    script = {pid: ([0.0] * group_size if kind == "0" else [1.0] * group_size if kind == "1"
                    else [1.0] + [0.0] * (group_size - 1)) for pid, kind in enumerate(kinds)}
    config = DynamicSamplingConfig(batch_size=draw(st.integers(1, 8)), group_size=group_size,
                                   generation_batch_size=draw(st.integers(1, 8)),
                                   max_generation_batches=draw(st.integers(1, 5)), seed=draw(st.integers(0, 99)))
    return config, script, kinds


@settings(max_examples=80, deadline=None, suppress_health_check=QUIET)
@given(dynamic_scenarios())
def test_dynamic_sampler_invariants(scenario):
    cfg, script, kinds = scenario
    generator = ScriptedGenerator(script)
    batch = DynamicSampler(generator, ScriptedVerifier(), cfg).sample(make_prompts(list(script)))
    calls = requested_ids(generator)
    consumed = [pid for call in calls for pid in call]
    # Prompts are drawn in order, generation_batch_size at a time, each once, with group_size samples.
    assert consumed == list(range(len(consumed)))
    assert all(len(call) <= cfg.generation_batch_size for call in calls)
    assert all(num == cfg.group_size for call in generator.calls for _, num in call)
    assert len(calls) <= cfg.max_generation_batches
    signal_ids = [pid for pid in consumed if kinds[pid] == "mixed"]
    # Kept groups: the first batch_size signal prompts, in order, each a full group with signal.
    assert [g.prompt_id for g in batch.groups] == signal_ids[: cfg.batch_size]
    assert all(g.has_signal and len(g.completions) == cfg.group_size for g in batch.groups)
    filled = len(signal_ids) >= cfg.batch_size
    assert batch.metrics["batch_filled"] == float(filled)
    if not filled:  # it only stops short when out of prompts or out of generation batches
        assert len(consumed) == len(script) or len(calls) == cfg.max_generation_batches
    else:  # and it stops as soon as the batch is full
        assert len(signal_ids[: cfg.batch_size]) == cfg.batch_size
        last_call_signal = [pid for pid in calls[-1] if kinds[pid] == "mixed"]
        assert len(signal_ids) - len(last_call_signal) < cfg.batch_size
    assert batch.metrics["num_prompts_consumed"] == len(consumed) == batch.num_prompts
    assert batch.metrics["total_samples"] == cfg.group_size * len(consumed)
    assert batch.metrics["signal_fraction"] == pytest.approx(len(signal_ids) / len(consumed))
    # Group-local advantages: one positive in a group of n gets 1 - 1/n.
    expected = [r - 1.0 / cfg.group_size for g in batch.groups for r in g.rewards]
    np.testing.assert_allclose(batch.advantages, expected, atol=1e-12)
