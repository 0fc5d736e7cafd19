"""TRL's advantage formulas (``scale_rewards``, ``multi_objective_aggregation``) applied to pool statistics.

Pure numpy; no TRL import. TRL's ``GRPOTrainer`` (1.14-1.16, ``_generate_and_score_completions``) computes, over each
group ``G`` of ``num_generations`` rows, with per-function rewards ``v_ik`` (NaN where a function returned ``None``),
weights ``w_k`` and ``eps = 1e-4``:

* ``sum_then_normalize``: ``r_i = nansum_k w_k v_ik`` (NaN if every ``v_ik`` is NaN: *unscorable*) and
  ``A_i = r_i - nanmean_G(r)``, divided by ``nanstd_G(r) + eps`` (``scale_rewards="group"``), by the std of every
  ``r`` in the batch ``+ eps`` (``"batch"``), or by nothing (``"none"``);
* ``normalize_then_sum``: ``z_ik = (v_ik - nanmean_G(v_k)) / (nanstd_G(v_k) + eps)``, ``R_i = nansum_k w_k z_ik`` and
  ``A_i = (R_i - nanmean_batch(R)) / (nanstd_batch(R) + eps)`` (``scale_rewards`` is not used);
* unscorable rows get ``A = 0`` (as does any NaN, e.g. the std of a single row), and so does every row of a set
  whose rewards are all equal, for every ``epsilon >= 0`` (TRL's ``0 / 1e-4``;
  :func:`~reinforce_ada.core.advantages.normalize_by_std`, the rule of every home).

Here a *set* replaces TRL's group: the prompt's whole **pool** (every completion drawn this step; ``advantage="pool"``)
or its kept group (``advantage="group"``, GRPO), and the *batch* is the union of the sets of every process. With one
round of ``num_generations`` samples (``max_rounds=1``, ``samples_per_round=num_generations``) pool = group and the
advantages are TRL's. ``std`` is Bessel-corrected (TRL's ``nanstd``).

The batch statistics span processes, so the work is split: :func:`combine_rewards` (per process), then the caller
all-reduces :func:`moments` of the result, then :func:`advantages`.
"""

from __future__ import annotations

import numpy as np

from reinforce_ada.core.advantages import normalize_by_std

SCALE_REWARDS = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


def normalize_scale_rewards(value: object) -> str:
    """TRL's spellings: ``True`` -> ``"group"``, ``False`` -> ``"none"``; anything else must be a known name.

    >>> normalize_scale_rewards(True), normalize_scale_rewards("batch")
    ('group', 'batch')
    """
    value = {True: "group", False: "none"}.get(value, value)  # type: ignore[call-overload]
    if value not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards={value!r} is not one of {list(SCALE_REWARDS)} (or True / False)")
    return str(value)


def set_statistics(values: np.ndarray, set_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row NaN-ignoring mean and Bessel-corrected std of ``values`` over the rows sharing ``set_index``.

    ``values`` is ``(N,)`` or ``(N, K)`` (columns are independent); the std is NaN for a set with < 2 values. A set
    whose values are all equal has that value as its mean and std 0 exactly (a sum of eight 0.1s divided by 8 is not
    0.1, and the rounding error would otherwise look like a spread).

    >>> mean, std = set_statistics(np.array([1.0, 3.0, np.nan, 5.0]), np.array([0, 0, 0, 1]))
    >>> mean.tolist(), std.tolist()[:2]
    ([2.0, 2.0, 2.0, 5.0], [1.4142135623730951, 1.4142135623730951])
    """
    values = np.asarray(values, dtype=np.float64)
    flat = values.reshape(len(values), -1)
    _, inverse = np.unique(np.asarray(set_index), return_inverse=True)
    inverse = inverse.reshape(-1)
    num_sets = int(inverse.max()) + 1 if len(inverse) else 0
    valid = ~np.isnan(flat)
    filled = np.where(valid, flat, 0.0)
    count = np.zeros((num_sets, flat.shape[1]))
    total = np.zeros((num_sets, flat.shape[1]))
    np.add.at(count, inverse, valid)
    np.add.at(total, inverse, filled)
    low = np.full((num_sets, flat.shape[1]), np.inf)
    high = np.full((num_sets, flat.shape[1]), -np.inf)
    np.minimum.at(low, inverse, np.where(valid, flat, np.inf))
    np.maximum.at(high, inverse, np.where(valid, flat, -np.inf))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where((count > 0) & (low == high), low, total / count)
        sq_dev = np.zeros_like(total)
        np.add.at(sq_dev, inverse, np.where(valid, (flat - mean[inverse]) ** 2, 0.0))
        std = np.where(count > 1, np.sqrt(sq_dev / (count - 1)), np.nan)
    return mean[inverse].reshape(values.shape), std[inverse].reshape(values.shape)


def combine_rewards(values: np.ndarray, weights: np.ndarray, set_index: np.ndarray, *, aggregation: str,
                    epsilon: float = 1e-4) -> np.ndarray:
    """One scalar per completion from per-function rewards ``values`` ``(N, K)`` (NaN = ``None``); NaN if unscorable.

    ``sum_then_normalize``: the weighted sum. ``normalize_then_sum``: the weighted sum of each function's reward
    normalised over its set.

    >>> v = np.array([[1.0, 0.0], [0.0, np.nan], [np.nan, np.nan]])
    >>> combine_rewards(v, np.array([1.0, 0.5]), np.zeros(3), aggregation="sum_then_normalize").tolist()
    [1.0, 0.0, nan]
    """
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    unscorable = np.isnan(values).all(axis=1)
    if aggregation == "sum_then_normalize":
        terms = values
    elif aggregation == "normalize_then_sum":
        mean, std = set_statistics(values, set_index)
        with np.errstate(invalid="ignore"):
            terms = np.where(np.isnan(values), np.nan, normalize_by_std(values - mean, std, epsilon))
    else:
        raise ValueError(f"multi_objective_aggregation={aggregation!r} is not one of {list(AGGREGATIONS)}")
    combined = np.nansum(terms * weights[None, :], axis=1)
    return np.where(unscorable, np.nan, combined)


def moments(rewards: np.ndarray) -> np.ndarray:
    """``[count, sum, sum of squares]`` of the non-NaN ``rewards`` (add these over processes for batch statistics)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    valid = rewards[~np.isnan(rewards)]
    return np.array([len(valid), valid.sum(), (valid ** 2).sum()], dtype=np.float64)


def mean_std(total_moments: np.ndarray) -> tuple[float, float]:
    """Mean and Bessel-corrected std from summed :func:`moments` (NaN where undefined).

    >>> mean_std(moments(np.array([1.0, 2.0, 3.0, np.nan])))
    (2.0, 1.0)
    """
    count, total, squares = (float(x) for x in total_moments)
    if count == 0:
        return float("nan"), float("nan")
    mean = total / count
    if count < 2:
        return mean, float("nan")
    return mean, float(np.sqrt(max(squares - count * mean * mean, 0.0) / (count - 1)))


def advantages(rewards: np.ndarray, set_index: np.ndarray, *, aggregation: str, scale_rewards: str,
               batch_mean: float, batch_std: float, epsilon: float = 1e-4) -> np.ndarray:
    """TRL's advantages of combined ``rewards`` (from :func:`combine_rewards`) with set and batch statistics.

    >>> r, idx = np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(4)
    >>> advantages(r, idx, aggregation="sum_then_normalize", scale_rewards="none", batch_mean=0, batch_std=1).tolist()
    [0.75, -0.25, -0.25, -0.25]
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if aggregation == "normalize_then_sum":
            out = normalize_by_std(rewards - batch_mean, np.float64(batch_std), epsilon)
        else:
            mean, std = set_statistics(rewards, set_index)
            out = rewards - mean
            if scale_rewards == "group":
                out = normalize_by_std(out, std, epsilon)
            elif scale_rewards == "batch":
                out = normalize_by_std(out, np.float64(batch_std), epsilon)
            elif scale_rewards != "none":
                raise ValueError(f"scale_rewards={scale_rewards!r} is not one of {list(SCALE_REWARDS)}")
    return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0)
