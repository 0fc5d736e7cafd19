import math

import numpy as np
import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.core.allocation import ALLOCATION_RULES
from reinforce_ada.core.allocation.exit_probability import (
    beta_request,
    exit_needs,
    exit_probabilities,
    exit_probability,
    smallest_request,
)


def betabinom_pmf(j, k, a, b):
    log = (math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
           + math.lgamma(j + a) + math.lgamma(k - j + b) - math.lgamma(k + a + b)
           - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))
    return math.exp(log)


@pytest.mark.parametrize("a,b,need_pos,need_neg,min_more", [(1, 1, 2, 2, 4), (0.4, 2.0, 2, 1, 0), (3.5, 0.7, 0, 2, 3),
                                                            (2, 9, 1, 0, 0)])
def test_exit_probabilities_match_the_closed_form_beta_binomial(a, b, need_pos, need_neg, min_more):
    probs = exit_probabilities(a, b, need_pos, need_neg, 20, min_more)
    for k in range(21):
        expected = 0.0 if k < min_more else sum(betabinom_pmf(j, k, a, b) for j in range(need_pos, k - need_neg + 1))
        assert probs[k] == pytest.approx(expected, abs=1e-12)


def test_uniform_prior_closed_forms():
    # P(at least one positive in k) = 1 - 1/(k+1); P(both classes in k) = 1 - 2/(k+1) under p ~ U(0, 1).
    positive = exit_probabilities(1.0, 1.0, 1, 0, 10)
    mixed = exit_probabilities(1.0, 1.0, 1, 1, 10)
    for k in range(1, 11):
        assert positive[k] == pytest.approx(1 - 1 / (k + 1))
        assert mixed[k] == pytest.approx(max(0.0, 1 - 2 / (k + 1)))


def test_monte_carlo_agrees_with_the_recursion():
    rng = np.random.default_rng(0)
    p = rng.beta(2.0, 5.0, size=200_000)
    pos = rng.binomial(12, p)
    mc = np.mean((pos >= 2) & (12 - pos >= 2))
    assert exit_probability(2.0, 5.0, 2, 2, 12) == pytest.approx(mc, abs=0.005)


def test_smallest_request_is_the_first_k_reaching_the_target():
    for target in (0.1, 0.5, 0.9):
        k, prob = smallest_request(1.5, 3.0, 2, 2, 32, target, min_more=4)
        probs = exit_probabilities(1.5, 3.0, 2, 2, 32, 4)
        assert prob == probs[k] >= target
        assert all(p < target for p in probs[1:k])
    assert smallest_request(1.0, 1.0, 1, 1, 0, 0.5) == (0, 0.0)
    # unreachable: the whole budget and its probability
    k, prob = smallest_request(0.5, 50.0, 2, 2, 8, 0.5)
    assert k == 8 and prob == pytest.approx(exit_probabilities(0.5, 50.0, 2, 2, 8)[8])


def test_exit_needs_and_beta_request_follow_the_pool_state():
    assert exit_needs("balanced", 3, 0, 4) == (0, 2)
    assert exit_needs("balanced", 2, 2, 4) == (0, 0)
    assert exit_needs("positive", 1, 0, 4, min_positive=3) == (2, 0)
    with pytest.raises(ValueError, match="threshold form"):
        exit_needs("custom", 0, 0, 4)
    # Already two of each but only 4 of a 4-group: nothing needed, k=1 (min one more sample is never 0 here)
    k, prob = beta_request(4, 2, 2, 32, 4)
    assert k == 1 and prob == 1.0
    # a prompt that needs one more negative and has seen 5/5 positives asks for more than one sample
    k, _ = beta_request(5, 5, 0, 32, 4)
    assert k > 1
    # budget respected
    assert beta_request(30, 0, 30, 32, 4)[0] == 2


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="Beta parameters"):
        exit_probabilities(0.0, 1.0, 1, 1, 3)
    with pytest.raises(ValueError, match="target"):
        smallest_request(1.0, 1.0, 1, 1, 3, 0.0)


def test_registered_rules_are_usable_by_the_round_based_config():
    assert "beta-balanced" in ALLOCATION_RULES and "beta-positive" in ALLOCATION_RULES
    cfg = SamplerConfig(allocation="beta-balanced")
    rule = ALLOCATION_RULES.get(cfg.allocation)
    assert rule(0, 0, 0, 8, 32, 4) == beta_request(0, 0, 0, 32, 4)[0] == 7
