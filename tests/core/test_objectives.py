"""The non-linear objectives' weights (arXiv 2510.04996v3 Sec. 3, App. B), with arithmetic expectations. Est's
allocation of samples by these weights: tests/core/test_proportional_allocation.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reinforce_ada.core.objectives import check_sample_share, grad_weights, parse_objective, split_weights


# -- the weights ------------------------------------------------------------------------------------------------------
def test_each_objective_weight_is_its_derivative():
    p = np.array([0.1, 0.25, 0.5, 1.0])
    assert parse_objective("linear")(p).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert parse_objective("log")(p).tolist() == pytest.approx([10.0, 4.0, 2.0, 1.0])
    # f = p^0.5: f' = 0.5 p^-0.5
    assert parse_objective("power:0.5")(p).tolist() == pytest.approx([0.5 / math.sqrt(x) for x in p])
    assert parse_objective("power:1")(p).tolist() == pytest.approx([1.0] * 4)  # p^1 is the linear objective


@pytest.mark.parametrize("bad", ["logg", "power:", "power:-1", "power:0", "power:x", "power:nan"])
def test_an_unknown_objective_is_named(bad):
    with pytest.raises(ValueError, match="objective"):
        parse_objective(bad)


def test_the_split_multiplies_back_to_the_weight():
    p = np.array([0.02, 0.3, 0.9])
    for share in (0.0, 0.25, 0.5, 1.0):
        w_sample, w_grad = split_weights("log", p, sample_share=share, eps=0.0)
        assert (w_sample * w_grad).tolist() == pytest.approx((1 / p).tolist())
        assert w_sample.tolist() == pytest.approx((1 / p) ** share)
    # Est's setting: 1/sqrt(p) each
    w_sample, w_grad = split_weights("log", np.array([0.04]), sample_share=0.5, eps=0.0)
    assert (float(w_sample[0]), float(w_grad[0])) == pytest.approx((5.0, 5.0))


def test_the_variance_optimal_split_is_appendix_b():
    p = np.array([0.2, 0.5])
    w_sample, w_grad = split_weights("log", p, sample_share="variance-optimal", eps=0.0)
    assert w_sample.tolist() == pytest.approx([math.sqrt(0.8 / 0.2), 1.0])  # n ~ sqrt((1-p)/p)
    assert w_grad.tolist() == pytest.approx([1 / math.sqrt(0.16), 2.0])  # A = (r - p) / sqrt(p (1 - p))
    assert (w_sample * w_grad).tolist() == pytest.approx((1 / p).tolist())
    with pytest.raises(ValueError, match="log objective"):
        check_sample_share("linear", "variance-optimal")
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="sample_share"):
            check_sample_share("log", bad)


def test_eps_keeps_the_weight_finite_at_zero():
    w_sample, w_grad = split_weights("log", np.array([0.0]), sample_share=0.5, eps=1e-6)
    assert float(w_sample[0]) == pytest.approx(1000.0) and float(w_grad[0]) == pytest.approx(1000.0)
    assert np.all(np.isfinite(split_weights("log", np.array([0.0, 1.0]), sample_share="variance-optimal",
                                            eps=1e-6)[1]))


def test_the_gradient_weight_is_capped():
    # one success in 32 samples under log with the whole weight in the gradient: 32, capped at 8
    weights = grad_weights("log", np.array([1 / 32, 0.5, 1.0]), sample_share=0.0, eps=0.0, max_grad_weight=8.0)
    assert weights.tolist() == pytest.approx([8.0, 2.0, 1.0])
    uncapped = grad_weights("log", np.array([1 / 32]), sample_share=0.0, eps=0.0, max_grad_weight=None)
    assert float(uncapped[0]) == pytest.approx(32.0)
    assert grad_weights("linear", np.array([0.01, 0.7]), sample_share=0.0, eps=1e-6,
                        max_grad_weight=8.0).tolist() == [1.0, 1.0]
