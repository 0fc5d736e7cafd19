"""Advantages: rewards minus a per-prompt baseline, grouped by prompt id (never by reshape).

Two baselines are registered:

* ``group`` -- GRPO (Shao et al., 2024): ``A_i = r_i - mean(group)``, optionally ``/ (std(group) + eps)``, where the
  group is the ``n`` completions kept for training.
* ``pool``  -- Reinforce-Ada (arXiv 2510.04996, Eq. 5): ``A_i = r_i - mean(pool)``, optionally
  ``/ (std(pool) + eps)``, where the pool is *every* completion drawn for the prompt this step. The pool statistics
  are passed in per sample, so they are exact for any real-valued reward (not rebuilt from positive/negative counts).

``std`` is the sample standard deviation (Bessel-corrected, ddof=1), as in TRL's and verl's GRPO; ``eps`` is added
once, to the denominator. A prompt whose group (or pool) holds a single completion gets advantage 0, and so does one
whose rewards are all equal (zero spread), for every ``eps >= 0`` (:func:`normalize_by_std`): GRPO's own code (TRL's
``/ (std + 1e-4)``, verl's ``compute_grpo_outcome_advantage`` with ``/ (std + 1e-6)``) gives such a group ``0 / eps =
0``, and here ``eps = 0`` means the same instead of ``0 / 0``.

**Unbiased variant.** Balanced downsampling keeps ``k_c`` of the ``m_c`` pool completions of class ``c`` (positive /
negative), so the minority class is over-represented relative to the pool. :func:`pool_importance_weights` returns
``w_i = |G| * m_c / (|P| * k_c)``. If within each class the kept completions are a uniform subset (as every registered
selection rule does) then, for any per-completion quantity ``f`` (e.g. ``A_i * grad log pi``),
``E[(1/|G|) sum_{i in G} w_i f_i] = (1/|P|) sum_{i in P} f_i`` -- the group estimate has the full pool's expectation.
It is exact whenever every class present in the pool is present in the group (``k_c > 0``); a class with ``k_c = 0``
cannot be corrected for and its weight mass is lost.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from reinforce_ada.core.registry import Registry

AdvantageFn = Callable[..., np.ndarray]

ADVANTAGES: Registry[AdvantageFn] = Registry("advantage baseline")


def group_statistics(values: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample (mean, sample std, count) of ``values`` over the samples sharing the same ``index`` entry.

    ``index`` may hold any hashable ids (ints, strings); groups may have different sizes.
    """
    values = np.asarray(values, dtype=np.float64)
    _, inverse, counts = np.unique(np.asarray(index), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # Overflow-safe: each group is computed on r / scale with scale = max |r| of the group (1 for an all-zero group),
    # so neither the sum nor the squares can overflow for any finite reward (e.g. 1e300).
    scale = np.zeros(len(counts))
    np.maximum.at(scale, inverse, np.abs(values))
    scale = np.where(scale > 0, scale, 1.0)
    scaled = values / scale[inverse]
    means = np.bincount(inverse, weights=scaled, minlength=len(counts)) / counts
    sq_dev = np.bincount(inverse, weights=(scaled - means[inverse]) ** 2, minlength=len(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        stds = np.where(counts > 1, np.sqrt(sq_dev / np.maximum(counts - 1, 1)), 0.0)
    return (means * scale)[inverse], (stds * scale)[inverse], counts[inverse].astype(np.int64)


def normalize_by_std(centred: np.ndarray, std: np.ndarray, epsilon: float) -> np.ndarray:
    """``centred / (std + epsilon)``, and 0 where ``std`` is not positive (a set whose rewards are all equal, or one
    of a single reward, whose std may be NaN): a zero-spread group carries no signal, whatever ``epsilon >= 0`` is.
    The one place every home (the standalone samplers, TRL, verl) divides by a std.

    >>> normalize_by_std(np.array([0.0, 0.5, -0.5]), np.array([0.0, 0.5, 0.5]), 0.0).tolist()
    [0.0, 1.0, -1.0]
    """
    centred = np.asarray(centred, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    spread = std > 0  # False for 0 and NaN
    out = np.zeros(np.broadcast(centred, std).shape)
    np.divide(centred, std + epsilon, out=out, where=spread)
    return out


def baseline_advantages(
    rewards: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    count: np.ndarray,
    *,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
) -> np.ndarray:
    """``(r - mean) [/ (std + eps)]`` per sample; 0 where the baseline was computed from a single sample, and with
    ``normalize_std`` where the std is 0 (:func:`normalize_by_std`)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    # (r - mean) halved before subtracting and doubled after dividing: finite for any finite reward and mean.
    advantages = rewards / 2 - mean / 2
    if normalize_std:
        advantages = normalize_by_std(advantages, std, epsilon)
    advantages = advantages * 2
    return np.where(np.asarray(count) > 1, advantages, 0.0)


@ADVANTAGES.register("group")
def group_advantages(
    rewards: np.ndarray,
    index: np.ndarray,
    *,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
    **_pool_stats: np.ndarray,
) -> np.ndarray:
    """GRPO's group-local baseline (pool statistics, if passed, are ignored)."""
    mean, std, count = group_statistics(rewards, index)
    return baseline_advantages(rewards, mean, std, count, normalize_std=normalize_std, epsilon=epsilon)


@ADVANTAGES.register("pool")
def pool_advantages(
    rewards: np.ndarray,
    index: np.ndarray,
    *,
    pool_mean: np.ndarray,
    pool_std: np.ndarray,
    pool_count: np.ndarray,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
) -> np.ndarray:
    """Reinforce-Ada's whole-pool baseline from per-sample pool statistics (``index`` is unused: stats are per sample)."""
    return baseline_advantages(rewards, pool_mean, pool_std, pool_count, normalize_std=normalize_std, epsilon=epsilon)


def compute_advantages(mode: str | AdvantageFn, rewards: np.ndarray, index: np.ndarray, **kwargs) -> np.ndarray:
    """Dispatch through :data:`ADVANTAGES` (``mode`` is ``"group"``, ``"pool"`` or a callable)."""
    return ADVANTAGES.get(mode)(np.asarray(rewards, dtype=np.float64), np.asarray(index), **kwargs)


def pool_importance_weights(
    is_positive: np.ndarray,
    index: np.ndarray,
    pool_num_positive: np.ndarray,
    pool_count: np.ndarray,
) -> np.ndarray:
    """Per-sample weights ``|G| m_c / (|P| k_c)`` that undo the class re-balancing of downsampling (see module doc).

    ``is_positive`` and ``index`` describe the kept group samples; ``pool_num_positive`` and ``pool_count`` are the
    per-sample pool totals of the sample's prompt.
    """
    is_positive = np.asarray(is_positive, dtype=bool)
    index = np.asarray(index)
    pool_num_positive = np.asarray(pool_num_positive, dtype=np.float64)
    pool_count = np.asarray(pool_count, dtype=np.float64)
    mean_pos, _, group_size = group_statistics(is_positive.astype(np.float64), index)
    kept_pos = np.rint(mean_pos * group_size)
    kept_in_class = np.where(is_positive, kept_pos, group_size - kept_pos)
    pool_in_class = np.where(is_positive, pool_num_positive, pool_count - pool_num_positive)
    return group_size * pool_in_class / (pool_count * kept_in_class)
