"""The statistics of a strategy comparison (``reinforce-ada compare``, benchmarks/learning*.py): Student-t intervals
over seeds, a run's accuracy read at a step, token or second budget, and the steps a strategy needs to reach the
baseline's final accuracy, with a paired bootstrap over seeds.

Every function takes plain numbers (a run's curve is two aligned sequences, e.g. steps and accuracies), so the same
code serves the command and the benchmark scripts.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["first_crossing", "fmt", "interpolate", "mean_curve", "steps_ratio", "t975", "t_interval"]

_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 25: 2.060, 30: 2.042}
"""The 97.5% quantile of Student's t by degrees of freedom (between listed ones: the next lower one's, a little
wider; from 30 on: the normal's 1.96)."""


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the two-sided 95% Student-t interval); half-width nan for fewer than two values.

    >>> mean, half = t_interval([1.0, 2.0, 3.0])
    >>> mean, round(half, 4)  # 4.303 * 1 / sqrt(3)
    (2.0, 2.4843)
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()) if len(values) else math.nan, math.nan
    return float(values.mean()), float(t975(len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (from :data:`_T975`; 1.96 from 30 on)."""
    return _T975.get(df) or (_T975[max(k for k in _T975 if k <= df)] if df < 30 else 1.96)


def fmt(values: Sequence[float], digits: int = 3, scale: float = 1.0) -> str:
    """``"mean ± half-width"`` of the 95% t-interval (just the mean for one value)."""
    mean, half = t_interval(np.asarray(values, dtype=float) * scale)
    return f"{mean:.{digits}f} ± {half:.{digits}f}" if not math.isnan(half) else f"{mean:.{digits}f}"


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """``ys`` read at ``x`` by linear interpolation on the increasing ``xs`` (a run's accuracy after ``x`` steps,
    tokens or seconds); past the last point, the last value (a run that used less than the budget counts at its
    final accuracy).

    >>> interpolate([0, 100, 300], [0.2, 0.4, 0.5], 200), interpolate([0, 100, 300], [0.2, 0.4, 0.5], 1000)
    (0.45, 0.5)
    """
    return float(np.interp(x, xs, ys))


def first_crossing(steps: Sequence[float], accuracy: Sequence[float], target: float) -> float:
    """First step at which a curve reaches ``target`` (linear interpolation between evaluations); inf if never.

    >>> first_crossing([0, 4, 8], [0.2, 0.4, 0.5], 0.45), first_crossing([0, 4, 8], [0.2, 0.4, 0.5], 0.6)
    (6.0, inf)
    """
    for i, value in enumerate(accuracy):
        if value >= target:
            if i == 0:
                return float(steps[0])
            s0, s1, a0, a1 = steps[i - 1], steps[i], accuracy[i - 1], accuracy[i]
            return float(s0 + (s1 - s0) * (target - a0) / (a1 - a0))
    return math.inf


def mean_curve(curves: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[list[float], np.ndarray]:
    """The mean of several ``(steps, accuracy)`` curves evaluated at the same steps: (steps, mean accuracy)."""
    return list(curves[0][0]), np.mean([list(acc) for _, acc in curves], axis=0)


def steps_ratio(curves: Sequence[tuple[Sequence[float], Sequence[float]]],
                baseline: Sequence[tuple[Sequence[float], Sequence[float]]], num_boot: int = 2000,
                seed: int = 0) -> dict:
    """Steps for the mean curve of ``curves`` to reach the baseline's mean final accuracy, against the baseline's
    own, with a paired bootstrap over seeds (the two lists of ``(steps, accuracy)`` curves are aligned by seed). Each
    curve is read on its own steps, so a strategy may run for more (or fewer) steps than the baseline.

    Returns ``steps``, ``baseline_steps``, ``ratio`` and the bootstrap's 2.5% / 97.5% percentiles ``ratio_low`` /
    ``ratio_high`` (inf: some resamples never reach it; nan: the baseline never improved on its start).
    """
    def ratio(idx):
        base_steps, base = mean_curve([baseline[i] for i in idx])
        my_steps, mine = mean_curve([curves[i] for i in idx])
        target = base[-1]
        return first_crossing(my_steps, mine, target), first_crossing(base_steps, base, target)

    own, base_steps = ratio(range(len(baseline)))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(num_boot):
        mine, theirs = ratio(rng.integers(0, len(baseline), len(baseline)))
        boots.append(mine / theirs if theirs > 0 else math.nan)
    boots = [b for b in boots if not math.isnan(b)]  # resamples where the baseline never improved on its start
    num_boot = len(boots)
    if not boots:
        return {"steps": own, "baseline_steps": base_steps, "ratio": math.nan, "ratio_low": math.nan,
                "ratio_high": math.nan}
    boots.sort()  # percentiles by rank, so that "never reached" (inf) counts as the largest value
    low, high = boots[int(0.025 * num_boot)], boots[min(num_boot - 1, int(0.975 * num_boot))]
    return {"steps": own, "baseline_steps": base_steps, "ratio": own / base_steps if base_steps > 0 else math.nan,
            "ratio_low": float(low), "ratio_high": float(high)}
