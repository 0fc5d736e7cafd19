"""Non-linear RL objectives and the per-prompt weight they put on the gradient (arXiv 2510.04996v3, Sec. 3).

The v3 paper maximises ``J_f = E_x[f(p(x))]``, where ``p(x)`` is the prompt's pass rate under the policy. Its
gradient is ``E_x[f'(p(x)) * grad p(x)]`` (Eq. 3.1), so each prompt carries the weight ``w(p) = f'(p)``:

* ``linear``  -- ``f(p) = p``,        ``w(p) = 1``            (ordinary RL: GRPO, the paper's Seq as released);
* ``log``     -- ``f(p) = log p``,    ``w(p) = 1 / p``        (the paper's choice: hard prompts weigh more);
* ``power:A`` -- ``f(p) = p^A``,      ``w(p) = A p^(A - 1)``  (``0 < A <= 1`` interpolates between the two).

The weight can be paid in **samples** (a prompt gets ``n_x`` proportional to its weight, Sec. 3.2), in the
**gradient** (its advantages are multiplied by it), or split between them:
``w = w_sample * w_grad`` with ``w_sample = w^s`` and ``w_grad = w^(1 - s)`` for a ``sample_share`` ``s`` in [0, 1].
Reinforce-Ada-Est (Alg. 1) uses the log objective with ``s = 1/2``: ``n_x`` proportional to ``1 / sqrt(p_hat)`` and
advantages ``(r - rbar) / sqrt(rbar)``. Appendix B's variance-optimal split under the log objective (with a
baseline) is a named split, ``"variance-optimal"``: ``w_sample = sqrt((1 - p) / p)`` and
``w_grad = 1 / sqrt(p (1 - p))`` -- the latter is GRPO's std normalisation for 0/1 rewards (Remark 1); their product
is ``1 / p``.

Every weight is evaluated at ``p + eps`` (``eps`` > 0 keeps ``w`` finite at ``p = 0``) and the gradient weight is capped
at ``max_grad_weight``: under the log objective a prompt with one success in 32 samples would otherwise carry 32x the
gradient of a prompt at ``p = 1`` and could dominate its batch. A prompt whose rewards are all equal has zero
advantages, so its weight (however large) moves nothing.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from reinforce_ada.core.registry import Registry

WeightFn = Callable[[np.ndarray], np.ndarray]

OBJECTIVES: Registry[WeightFn] = Registry("objective")
"""``name -> w``, the objective's derivative ``f'(p)`` as a vectorised function of the pass rate."""

VARIANCE_OPTIMAL = "variance-optimal"
"""The sample share that names Appendix B's split (log objective only)."""

HARD_BELOW = 0.1
"""A prompt is *hard* while its pass rate (or its estimate) is below this: the ``budget_share_hard`` step metric and
``simulate-multistep``'s "% on hard" column count the samples such prompts got."""


@OBJECTIVES.register("linear")
def linear(p: np.ndarray) -> np.ndarray:
    """``f(p) = p``: ``w = 1`` (every prompt weighs the same)."""
    return np.ones_like(np.asarray(p, dtype=np.float64))


@OBJECTIVES.register("log")
def log(p: np.ndarray) -> np.ndarray:
    """``f(p) = log p``: ``w = 1 / p`` (v3 Sec. 3.1)."""
    return 1.0 / np.asarray(p, dtype=np.float64)


def power(p: np.ndarray, a: float) -> np.ndarray:
    """``f(p) = p^a``: ``w = a p^(a - 1)``."""
    return a * np.power(np.asarray(p, dtype=np.float64), a - 1.0)


def parse_objective(name: str) -> WeightFn:
    """The weight function of ``"linear"``, ``"log"`` or ``"power:A"`` (``A > 0``); a ``ValueError`` naming the
    accepted forms otherwise.

    >>> float(parse_objective("power:0.5")(np.array(0.25)))
    1.0
    """
    if isinstance(name, str) and name.startswith("power:"):
        try:
            a = float(name.split(":", 1)[1])
        except ValueError:
            a = float("nan")
        if not (math.isfinite(a) and a > 0):
            raise ValueError(f"objective {name!r}: power:A needs a number A > 0 (e.g. power:0.5)")
        return lambda p: power(p, a)
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; choose from {', '.join(OBJECTIVES.names())} or power:A")
    return OBJECTIVES.get(name)


def check_sample_share(objective: str, sample_share: float | str) -> None:
    """A ``ValueError`` unless ``sample_share`` is a number in [0, 1] or ``"variance-optimal"`` (log objective)."""
    if sample_share == VARIANCE_OPTIMAL:
        if objective != "log":
            raise ValueError(f"sample_share={VARIANCE_OPTIMAL!r} is Appendix B's split of the log objective "
                             f"(got objective={objective!r})")
        return
    if isinstance(sample_share, bool) or not isinstance(sample_share, (int, float)) or not 0 <= sample_share <= 1:
        raise ValueError(f"sample_share must be a number in [0, 1] or {VARIANCE_OPTIMAL!r} (got {sample_share!r})")


def split_weights(objective: str, p: np.ndarray, *, sample_share: float | str, eps: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(w_sample, w_grad)`` per pass rate, uncapped: ``w(p + eps)`` split by ``sample_share`` (module docstring).

    >>> ws, wg = split_weights("log", np.array([0.25, 1.0]), sample_share=0.5, eps=0.0)
    >>> ws.tolist(), wg.tolist()     # 1/sqrt(p) each: Est's allocation and its advantage scale
    ([2.0, 1.0], [2.0, 1.0])
    """
    q = np.asarray(p, dtype=np.float64) + eps  # (B,)
    if sample_share == VARIANCE_OPTIMAL:  # Appendix B: n ~ sqrt((1-p)/p), A = (r - p) / sqrt(p(1-p))
        rest = np.maximum(1.0 - np.asarray(p, dtype=np.float64), 0.0) + eps
        return np.sqrt(rest / q), 1.0 / np.sqrt(q * rest)
    w = parse_objective(objective)(q)
    s = float(sample_share)
    return np.power(w, s), np.power(w, 1.0 - s)


def grad_weights(objective: str, p: np.ndarray, *, sample_share: float | str, eps: float,
                 max_grad_weight: float | None) -> np.ndarray:
    """``w_grad`` per pass rate, capped at ``max_grad_weight`` (None: no cap); 1 everywhere for ``linear``.

    >>> grad_weights("log", np.array([1 / 32, 0.5]), sample_share=0.0, eps=0.0, max_grad_weight=8.0).tolist()
    [8.0, 2.0]
    """
    _, w_grad = split_weights(objective, p, sample_share=sample_share, eps=eps)
    return w_grad if max_grad_weight is None else np.minimum(w_grad, max_grad_weight)


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
