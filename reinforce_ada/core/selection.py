"""Selection: downsample a prompt's pool to a training group of ``group_size`` completions (or keep it whole).

After sampling, each prompt's *pool* (every completion drawn for it this step) is reduced to a *group* of ``n``
completions. Rules see the pool as a boolean array ``is_positive`` (``reward > positive_threshold``) and return the
indices to keep; which completions of a class are kept is a seeded uniform choice (never "the first k").

* ``balanced``          -- ``n // 2`` positives and ``n - n // 2`` negatives; a class that is short is topped up from
  the other class (Reinforce-Ada's balanced downsampling).
* ``positive_focused``  -- keep the pool's positive ratio (``round(n * positives / pool)``), but at least one positive
  and one negative whenever the pool has them; applied to every pool. The reference code (the authors' verl fork,
  WeiXiongUST/Reinforce-Ada ``ray_trainer.py``, ``reinforce_ada_choice="positive_focused"``) uses this ratio rule only
  as its *fallback*, for prompts that never exited, and there with ``ceil``, clamped to ``[1, kept - 1]`` positives.
  A prompt that does exit there (at its first positive) is downsampled like ``balanced``: ``min(n // 2, positives)``
  positives, the rest negatives, topped up from the other class -- ``strategy="ada-positive"`` with the default
  ``selection="balanced"`` is that behaviour.
* ``random``            -- a uniform subset of the pool, ignoring classes.
* ``all``               -- every completion of the pool, whatever ``group_size``: a group may be larger than ``n``
  (a pool of up to ``M x N``) or smaller. Every generated sample is trained on, as in GRPO, instead of ``n`` of a
  pool whose advantages already use the whole pool's mean. ``group_size`` still sets the exit rules' ``n`` and the
  minimum pool size for an exit; only the downsampling is skipped. ``unexited`` applies as usual (``"keep"``:
  an unexited pool is kept whole too; ``"drop"``: dropped). ``importance_weights`` come out as 1 for every sample
  (the kept class counts equal the pool's, ``|G| m_c / (|P| k_c) = 1``). Not for TRL or verl, which train on
  exactly ``n`` rows per prompt (their configs refuse it). Beyond the paper (docs/benchmarks.md,
  "Training on the whole pool").

When the pool holds fewer than ``n`` completions every rule keeps the whole pool. Signature of every rule:
``rule(is_positive: np.ndarray[bool], group_size: int, rng: np.random.Generator) -> np.ndarray[int]``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from reinforce_ada.core.registry import Registry

SelectionRule = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]

SELECTION_RULES: Registry[SelectionRule] = Registry("selection rule")


def _take_counts(is_positive: np.ndarray, num_pos: int, num_neg: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``num_pos`` random positives and ``num_neg`` random negatives (positives first)."""
    pos_idx = np.flatnonzero(is_positive)
    neg_idx = np.flatnonzero(~is_positive)
    chosen_pos = rng.choice(pos_idx, size=num_pos, replace=False) if num_pos < len(pos_idx) else pos_idx
    chosen_neg = rng.choice(neg_idx, size=num_neg, replace=False) if num_neg < len(neg_idx) else neg_idx
    return np.concatenate([np.sort(chosen_pos), np.sort(chosen_neg)]).astype(np.int64)


def _fill(target_pos: int, group_size: int, available_pos: int, available_neg: int) -> tuple[int, int]:
    """Counts (pos, neg) summing to ``min(group_size, pool)``, as close to ``target_pos`` positives as possible."""
    total = min(group_size, available_pos + available_neg)
    num_pos = min(target_pos, available_pos)
    num_neg = min(total - num_pos, available_neg)
    num_pos = total - num_neg  # top up positives if negatives ran short
    return num_pos, num_neg


@SELECTION_RULES.register("balanced")
def balanced(is_positive: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    num_pos, num_neg = _fill(group_size // 2, group_size, int(is_positive.sum()), int((~is_positive).sum()))
    return _take_counts(is_positive, num_pos, num_neg, rng)


@SELECTION_RULES.register("positive_focused")
def positive_focused(is_positive: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    available_pos = int(is_positive.sum())
    available_neg = len(is_positive) - available_pos
    target = int(round(group_size * available_pos / max(len(is_positive), 1)))
    if available_pos > 0:
        target = max(target, 1)
    if available_neg > 0:  # keep one negative too, or a mostly-positive pool would yield a zero-signal group
        target = min(target, group_size - 1)
    num_pos, num_neg = _fill(target, group_size, available_pos, available_neg)
    return _take_counts(is_positive, num_pos, num_neg, rng)


@SELECTION_RULES.register("random")
def random(is_positive: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    if len(is_positive) <= group_size:
        return np.arange(len(is_positive), dtype=np.int64)
    return np.sort(rng.choice(len(is_positive), size=group_size, replace=False)).astype(np.int64)


@SELECTION_RULES.register("all")
def keep_all(is_positive: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    del group_size, rng  # no downsampling, and no random choice (the selection RNG is not advanced)
    return np.arange(len(is_positive), dtype=np.int64)


def get_selection_rule(name_or_fn: str | SelectionRule) -> SelectionRule:
    return SELECTION_RULES.get(name_or_fn)
