"""Est's allocation (arXiv 2510.04996v3, Alg. 1): integer sample counts proportional to per-prompt weights, within
clip bounds, summing exactly to the step's budget -- water-filling on the bounds, then largest-remainder rounding --
and the step metrics that say where such an allocation went.

The weights come from :mod:`reinforce_ada.core.objectives` (``w_sample``: ``1 / sqrt(p_hat)`` for Est's log objective
at ``sample_share = 1/2``); this module only turns them into counts. Pure: numpy and the standard library.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["HARD_BELOW", "allocate_samples", "allocation_summary"]

HARD_BELOW = 0.1
"""A prompt is *hard* while its pass rate (or its estimate) is strictly below this: the ``budget_share_hard`` step
metric and ``simulate-multistep``'s "% on hard" column count the samples such prompts got. The edge is the lower edge
of the ``0.1-0.2`` bin of ``sampling/by_pass_rate`` (:data:`~reinforce_ada.sampling.pools.PASS_RATE_BINS`), so both
say the same: under Est's default prior Beta(1, 1) a first visit whose 8 samples all failed gives ``p_hat = 1/10``
exactly -- one visit's evidence, not yet *believed* hard --, and a second such visit (``1 / (0.9 x 8 + 8 + 2)``,
0.058) is."""


def allocate_samples(weights: np.ndarray, total: int, min_samples: int, max_samples: int | None) -> np.ndarray:
    """Integer sample counts ``n_i`` proportional to ``weights``, each in ``[min_samples, max_samples]``, summing to
    ``total`` (v3 Alg. 1, line "allocate ``N_x`` proportional to ``w_sample``, clipped to ``[N_min, N_max]``").

    Exact: whenever ``B * min_samples <= total <= B * max_samples`` (``B = len(weights)``; ``max_samples`` None: no
    upper clip) the counts sum to ``total``; outside that range every prompt gets the nearer bound. How:

    1. *water-filling* on the clip bounds: the real numbers ``x_i = clip(c * w_i, min, max)`` with the scale ``c``
       chosen so that ``sum x_i = total`` (found exactly: sort the clip points, solve linearly between them);
    2. *largest-remainder rounding*: every ``n_i = floor(x_i)``, then the ``total - sum floor(x_i)`` samples left go
       one each to the largest fractional parts (ties: the larger weight, then the earlier prompt).

    Monotone: a larger weight never gets fewer samples. Equal weights get counts that differ by at most one.
    A weight of 0 gets ``min_samples``; weights must be finite and >= 0.

    >>> allocate_samples(np.array([4.0, 1.0, 1.0]), 12, 2, 32).tolist()
    [8, 2, 2]
    >>> allocate_samples(np.array([100.0, 1.0, 1.0]), 12, 2, 6).tolist()    # clipped at 6, the rest shared
    [6, 3, 3]
    """
    w = np.asarray(weights, dtype=np.float64)  # (B,)
    if w.ndim != 1 or not len(w):
        raise ValueError("allocate_samples needs a non-empty 1-d array of weights")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be finite and >= 0 (got {w.tolist()})")
    if min_samples < 0 or (max_samples is not None and max_samples < min_samples):
        raise ValueError(f"need 0 <= min_samples <= max_samples (got {min_samples}, {max_samples})")
    num = len(w)
    hi = float("inf") if max_samples is None else float(max_samples)
    if total <= num * min_samples:
        return np.full(num, min_samples, dtype=np.int64)
    if total >= num * hi:
        return np.full(num, int(hi), dtype=np.int64)
    if not w.any():  # nothing to be proportional to: an even split
        counts = np.full(num, min_samples, dtype=np.int64)
        return _spread(counts, total - int(counts.sum()), np.zeros(num), w, min_samples, hi)
    x = _water_fill(w, float(total), float(min_samples), hi)
    counts = np.floor(x + 1e-9).astype(np.int64)
    counts = np.clip(counts, min_samples, None if max_samples is None else max_samples)
    return _spread(counts, total - int(counts.sum()), x - counts, w, min_samples, hi)


def _water_fill(w: np.ndarray, total: float, lo: float, hi: float) -> np.ndarray:
    """``clip(c * w, lo, hi)`` with ``c`` such that the sum is ``total`` (``lo * B < total < hi * B``)."""
    # sum_i clip(c w_i, lo, hi) is continuous and piecewise linear in c, non-decreasing; its breakpoints are lo / w_i
    # and hi / w_i. Evaluate it at every breakpoint, find the segment holding `total`, and solve on it.
    positive = w > 0
    points = np.concatenate([lo / w[positive], hi / w[positive] if math.isfinite(hi) else np.array([])])
    points = np.unique(points[np.isfinite(points)])

    def filled(c: float) -> float:
        return float(np.clip(c * w, lo, hi).sum())

    below, above = 0.0, None
    for c in points:
        if filled(c) >= total:
            above = c
            break
        below = c
    if above is None:  # no upper clip binds: beyond the last breakpoint the sum grows linearly
        above = below + 1.0
        while filled(above) < total:
            above *= 2.0
    # on [below, above] the sum is linear: the free prompts grow as c * w_i, the clipped ones stay put
    f_below, f_above = filled(below), filled(above)
    c = below if f_above == f_below else below + (above - below) * (total - f_below) / (f_above - f_below)
    return np.clip(c * w, lo, hi)


def _spread(counts: np.ndarray, left: int, fractions: np.ndarray, w: np.ndarray, lo: int, hi: float
            ) -> np.ndarray:
    """Add (or, for ``left < 0``, take back) ``|left|`` samples one per prompt: added to the largest ``fractions``
    first (ties: the larger weight, then the earlier prompt), taken from the smallest; never outside ``[lo, hi]``. A
    prompt takes more than one only when ``|left|`` exceeds the prompts that can move (an even split)."""
    counts = counts.copy()
    # np.lexsort sorts by its last key first: fraction descending, then weight descending, then index ascending
    order = np.lexsort((np.arange(len(counts)), -np.asarray(w, dtype=np.float64),
                        -np.asarray(fractions, dtype=np.float64)))
    step = 1 if left > 0 else -1
    if step < 0:
        order = order[::-1]
    while left != 0:
        moved = False
        for i in order:
            if left == 0:
                break
            if not lo <= counts[i] + step <= hi:
                continue
            counts[i] += step
            left -= step
            moved = True
        if not moved:
            break
    return counts


def allocation_summary(counts: np.ndarray, p_hat: np.ndarray, hard_below: float = HARD_BELOW) -> dict[str, float]:
    """What an allocation did, as step metrics: samples per prompt (min, mean, max), their total, the estimated pass
    rates' 10th, 50th and 90th percentiles, and the share of the samples that went to prompts believed hard
    (``p_hat < hard_below``).

    >>> allocation_summary(np.array([6, 2]), np.array([0.05, 0.5]))["budget_share_hard"]
    0.75
    """
    counts = np.asarray(counts, dtype=np.float64)
    p_hat = np.asarray(p_hat, dtype=np.float64)
    total = float(counts.sum())
    q10, q50, q90 = np.quantile(p_hat, [0.1, 0.5, 0.9])
    return {"alloc_min": float(counts.min()), "alloc_mean": float(counts.mean()), "alloc_max": float(counts.max()),
            "alloc_total": total, "p_hat_q10": float(q10), "p_hat_q50": float(q50), "p_hat_q90": float(q90),
            "budget_share_hard": float(counts[p_hat < hard_below].sum() / total) if total else 0.0}
