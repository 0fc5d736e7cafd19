"""The streaming sampler's posterior maths, as pure functions of the Beta posterior and the pool's counts."""

import pytest

from reinforce_ada.core.allocation.exit_probability import other_class_rate, samples_before_give_up, signal_rate


def test_signal_rate_by_hand():
    # n = 1, uniform prior: one sample never has both classes; a second one (drawn only while one class is seen,
    # probability 1) has both with probability 1/3, so the best rate is (1/3) / 2
    assert signal_rate(1.0, 1.0, 1, 1) == 0.0
    assert signal_rate(1.0, 1.0, 1, 2) == pytest.approx((1 - 1 / 3 - 1 / 3) / 2)
    assert signal_rate(1.0, 1.0, 4, 0) == 0.0  # no budget, no signal


def test_other_class_rate_by_hand():
    assert other_class_rate(1.0 + 2, 1.0, 2, 0) == pytest.approx(1 / 4)  # two positives: P(negative) = 1 / (3 + 1)
    assert other_class_rate(1.0, 1.0 + 3, 0, 3) == pytest.approx(1 / 5)
    assert other_class_rate(2.0, 2.0, 1, 1) == 1.0


def test_samples_before_give_up_by_hand():
    # three negatives on a uniform prior: after j more negatives P(positive) = 1 / (5 + j) >= 0.05 while j <= 15
    assert samples_before_give_up(1.0, 1.0 + 3, 0, 3, 128, 0.05) == 16
    assert samples_before_give_up(1.0, 4.0, 0, 3, 10, 0.05) == 10  # capped by the budget
    assert samples_before_give_up(1.0, 4.0, 0, 3, 10, 0.0) == 10  # no price: the whole budget
    assert samples_before_give_up(2.0, 2.0, 1, 1, 10, 0.5) == 10  # both classes seen: nothing to give up on
    assert samples_before_give_up(1.0, 100.0, 0, 99, 10, 0.5) == 1  # always at least one
