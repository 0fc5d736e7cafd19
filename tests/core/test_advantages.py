"""Group and pool advantages against hand-computed values, a loop cross-check, and the unbiased importance weights."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter

import numpy as np
import pytest

from reinforce_ada.core import (
    ADVANTAGES,
    compute_advantages,
    group_advantages,
    group_statistics,
    pool_advantages,
    pool_importance_weights,
)
from reinforce_ada.core.selection import balanced


# -- group baseline ---------------------------------------------------------------------------------------------------
def test_group_advantages_uneven_groups_string_ids():
    rewards = [1.0, 0.0, 2.0, 0.0, 1.0, 5.0]
    index = ["a", "a", "b", "b", "b", "c"]
    expected = [1.0 - (1.0 + 0.0) / 2, 0.0 - (1.0 + 0.0) / 2,
                2.0 - (2.0 + 0.0 + 1.0) / 3, 0.0 - (2.0 + 0.0 + 1.0) / 3, 1.0 - (2.0 + 0.0 + 1.0) / 3,
                0.0]  # a group of one has no baseline
    assert group_advantages(np.array(rewards), np.array(index)).tolist() == pytest.approx(expected)


def test_group_advantages_interleaved_ids_are_grouped_not_reshaped():
    rewards = np.array([1.0, 4.0, 3.0, 0.0])
    index = np.array([7, 2, 7, 2])
    assert group_advantages(rewards, index).tolist() == pytest.approx(
        [1.0 - (1.0 + 3.0) / 2, 4.0 - (4.0 + 0.0) / 2, 3.0 - (1.0 + 3.0) / 2, 0.0 - (4.0 + 0.0) / 2])


def test_group_advantages_std_normalisation_adds_epsilon_once():
    rewards = np.array([1.0, 0.0, 2.0, 0.0, 1.0, 5.0])
    index = np.array(["a", "a", "b", "b", "b", "c"])
    eps = 0.1
    std_a = math.sqrt(((1.0 - 0.5) ** 2 + (0.0 - 0.5) ** 2) / (2 - 1))
    std_b = math.sqrt(((2.0 - 1.0) ** 2 + (0.0 - 1.0) ** 2 + (1.0 - 1.0) ** 2) / (3 - 1))
    expected = [0.5 / (std_a + eps), -0.5 / (std_a + eps), 1.0 / (std_b + eps), -1.0 / (std_b + eps), 0.0, 0.0]
    got = group_advantages(rewards, index, normalize_std=True, epsilon=eps)
    assert got.tolist() == pytest.approx(expected)


def test_zero_variance_group_with_std_normalisation_is_zero():
    got = group_advantages(np.array([1.0, 1.0, 1.0]), np.array([0, 0, 0]), normalize_std=True, epsilon=1e-6)
    assert got.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("value", [0.0, 1.0, 0.1, -3.7, 1e300])
def test_a_zero_spread_group_is_zero_with_epsilon_0_and_the_others_are_z_scores(value):
    """epsilon=0 is accepted, so a group whose rewards are all equal must not be 0 / 0: its advantage is 0 (what GRPO's
    positive epsilon gives it in TRL and verl), in both baselines; a group with spread gets its exact z-score."""
    rewards = np.array([value] * 3 + [0.0, 1.0, 0.0])
    index = np.array([0, 0, 0, 1, 1, 1])
    std_1 = math.sqrt((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 2)
    expected = [0.0] * 3 + [(-1 / 3) / std_1, (2 / 3) / std_1, (-1 / 3) / std_1]
    got = group_advantages(rewards, index, normalize_std=True, epsilon=0.0)
    assert np.isfinite(got).all() and got.tolist() == pytest.approx(expected, abs=0, rel=1e-12)
    mean, std, count = group_statistics(rewards, index)
    got = pool_advantages(rewards, index, pool_mean=mean, pool_std=std, pool_count=count, normalize_std=True,
                          epsilon=0.0)
    assert np.isfinite(got).all() and got.tolist() == pytest.approx(expected, abs=0, rel=1e-12)


# -- pool baseline ---------------------------------------------------------------------------------------------------
def test_pool_advantages_use_per_sample_pool_statistics():
    # Prompt 0: pool of 16 with mean 2/16; prompt 1: pool of 8, non-binary rewards, mean 0.3; prompt 2: a pool of one.
    rewards = np.array([1.0, 0.0, 0.75, 0.0, 4.0])
    index = np.array([0, 0, 1, 1, 2])
    pool_mean = np.array([2 / 16, 2 / 16, 0.3, 0.3, 4.0])
    pool_std = np.array([0.35, 0.35, 0.2, 0.2, 0.0])
    pool_count = np.array([16, 16, 8, 8, 1])
    got = pool_advantages(rewards, index, pool_mean=pool_mean, pool_std=pool_std, pool_count=pool_count)
    assert got.tolist() == pytest.approx([1.0 - 2 / 16, 0.0 - 2 / 16, 0.75 - 0.3, 0.0 - 0.3, 0.0])
    got = pool_advantages(rewards, index, pool_mean=pool_mean, pool_std=pool_std, pool_count=pool_count,
                          normalize_std=True, epsilon=0.05)
    assert got.tolist() == pytest.approx([(1.0 - 2 / 16) / (0.35 + 0.05), (0.0 - 2 / 16) / (0.35 + 0.05),
                                          (0.75 - 0.3) / (0.2 + 0.05), (0.0 - 0.3) / (0.2 + 0.05), 0.0])


def test_compute_advantages_dispatch():
    assert ADVANTAGES.names() == ["group", "pool"]
    rewards, index = [1.0, 0.0], ["x", "x"]
    assert compute_advantages("group", rewards, index).tolist() == [0.5, -0.5]
    pool = dict(pool_mean=np.array([0.25, 0.25]), pool_std=np.zeros(2), pool_count=np.array([4, 4]))
    assert compute_advantages("pool", rewards, index, **pool).tolist() == [0.75, -0.25]
    assert compute_advantages("group", rewards, index, **pool).tolist() == [0.5, -0.5]  # pool stats ignored
    assert compute_advantages(lambda r, i, **kw: r * 10, rewards, index).tolist() == [10.0, 0.0]
    with pytest.raises(ValueError, match="unknown advantage baseline 'rloo'"):
        compute_advantages("rloo", rewards, index)


def test_group_statistics_counts():
    mean, std, count = group_statistics(np.array([3.0, 1.0, 2.0]), np.array(["q", "p", "q"]))
    assert mean.tolist() == [(3.0 + 2.0) / 2, 1.0, (3.0 + 2.0) / 2]
    assert std.tolist() == pytest.approx([math.sqrt(0.5), 0.0, math.sqrt(0.5)])
    assert count.tolist() == [2, 1, 2]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("normalize_std", [False, True])
def test_loop_matches_vectorised_on_random_uneven_groups(seed, normalize_std):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=12)
    ids = [f"prompt-{i}" for i in range(len(sizes))]
    index = np.array([pid for pid, size in zip(ids, sizes) for _ in range(size)])
    rewards = rng.normal(size=len(index)) * rng.choice([0.0, 1.0, 3.0], size=len(index))
    order = rng.permutation(len(index))  # interleave the groups
    index, rewards = index[order], rewards[order]
    eps = 1e-3

    expected = []
    for i, pid in enumerate(index):
        members = [float(r) for r, j in zip(rewards, index) if j == pid]
        if len(members) == 1:
            expected.append(0.0)
            continue
        adv = rewards[i] - statistics.fmean(members)
        if normalize_std:
            adv /= statistics.stdev(members) + eps
        expected.append(adv)
    got = group_advantages(rewards, index, normalize_std=normalize_std, epsilon=eps)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)

    # The pool baseline with per-sample statistics of the same groups gives the same numbers.
    mean, std, count = group_statistics(rewards, index)
    got_pool = pool_advantages(rewards, index, pool_mean=mean, pool_std=std, pool_count=count,
                               normalize_std=normalize_std, epsilon=eps)
    np.testing.assert_allclose(got_pool, expected, rtol=1e-10, atol=1e-10)


# -- the unbiased importance-weight variant --------------------------------------------------------------------------
@pytest.mark.parametrize("num_pos, num_neg, group_size", [(2, 5, 4), (1, 7, 4), (5, 3, 6), (6, 10, 4), (3, 3, 5)])
def test_importance_weighted_group_estimate_is_unbiased_for_the_pool_mean(num_pos, num_neg, group_size):
    pool_is_positive = np.array([True] * num_pos + [False] * num_neg)
    pool_size = num_pos + num_neg
    f = np.random.default_rng(num_pos * 100 + num_neg).normal(size=pool_size) * 3.0 + 1.0  # arbitrary per completion
    # The class counts the balanced rule keeps from this pool.
    kept = balanced(pool_is_positive, group_size, np.random.default_rng(0))
    k_pos = int(pool_is_positive[kept].sum())
    k_neg = len(kept) - k_pos
    assert len(kept) == group_size and k_pos > 0 and k_neg > 0

    estimates, unweighted = [], []
    pos_idx, neg_idx = np.flatnonzero(pool_is_positive), np.flatnonzero(~pool_is_positive)
    for pos in itertools.combinations(pos_idx, k_pos):  # every within-class subset, each equally likely
        for neg in itertools.combinations(neg_idx, k_neg):
            group = np.array(pos + neg)
            is_pos = pool_is_positive[group]
            w = pool_importance_weights(is_pos, np.zeros(len(group)), np.full(len(group), num_pos),
                                        np.full(len(group), pool_size))
            estimates.append(np.mean(w * f[group]))
            unweighted.append(np.mean(f[group]))
    assert len(estimates) == math.comb(num_pos, k_pos) * math.comb(num_neg, k_neg)
    assert np.mean(estimates) == pytest.approx(f.mean(), rel=1e-10, abs=1e-12)
    if num_pos * group_size != k_pos * pool_size:  # re-balanced: the plain group mean is biased
        assert abs(np.mean(unweighted) - f.mean()) > 1e-6


def test_importance_weights_hand_values_for_two_prompts():
    # Prompt "a": pool 2 pos / 14 neg, kept 2 + 2. Prompt "b": pool 3 pos / 1 neg, kept 1 pos + 1 neg (group of 2).
    is_positive = np.array([True, True, False, False, True, False])
    index = np.array(["a", "a", "a", "a", "b", "b"])
    w = pool_importance_weights(is_positive, index, np.array([2, 2, 2, 2, 3, 3]), np.array([16, 16, 16, 16, 4, 4]))
    assert w.tolist() == pytest.approx([4 * 2 / (16 * 2), 4 * 2 / (16 * 2), 4 * 14 / (16 * 2), 4 * 14 / (16 * 2),
                                        2 * 3 / (4 * 1), 2 * 1 / (4 * 1)])


def test_balanced_selection_is_uniform_within_each_class():
    # The unbiasedness argument needs every within-class subset to be equally likely.
    is_positive = np.array([True, False, True, False, False, False])  # 2 pos, 4 neg; n=4 keeps both pos, 2 of 4 neg
    rng = np.random.default_rng(1234)
    counts = Counter(tuple(balanced(is_positive, 4, rng).tolist()) for _ in range(3000))
    assert len(counts) == math.comb(4, 2)
    assert all(tuple(k[:2]) == (0, 2) for k in counts)
    assert min(counts.values()) > 3000 / 6 * 0.8 and max(counts.values()) < 3000 / 6 * 1.2


@pytest.mark.fault("reward of 1e300 with --sampler.normalize-std",
                   "exact normalised advantages (statistics computed on r / max|r|), never inf std and all-zero advantages")
def test_normalised_advantages_are_right_for_rewards_near_the_float_limit():
    from reinforce_ada.types import Completion, PromptPool

    big = np.array([1e300, -1e300, 1e300, -1e300, 3.0, 1.0])
    index = np.array([0, 0, 0, 0, 1, 1])
    adv = compute_advantages("group", big, index, normalize_std=True)
    # group 0: mean 0, sample std = 1e300 * sqrt(4/3); group 1: mean 2, std sqrt(2)
    expected = np.array([math.sqrt(3 / 4)] * 4 + [1, 1]) * np.array([1, -1, 1, -1, 1, -1])
    expected[4:] /= math.sqrt(2) + 1e-6  # eps is negligible for group 0
    np.testing.assert_allclose(adv, expected, rtol=1e-12)
    pool = PromptPool(prompt_id="p")
    for r in big[:4]:
        pool.add(Completion(prompt_id="p", text="", reward=float(r)))
    assert math.isfinite(pool.std) and pool.std == pytest.approx(1e300 * math.sqrt(4 / 3), rel=1e-12)
    n = len(big[:4])
    pooled = compute_advantages("pool", big[:4], index[:4], pool_mean=np.full(n, pool.mean),
                                pool_std=np.full(n, pool.std), pool_count=np.full(n, pool.count), normalize_std=True)
    np.testing.assert_allclose(pooled, expected[:4], rtol=1e-12)
