"""The verdict of a comparison in words: for each strategy against the baseline at equal tokens, steps and seconds,
*ahead*, *behind* or *inconclusive* by the 95% interval of its paired differences, and for an inconclusive one about
how many seeds would resolve the difference observed. In words an inconclusive call is "no resolved difference" with
the range its interval spans (never "level", which would read as "shown equal").

**The rule.** Per seed both finished, d_i = the strategy's held-out accuracy minus the baseline's at the same budget
(:mod:`.report`). With n seeds, mean m and standard deviation s of the d_i, the two-sided 95% Student-t interval is
m ± t_{0.975, n-1} s / √n. *ahead*: the interval lies above 0; *behind*: below 0; *inconclusive*: it holds 0 (or one
seed gives no interval).

**The power rule** (:func:`seeds_needed`): if the true difference and spread were those observed, a paired t-test at
5% (two-sided) detects the difference with 80% power at about the smallest n with
(t_{0.975, n-1} + z_{0.80}) s / √n <= |m|, z_{0.80} = 0.8416 (the normal approximation to the noncentral t;
t_{0.975, n-1} exact at every n, :func:`~reinforce_ada.research.compare.stats.t975`). It is a
planning figure, not a promise: m and s are themselves estimates from few seeds, and the n needed grows as the square
of s/|m|. No number of seeds resolves an observed difference of exactly 0.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from reinforce_ada.research.compare.stats import t975, t_interval

__all__ = ["AXES_IN_WORDS", "MAX_SEEDS", "Z80", "call", "seeds_needed"]

Z80 = NormalDist().inv_cdf(0.80)
"""The 80% quantile of the standard normal (0.8416): the power term of :func:`seeds_needed`."""
MAX_SEEDS = 1000
"""Past this many seeds :func:`seeds_needed` stops looking (the difference is negligible against the spread)."""
AXES_IN_WORDS = {"at_tokens": "at equal tokens", "at_steps": "at equal steps", "at_seconds": "at equal seconds"}
"""The budgets a verdict is given at, in the order it gives them."""


def seeds_needed(mean: float, sd: float) -> int | None:
    """The smallest n >= 2 with (t_{0.975, n-1} + z_{0.80}) * sd / √n <= |mean| (see the module docstring); None
    when no n up to :data:`MAX_SEEDS` does (a mean of 0 never does).

    >>> seeds_needed(0.05, 0.05), seeds_needed(0.01, 0.05), seeds_needed(0.0, 0.05)
    (10, 198, None)
    """
    if not (math.isfinite(mean) and math.isfinite(sd)) or mean == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, MAX_SEEDS + 1):
        if (t975(n - 1) + Z80) * sd / math.sqrt(n) <= abs(mean):
            return n
    return None


def call(differences: Sequence[float]) -> dict[str, Any]:
    """The verdict of paired differences: ``{"call": "ahead" | "behind" | "inconclusive", "num_seeds", "mean",
    "half_width", "sd", "seeds_needed", "reason"}`` (``seeds_needed`` only when inconclusive; ``reason`` says why an
    inconclusive call is one, None otherwise; numbers not defined are None).

    >>> call([0.10, 0.12, 0.08])["call"], call([-0.1, 0.1, 0.0])["call"]
    ('ahead', 'inconclusive')
    """
    n = len(differences)
    out: dict[str, Any] = {"call": "inconclusive", "num_seeds": n, "mean": None, "half_width": None, "sd": None,
                           "seeds_needed": None, "reason": None}
    if n == 0:
        out["reason"] = "no seed that both it and the baseline finished"
        return out
    mean, half = t_interval(differences)
    out["mean"] = mean
    if n == 1:
        out["reason"] = "one paired seed gives no interval"
        return out
    sd = float(np.std(differences, ddof=1))
    out.update(half_width=half, sd=sd)
    if half == 0 and mean != 0:  # [m, m]: no spread seen, so no interval -- not a resolved difference
        out["reason"] = (f"every one of the {n} paired seeds gave the same difference, an interval of zero width that "
                         f"says nothing of the spread: it needs more seeds")
        return out
    if mean - half > 0 or mean + half < 0:
        out["call"] = "ahead" if mean > 0 else "behind"
        return out
    out["seeds_needed"] = seeds_needed(mean, sd)
    if mean == 0:
        out["reason"] = "no difference observed: no number of seeds resolves it"
    elif out["seeds_needed"] is None:
        out["reason"] = f"the difference is negligible against the spread: more than {MAX_SEEDS} seeds"
    else:
        out["reason"] = (f"the interval holds 0; about {out['seeds_needed']} seeds would resolve a difference of "
                         f"{mean:+.3f} at a spread (sd) of {sd:.3f}")
    return out


def interval_words(mean: float, half: float | None) -> str:
    """An interval as the range it spans, ``"-0.036 to +0.082"`` (the mean alone when there is no half-width, or one
    of zero width: :func:`call` gives its reason)."""
    if half is None or math.isnan(half) or (half == 0 and mean != 0):
        return f"{mean:+.3f}"
    return f"{mean - half:+.3f} to {mean + half:+.3f}"


def call_words(c: dict[str, Any]) -> str:
    """A call in words, as the verdict paragraph gives it: ``**ahead** (+0.038 to +0.150)``, ``**behind** (...)``, or
    ``**no resolved difference** (-0.036 to +0.082; about 38 seeds would resolve +0.023)`` -- never "level": an
    interval that holds 0 shows that no difference was resolved, not that there is none."""
    if c["mean"] is None:
        return f"**no resolved difference** ({c['reason']})"
    interval = interval_words(c["mean"], c["half_width"])
    if c["call"] != "inconclusive":
        return f"**{c['call']}** ({interval})"
    if c["half_width"] is None or (c["half_width"] == 0 and c["mean"] != 0):
        return f"**no resolved difference** ({interval}; {c['reason']})"
    if c["seeds_needed"] is not None:
        return (f"**no resolved difference** ({interval}; about {c['seeds_needed']} seeds would resolve "
                f"{c['mean']:+.3f})")
    return f"**no resolved difference** ({interval}; {c['reason']})"


def in_words(strategy: str, calls: dict[str, dict[str, Any]]) -> str:
    """One strategy's verdict line: each budget's call with the range of its 95% interval (and the seeds an
    unresolved one needs)."""
    parts = [f"{words} {call_words(calls[axis])}" for axis, words in AXES_IN_WORDS.items() if axis in calls]
    return f"- **{strategy}**: " + "; ".join(parts) + "."
