"""The paper's analyses read out of a run's ``metrics.jsonl`` records (plain dicts), for ``plot`` and ``compare``.

Each reader takes the records of one run and returns plain numbers; a run that lacks a metric gives an empty result
(the caller draws a note instead of a panel), so the readers hold for any strategy, whatever ``sampling/*`` metrics it
logs:

* :func:`strata_series` -- held-out accuracy per difficulty stratum over steps (``eval/accuracy/<stratum>``;
  Table 5 of arXiv 2510.04996v3);
* :func:`pass_curves` -- the pass@k curve of each evaluation (``eval/pass@k``; Fig. 6 right);
* :func:`entropy_points` -- reward against the policy's token entropy: held-out accuracy against ``eval/entropy``
  per evaluation, and the sampled reward against ``train/entropy`` per step (Fig. 6 left);
* :func:`samples_per_step`, :func:`active_by_round` -- sampling dynamics: samples drawn per step, and the share of a
  step's prompts still active at the start of each round (Fig. 5);
* :func:`budget_by_pass_rate` -- for strategies with a cross-step pass-rate memory, the samples per prompt against
  the memory's estimated pass rate (``sampling/by_pass_rate/<bin>/*``);
* :func:`allocation_over_run` -- for a one-shot allocation (Est): samples per prompt over the whole run, the share
  of the samples spent on prompts believed hard, and how many prompts the memory holds at the end
  (``sampling/alloc_*``, ``sampling/budget_share_hard``, ``sampling/memory_prompts``).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

__all__ = ["active_by_round", "allocation_over_run", "budget_by_pass_rate", "entropy_points", "pass_curves", "samples_per_step",
           "series", "strata_series"]

Records = Sequence[dict[str, Any]]

_PASS = re.compile(r"eval/pass@(\d+)$")
_ROUND = re.compile(r"sampling/round_(\d+)/num_active$")
_BIN = re.compile(r"sampling/by_pass_rate/([^/]+)/num_(prompts|samples)$")


def series(records: Records, key: str, x: str = "step") -> tuple[list[float], list[float]]:
    """``(x values, key values)`` of the records holding both."""
    points = [(r[x], r[key]) for r in records if key in r and x in r and r[key] is not None]
    return [p[0] for p in points], [p[1] for p in points]


def strata_series(records: Records) -> dict[str, tuple[list[float], list[float]]]:
    """Per stratum (in the order the records name them: hardest first), its held-out accuracy against the step."""
    names = list(dict.fromkeys(k.removeprefix("eval/accuracy/") for r in records for k in r
                               if k.startswith("eval/accuracy/")))
    return {name: series(records, f"eval/accuracy/{name}") for name in names}


def pass_curves(records: Records) -> list[tuple[int, dict[int, float]]]:
    """``[(step, {k: pass@k})]``, one per evaluation that logged a curve, in order."""
    out = []
    for r in records:
        curve = {int(m.group(1)): float(v) for k, v in r.items() if (m := _PASS.match(k)) and v is not None}
        if curve:
            out.append((int(r["step"]), dict(sorted(curve.items()))))
    return out


def entropy_points(records: Records) -> dict[str, tuple[list[float], list[float]]]:
    """``{"held_out": (eval/entropy, eval/accuracy), "train": (train/entropy, sampling/reward_mean)}``, each pair
    of lists over the records holding both (one point per evaluation, per step)."""
    return {"held_out": series(records, "eval/accuracy", x="eval/entropy"),
            "train": series(records, "sampling/reward_mean", x="train/entropy")}


def samples_per_step(records: Records) -> tuple[list[float], list[float]]:
    """``(steps, samples drawn in each)``."""
    return series(records, "sampling/total_samples")


def active_by_round(records: Records) -> dict[int, float]:
    """Per round, the mean over steps of the share of the step's prompts still active at its start (a step that
    ended before that round counts as 0 there); empty for a sampler without rounds."""
    steps = [r for r in records if r.get("sampling/num_prompts")]
    rounds = sorted({int(m.group(1)) for r in steps for k in r if (m := _ROUND.match(k))})
    return {k: sum(r.get(f"sampling/round_{k}/num_active", 0.0) / r["sampling/num_prompts"] for r in steps) / len(steps)
            for k in rounds}


def budget_by_pass_rate(records: Records) -> dict[str, tuple[float, float]]:
    """Per bin of the estimated pass rate (``"0.0-0.2"``, ..., and ``"unseen"`` last), ``(prompts, samples)``
    summed over the steps; their ratio is the mean budget per prompt in that bin."""
    sums: dict[str, list[float]] = {}
    for r in records:
        for k, v in r.items():
            if (m := _BIN.match(k)) and v is not None:
                cell = sums.setdefault(m.group(1), [0.0, 0.0])
                cell[0 if m.group(2) == "prompts" else 1] += float(v)
    order = sorted((b for b in sums if b != "unseen"), key=lambda b: float(b.split("-")[0]))
    return {b: (sums[b][0], sums[b][1]) for b in order + (["unseen"] if "unseen" in sums else [])}


def allocation_over_run(records: Records) -> dict[str, float]:
    """A one-shot allocation over the run's steps: ``min`` / ``max`` samples a prompt got in any step, ``mean`` samples
    per prompt (all samples over all prompt-visits), ``share_hard`` (the samples on prompts whose estimate was below
    the hard threshold, over all samples), ``memory_prompts`` (prompts with a remembered estimate after the last
    step), ``visits`` (prompt-visits) and ``revisits`` (visits of a prompt the memory already had an estimate of:
    all visits but those ``by_pass_rate/unseen`` counts); empty when the run logged no allocation.

    >>> allocation_over_run([{"sampling/alloc_min": 2, "sampling/alloc_max": 8, "sampling/alloc_total": 12,
    ...                       "sampling/num_prompts": 3, "sampling/budget_share_hard": 0.5, "sampling/memory_prompts": 3,
    ...                       "sampling/by_pass_rate/unseen/num_prompts": 3},
    ...                      {"sampling/alloc_min": 4, "sampling/alloc_max": 4, "sampling/alloc_total": 12,
    ...                       "sampling/num_prompts": 3, "sampling/budget_share_hard": 0.0, "sampling/memory_prompts": 5,
    ...                       "sampling/by_pass_rate/unseen/num_prompts": 2}])
    {'min': 2.0, 'mean': 4.0, 'max': 8.0, 'share_hard': 0.25, 'memory_prompts': 5.0, 'visits': 6.0, 'revisits': 1.0}
    """
    steps = [r for r in records if "sampling/alloc_total" in r and "sampling/num_prompts" in r]
    if not steps:
        return {}
    total = sum(float(r["sampling/alloc_total"]) for r in steps)
    visits = sum(float(r["sampling/num_prompts"]) for r in steps)
    hard = sum(float(r["sampling/alloc_total"]) * float(r.get("sampling/budget_share_hard", 0.0)) for r in steps)
    unseen = sum(float(r.get("sampling/by_pass_rate/unseen/num_prompts", 0.0)) for r in steps)
    return {"min": min(float(r["sampling/alloc_min"]) for r in steps), "mean": total / visits if visits else 0.0,
            "max": max(float(r["sampling/alloc_max"]) for r in steps), "share_hard": hard / total if total else 0.0,
            "memory_prompts": float(steps[-1].get("sampling/memory_prompts", 0.0)), "visits": visits,
            "revisits": visits - unseen}
