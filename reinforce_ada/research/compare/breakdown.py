"""Where a strategy's difference from the baseline lands (arXiv 2510.04996v3, Table 5, Fig. 5 and 6), from the runs'
further evaluation metrics (:func:`~reinforce_ada.research.compare.runs.read_run`'s ``evals`` and ``dynamics``):

* **per difficulty stratum** -- each strategy at its best lr against the baseline, paired by seed, on the prompts of
  each stratum (fixed before training from the start model's pass rate: a seed's runs share them when they share the
  start model and held-out prompts, checked by a digest of the assignment; a seed whose runs differ is left out of
  that strategy's strata and named), at equal steps (its accuracy at the baseline's last step minus the baseline's
  final one) and at the baseline's tokens (both read at B_tokens);
* **pass@k** -- for each k every run logged, the mean over seeds at the baseline's last step and at B_tokens, and the
  paired difference from the baseline. Every value is *interpolated between the run's own evaluations* (each of which
  gives pass@k for k up to its ``eval_samples`` from the samples it drew), by the rule the accuracy columns use; no
  checkpoint is evaluated again;
* **entropy** -- the mean over seeds of the held-out samples' token entropy at the same two budgets, the paired
  difference from the baseline with its 95% interval (as pass@k's), and each strategy's mean (entropy, accuracy) path
  over its evaluations, for the reward-entropy panel;
* **sampling dynamics** -- samples per step (mean over seeds), the share of a step's prompts still active at each
  round, and samples per prompt by the memory's estimated pass rate (summed over the seeds), when the runs log them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

from reinforce_ada.research.compare.stats import interpolate, t_interval
from reinforce_ada.research.compare.verdict import call

__all__ = ["breakdown", "value_at"]

STEP, TOKENS = 0, 1  # the history columns read here
_PASS = re.compile(r"eval/pass@(\d+)$")


def value_at(history: list, values: Sequence[float | None], column: int, budget: float) -> float:
    """A further evaluation metric (``values``, aligned with ``history``) read at ``budget`` of the history's
    ``column`` by linear interpolation, skipping evaluations without it; nan when none has it."""
    points = [(h[column], v) for h, v in zip(history, values) if v is not None]
    if not points:
        return math.nan
    return interpolate([p[0] for p in points], [p[1] for p in points], budget)


def _mean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(values)) if values else None


def breakdown(chosen: dict[int, dict], base: dict[int, dict], paired: list[int], budgets: dict[str, float],
              is_baseline: bool) -> dict[str, Any]:
    """One strategy's breakdown (see the module docstring): ``chosen`` and ``base`` its and the baseline's runs by
    seed (each as :func:`read_run` gives it), ``paired`` the seeds both finished."""
    steps, tokens = budgets["steps"], budgets["tokens"]
    out: dict[str, Any] = {"strata": _strata(chosen, base, paired, steps, tokens, is_baseline)}
    logged = [{int(m.group(1)) for name, values in run["evals"].items()
               if (m := _PASS.match(name)) and any(v is not None for v in values)}
              for run in [*chosen.values(), *base.values()]]
    ks = sorted(set.intersection(*logged)) if logged else []  # the k every run logged
    pass_at_k: dict[str, Any] = {}
    for k in ks:
        name = f"eval/pass@{k}"
        mine = {s: chosen[s] for s in chosen}
        cell = {"at_steps": _mean([value_at(r["history"], r["evals"][name], STEP, steps) for r in mine.values()]),
                "at_tokens": _mean([value_at(r["history"], r["evals"][name], TOKENS, tokens) for r in mine.values()])}
        if not is_baseline:
            cell["paired"] = _paired(chosen, base, paired, name, steps, tokens)
        pass_at_k[str(k)] = cell
    out["pass_at_k"] = pass_at_k
    have_entropy = all("eval/entropy" in r["evals"] for r in chosen.values())
    out["entropy"] = None if not have_entropy else {
        "at_steps": _mean([value_at(r["history"], r["evals"]["eval/entropy"], STEP, steps) for r in chosen.values()]),
        "at_tokens": _mean([value_at(r["history"], r["evals"]["eval/entropy"], TOKENS, tokens)
                            for r in chosen.values()]),
        "path": _mean_path(chosen)}
    if out["entropy"] is not None and not is_baseline:
        usable = [s for s in paired if "eval/entropy" in base[s]["evals"]]
        out["entropy"]["paired"] = _paired(chosen, base, usable, "eval/entropy", steps, tokens)
    out["dynamics"] = _dynamics(chosen)
    return out


def _paired(chosen: dict, base: dict, seeds: list[int], name: str, steps: float, tokens: float) -> dict[str, Any]:
    """Paired differences of the metric ``name`` at equal steps and at the baseline's tokens, with their verdicts."""
    at_steps, at_tokens = [], []
    for s in seeds:
        mine, theirs = chosen[s], base[s]
        theirs_final = next((v for v in reversed(theirs["evals"][name]) if v is not None), None)
        at_steps.append(value_at(mine["history"], mine["evals"][name], STEP, steps) - theirs_final
                        if theirs_final is not None else math.nan)
        at_tokens.append(value_at(mine["history"], mine["evals"][name], TOKENS, tokens)
                         - value_at(theirs["history"], theirs["evals"][name], TOKENS, tokens))
    at_steps = [d for d in at_steps if not math.isnan(d)]
    at_tokens = [d for d in at_tokens if not math.isnan(d)]
    return {"at_steps": at_steps, "at_tokens": at_tokens,
            "ci95": {"at_steps": list(t_interval(at_steps)), "at_tokens": list(t_interval(at_tokens))},
            "verdict": {"at_steps": call(at_steps), "at_tokens": call(at_tokens)}}


def _strata(chosen: dict, base: dict, paired: list[int], steps: float, tokens: float,
            is_baseline: bool) -> dict[str, Any] | None:
    """Per stratum: the mean prompts per seed, the baseline's start and final accuracy and this strategy's final,
    and (not for the baseline) the paired differences; ``None`` when the runs have no strata."""
    names = [k.removeprefix("eval/accuracy/") for k in next(iter(chosen.values()))["evals"]
             if k.startswith("eval/accuracy/")]
    if not names or any(r["strata"] is None for r in [*chosen.values(), *base.values()]):
        return None
    differ = [s for s in paired if chosen[s]["strata"]["digest"] != base[s]["strata"]["digest"]]
    seeds = [s for s in paired if s not in differ]
    first = next(iter(chosen.values()))["strata"]
    out: dict[str, Any] = {"num_samples": first["num_samples"], "bounds": first["bounds"],
                           "seeds_with_other_strata": differ, "by_stratum": {}}
    for name in names:
        metric = f"eval/accuracy/{name}"
        cell: dict[str, Any] = {
            "num_prompts": _mean([r["strata"]["counts"].get(name, 0) for r in chosen.values()]),
            "baseline_start": _mean([next((v for v in r["evals"].get(metric, []) if v is not None), math.nan)
                                     for r in base.values()]),
            "final": _mean([value_at(r["history"], r["evals"].get(metric, []), STEP, steps)
                            for r in chosen.values()])}
        if not is_baseline:
            usable = [s for s in seeds if metric in chosen[s]["evals"] and metric in base[s]["evals"]]
            cell["paired"] = _paired(chosen, base, usable, metric, steps, tokens)
        out["by_stratum"][name] = cell
    return out


def _mean_path(runs: dict[int, dict]) -> list[list[float]]:
    """The mean over seeds of (step, entropy, accuracy) at each evaluation step all of them share."""
    steps = sorted(set.intersection(*({h[STEP] for h in r["history"]} for r in runs.values())))
    path = []
    for step in steps:
        points = [(e, h[3]) for r in runs.values() for h, e in zip(r["history"], r["evals"]["eval/entropy"])
                  if h[STEP] == step and e is not None]
        if len(points) == len(runs):
            path.append([step, float(np.mean([p[0] for p in points])), float(np.mean([p[1] for p in points]))])
    return path


def _dynamics(runs: dict[int, dict]) -> dict[str, Any]:
    """Samples per step (mean over seeds, over the steps all of them ran), the share of prompts active at each round
    (mean over seeds) and the budget by estimated pass rate (summed over seeds)."""
    per_step = [r["dynamics"]["samples_per_step"] for r in runs.values()]
    length = min(len(v) for v in per_step) if per_step else 0
    rounds = sorted({int(k) for r in runs.values() for k in r["dynamics"]["active_by_round"]})
    active = {str(k): float(np.mean([r["dynamics"]["active_by_round"].get(k, r["dynamics"]["active_by_round"]
                                                                         .get(str(k), 0.0)) for r in runs.values()]))
              for k in rounds}
    budget: dict[str, list[float]] = {}
    for r in runs.values():
        for label, (prompts, samples) in r["dynamics"]["budget_by_pass_rate"].items():
            cell = budget.setdefault(label, [0.0, 0.0])
            cell[0] += prompts
            cell[1] += samples
    return {"samples_per_step": [float(np.mean([v[i] for v in per_step])) for i in range(length)],
            "active_by_round": active, "budget_by_pass_rate": budget}
