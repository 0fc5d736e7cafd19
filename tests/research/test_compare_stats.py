"""The exact Student-t quantile of research.compare.stats against published tables (and scipy where installed)."""

import math

import pytest

from reinforce_ada.research.compare.stats import incomplete_beta, t975, t_cdf, t_interval, t_quantile

# Student's t, two-sided 95% (the 0.975 quantile), as printed in standard tables (e.g. NIST/SEMATECH e-Handbook of
# Statistical Methods, 1.3.6.7.2, "Critical values of the Student's t distribution"), three decimals.
PUBLISHED_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
                  10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101,
                  19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052,
                  28: 2.048, 29: 2.045, 30: 2.042, 31: 2.040, 32: 2.037, 33: 2.035, 34: 2.032, 35: 2.030, 36: 2.028,
                  37: 2.026, 38: 2.024, 39: 2.023, 40: 2.021, 50: 2.009, 60: 2.000, 80: 1.990, 100: 1.984,
                  120: 1.980, math.inf: 1.960}
# The one-sided 95% and 99.5% columns of the same tables.
PUBLISHED = {(0.95, 1): 6.314, (0.95, 5): 2.015, (0.95, 10): 1.812, (0.95, 30): 1.697, (0.95, 100): 1.660,
             (0.995, 1): 63.657, (0.995, 4): 4.604, (0.995, 10): 3.169, (0.995, 40): 2.704, (0.90, 3): 1.638,
             (0.90, 20): 1.325, (0.90, math.inf): 1.282}


@pytest.mark.parametrize("df", list(PUBLISHED_T975))
def test_t975_matches_the_published_table(df):
    assert t975(df) == pytest.approx(PUBLISHED_T975[df], abs=0.0005)


@pytest.mark.parametrize("p, df", list(PUBLISHED))
def test_other_quantiles_match_the_published_table(p, df):
    assert t_quantile(p, df) == pytest.approx(PUBLISHED[(p, df)], abs=0.0005)
    assert t_quantile(1 - p, df) == pytest.approx(-PUBLISHED[(p, df)], abs=0.0005)  # symmetric


def test_t975_at_32_degrees_of_freedom_is_not_the_normal_quantile():
    assert abs(t975(32) - 2.037) < 0.002 and t975(32) - 1.96 > 0.07


def test_t975_falls_with_df_towards_the_normal():
    values = [t975(df) for df in range(1, 400)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert values[-1] > t975(math.inf) == pytest.approx(1.959964, abs=1e-6)


def test_closed_forms_and_the_distribution_function():
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-12)  # Cauchy
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-12)
    for df in (1, 3, 7.5, 32, 250):
        for p in (0.55, 0.8, 0.975, 0.999):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-12)
    # I_x(1, b) = 1 - (1 - x)^b and I_x(a, 1) = x^a
    assert incomplete_beta(1.0, 3.5, 0.3) == pytest.approx(1 - 0.7 ** 3.5, rel=1e-12)
    assert incomplete_beta(2.5, 1.0, 0.6) == pytest.approx(0.6 ** 2.5, rel=1e-12)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_interval_uses_the_exact_quantile():
    values = [0.1 * i for i in range(33)]  # 33 values: df 32
    mean, half = t_interval(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 32)
    assert half == pytest.approx(t975(32) * sd / math.sqrt(33), rel=1e-12)
    assert half / (sd / math.sqrt(33)) == pytest.approx(2.037, abs=0.001)


def test_agrees_with_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4.5, 9, 29, 30, 31, 32, 39, 60, 500, 1000):
        for p in (0.6, 0.9, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(float(stats.t.ppf(p, df)), rel=1e-10)
