"""Est's allocation (arXiv 2510.04996v3 Alg. 1: counts proportional to the sample weights, clipped, summing to the
budget), with arithmetic expectations, and its invariants on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reinforce_ada.core.allocation import allocate_samples, allocation_summary
from reinforce_ada.core.objectives import split_weights


def test_allocation_proportional_when_nothing_clips():
    # 1/sqrt(p) for p = 1/16, 1/4, 1: weights 4, 2, 1 -> 7 parts of 28 samples
    w, _ = split_weights("log", np.array([1 / 16, 1 / 4, 1.0]), sample_share=0.5, eps=0.0)
    assert allocate_samples(w, 28, 1, 32).tolist() == [16, 8, 4]


def test_allocation_clips_and_refills():
    # 100:1:1 of 12 with at most 6 each: the first is clipped at 6, the other two share the remaining 6
    assert allocate_samples(np.array([100.0, 1.0, 1.0]), 12, 2, 6).tolist() == [6, 3, 3]
    # at least 2 each: 1000:1:1 of 12 -> 2 + 2 for the small ones, 8 for the large one
    assert allocate_samples(np.array([1000.0, 1.0, 1.0]), 12, 2, 32).tolist() == [8, 2, 2]


def test_allocation_largest_remainder_rounding():
    # 10 samples by 1:1:1 -> 3.33 each; one extra to the first (ties: earlier prompt)
    assert allocate_samples(np.array([1.0, 1.0, 1.0]), 10, 1, 10).tolist() == [4, 3, 3]
    # 2:1 of 10 -> 6.67 and 3.33: the larger remainder rounds up
    assert allocate_samples(np.array([2.0, 1.0]), 10, 1, 10).tolist() == [7, 3]


def test_allocation_of_a_batch_of_one_is_the_budget():
    assert allocate_samples(np.array([0.3]), 8, 2, 32).tolist() == [8]
    assert allocate_samples(np.array([0.3]), 40, 2, 32).tolist() == [32]  # beyond N_max: the bound
    assert allocate_samples(np.array([0.3]), 1, 2, 32).tolist() == [2]  # below N_min: the bound


def test_allocation_outside_the_feasible_range_gives_the_bounds():
    assert allocate_samples(np.array([5.0, 1.0]), 100, 2, 8).tolist() == [8, 8]
    assert allocate_samples(np.array([5.0, 1.0]), 3, 2, 8).tolist() == [2, 2]


def test_allocation_without_upper_clip_and_zero_weights():
    assert allocate_samples(np.array([3.0, 1.0]), 16, 1, None).tolist() == [12, 4]
    assert allocate_samples(np.zeros(3), 10, 2, 8).tolist() == [4, 3, 3]  # nothing to be proportional to: even
    assert allocate_samples(np.array([0.0, 1.0]), 10, 2, 32).tolist() == [2, 8]  # a zero weight gets N_min


def test_allocation_refuses_bad_weights():
    for bad in ([], [1.0, float("nan")], [1.0, -1.0], [float("inf")]):
        with pytest.raises(ValueError):
            allocate_samples(np.array(bad), 8, 1, 8)
    with pytest.raises(ValueError):
        allocate_samples(np.array([1.0]), 8, 4, 2)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), st.integers(1, 4), st.integers(4, 40),
       st.data())
def test_allocation_invariants(p_hat, lo, hi, data):
    """For any pass-rate estimates: the counts sum to the budget whenever it is feasible, stay within the clip
    bounds, and are monotone -- a prompt believed harder never gets fewer samples."""
    p = np.array(p_hat)
    w, _ = split_weights("log", p, sample_share=0.5, eps=1e-6)
    total = data.draw(st.integers(len(p) * lo, len(p) * hi))
    counts = allocate_samples(w, total, lo, hi)
    assert counts.sum() == total
    assert counts.min() >= lo and counts.max() <= hi
    order = np.argsort(-w, kind="stable")
    assert np.all(np.diff(counts[order]) <= 0), (w[order], counts[order])
    same = np.isclose(w[:, None], w[None, :], rtol=0, atol=0)  # ties: counts differ by at most one
    assert np.all(np.abs(counts[:, None] - counts[None, :])[same] <= 1)


def test_on_known_pass_rates_est_bets_on_hard_prompts():
    """With pass rates known exactly -- Beta(0.4, 2), 512 prompts, 8 samples per prompt, N in [2, 32] -- the 1/sqrt(p)
    rule spends most of the budget on prompts below p = 0.1 and expects fewer groups with signal than GRPO-n8's even
    split: an impossible prompt can take N_max every visit."""
    p = np.random.default_rng(0).beta(0.4, 2.0, 512)
    w, _ = split_weights("log", p, sample_share=0.5, eps=1e-6)
    counts = allocate_samples(w, 8 * 512, 2, 32)
    assert counts.sum() == 8 * 512
    share_hard = allocation_summary(counts, p)["budget_share_hard"]
    signal = lambda n: float(np.mean(1 - p ** n - (1 - p) ** n))  # noqa: E731 -- P(a pool of n has both classes)
    assert 0.80 < share_hard < 0.92
    assert signal(counts) < signal(np.full(512, 8)) - 0.15
    assert signal(np.full(512, 8)) == pytest.approx(0.50, abs=0.03)


def test_allocation_summary():
    summary = allocation_summary(np.array([10, 4, 2]), np.array([0.05, 0.3, 0.8]))
    assert (summary["alloc_min"], summary["alloc_max"], summary["alloc_total"]) == (2.0, 10.0, 16.0)
    assert summary["alloc_mean"] == pytest.approx(16 / 3)
    assert summary["budget_share_hard"] == pytest.approx(10 / 16)
    assert summary["p_hat_q50"] == pytest.approx(0.3)
