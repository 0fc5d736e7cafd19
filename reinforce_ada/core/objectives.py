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
