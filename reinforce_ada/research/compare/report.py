"""The report of ``reinforce-ada compare`` as data: every strategy at its own best learning rate against the baseline,
at equal steps, at the baseline's generated-token budget and at the baseline's wall-clock, from the runs' histories,
with a verdict per budget (:mod:`.verdict`) and where the difference lands (:mod:`.breakdown`: difficulty strata,
pass@k, entropy, sampling dynamics). :mod:`.markdown` writes it as ``report.md``, :mod:`.figure` as ``report.png``.

Input: one history per run, ``[[step, generated tokens, step seconds, held-out accuracy], ...]`` (step 0 included;
tokens and seconds cumulative; seconds are ``time/step_seconds``: generation + scoring + update + weight sync, no
held-out evaluations or checkpoints).

The rules, fixed before any run (the comparison's ``compare.json`` records them and a rerun cannot change them):

* **budgets**: S = the baseline's last step; B_tokens and B_seconds = the mean over seeds of the baseline's total
  generated tokens and step seconds, at its best lr.
* **best lr**: the baseline's is the lr with the highest mean final accuracy; every other strategy's is by
  ``best_lr_rule``: ``final`` (highest mean final accuracy), ``tokens`` (highest mean accuracy at B_tokens) or
  ``seconds`` (at B_seconds). A best lr at the lowest or highest lr of the grid is flagged (the optimum may lie
  outside it), and so is the only lr of a one-lr grid (``best_lr_at_edge``: ``lowest``, ``highest`` or ``only``).
* **selection apart from reporting** (:mod:`.selection`): with ``selection="split"`` the best lrs (the baseline's,
  hence the budgets, and every other strategy's) are chosen on one half of each seed's held-out prompts and every
  accuracy below is measured on the other half; ``best_lr_on_report_prompts`` is the lr the same rule picks on the
  report half, and a strategy whose winner differs is named (``selection.winner_changed``). With ``"same"`` every
  held-out prompt both chooses and judges (a one-lr grid selects nothing).
* **paired differences**, per seed the baseline also ran, then mean ± 95% Student-t interval: the strategy's
  accuracy at step S minus the baseline's final accuracy (``at_steps``); accuracy at B_tokens minus the baseline's
  at B_tokens (``at_tokens``); the same at B_seconds (``at_seconds``). A run's accuracy at a budget is linearly
  interpolated on its own history; a run that used less than the budget counts at its final accuracy (counted as
  ``short_of_tokens`` / ``short_of_seconds``).
* **verdict**: per budget, *ahead* / *behind* / *inconclusive* by the paired differences' 95% interval, and the seeds
  an inconclusive difference would need (:mod:`.verdict`).
* **cost ratios**: per seed both finished, the strategy's total generated tokens and total step seconds over the
  baseline's; their geometric mean and its 95% interval (the Student-t interval of the log ratios, exponentiated).
* **steps to the baseline's final accuracy**: the first step at which the strategy's mean curve reaches the
  baseline's mean final accuracy, as a ratio of the baseline's own, with a paired bootstrap 95% interval over seeds
  (2000 resamples). A ratio and its interval never contradict each other: when the point is not defined (the mean
  curve never reached it, or the baseline never improved on its start) all three are null and ``reason`` says why;
  a bound that is infinite (some resamples never reach it) is null with a ``reason``; so is an interval from fewer
  than 3 paired seeds, or of zero width, which says nothing of the ratio's uncertainty (``reason``: it needs more
  seeds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from reinforce_ada.research.compare.breakdown import breakdown
from reinforce_ada.research.compare.selection import SELECTION_RULES, restrict, split_keys
from reinforce_ada.research.compare.stats import interpolate, ratio_interval, steps_ratio, t_interval
from reinforce_ada.research.compare.verdict import AXES_IN_WORDS, call

__all__ = ["BEST_LR_RULES", "REPORT_FORMAT", "analyse", "choose_lrs", "jsonable", "split_runs"]

BEST_LR_RULES = ("tokens", "seconds", "final")
REPORT_FORMAT = 3
STEP, TOKENS, SECONDS, ACCURACY = range(4)  # the columns of a history row
AXES = {"steps": STEP, "tokens": TOKENS, "seconds": SECONDS}


def accuracy_at(history: list, column: int, budget: float) -> float:
    return interpolate([h[column] for h in history], [h[ACCURACY] for h in history], budget)


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _by_strategy(runs: dict[tuple[str, float, int], dict], strategies: list[str]) -> dict[str, dict]:
    by: dict[str, dict[float, dict[int, dict]]] = {s: {} for s in strategies}
    for (strategy, lr, seed), run in runs.items():
        by[strategy].setdefault(lr, {})[seed] = run
    return by


def _final_mean(by_seed: dict[int, dict]) -> float:
    return _mean([r["history"][-1][ACCURACY] for r in by_seed.values()])


def choose_lrs(by: dict[str, dict], baseline: str, best_lr_rule: str) -> tuple[dict[str, float], dict[str, float]]:
    """``(best lr per strategy, budgets)`` by the rules of the module docstring, from the runs by strategy, lr and
    seed: the baseline's lr by mean final accuracy, its budgets at that lr, every other strategy's by the rule."""
    base_lr = max(sorted(by[baseline]), key=lambda lr: _final_mean(by[baseline][lr]))
    base = by[baseline][base_lr]
    budgets = {"steps": max(r["history"][-1][STEP] for r in base.values()),
               "tokens": _mean([r["history"][-1][TOKENS] for r in base.values()]),
               "seconds": _mean([r["history"][-1][SECONDS] for r in base.values()])}

    def score(by_seed):  # what the best-lr rule maximises
        if best_lr_rule == "final":
            return _final_mean(by_seed)
        column = AXES[best_lr_rule]
        return _mean([accuracy_at(r["history"], column, budgets[best_lr_rule]) for r in by_seed.values()])

    best = {strategy: base_lr if strategy == baseline else max(sorted(lrs), key=lambda lr: score(lrs[lr]))
            for strategy, lrs in by.items() if lrs}
    return best, budgets


def split_runs(runs: dict[tuple[str, float, int], dict]) -> tuple[dict, dict, dict[str, float], dict[str, dict]]:
    """``(runs on the selection prompts, runs on the report prompts, mean prompts per seed in each, the halves by
    seed)``: every run restricted to its seed's halves (:mod:`.selection`; ``{"<seed>": {"selection": [prompt key,
    ...], "report": [...]}}``); ValueError names a run that logged no per-prompt results."""
    chooser, judged, sizes, halves = {}, {}, {"selection": [], "report": []}, {}
    for key, run in runs.items():
        if not run.get("per_prompt"):
            strategy, lr, seed = key
            raise ValueError(f"{strategy} lr {lr:g} seed {seed} logged no per-prompt held-out results "
                             f"(held_out.jsonl, written since this version): its lr cannot be chosen on other prompts "
                             f"than those it is reported on")
        selection, report = split_keys(key[2], run["per_prompt"]["keys"])
        chooser[key], judged[key] = restrict(run, selection), restrict(run, report)
        sizes["selection"].append(len(selection))
        sizes["report"].append(len(report))
        halves[str(key[2])] = {"selection": sorted(selection), "report": sorted(report)}
    return chooser, judged, {part: _mean(values) for part, values in sizes.items()}, dict(sorted(halves.items()))


def analyse(runs: dict[tuple[str, float, int], dict], strategies: list[str], lrs: list[float], baseline: str,
            best_lr_rule: str, selection: str = "same") -> dict[str, Any]:
    """The report (see the module docstring) from ``runs[(strategy, lr, seed)] = {"history": [...], "timing":
    {...}, "zero_variance": float | None}``, the finished runs (a missing one is left out; its seeds are not paired),
    each optionally with ``evals``, ``strata``, ``dynamics`` and ``per_prompt``
    (:func:`~reinforce_ada.research.compare.runs.read_run`; a run without them has no breakdown). ``selection``:
    ``"split"`` chooses the lrs on one half of each seed's held-out prompts and reports on the other, ``"same"``
    chooses and reports on all of them (:mod:`.selection`)."""
    empty = {"evals": {}, "strata": None, "per_prompt": None,
             "dynamics": {"samples_per_step": [], "active_by_round": {}, "budget_by_pass_rate": {}}}
    runs = {key: {**empty, **run} for key, run in runs.items()}
    if selection not in SELECTION_RULES:
        raise ValueError(f"selection must be one of {', '.join(SELECTION_RULES)} (got {selection!r})")
    if not any(strategy == baseline for strategy, _, _ in runs):
        raise ValueError(f"no finished run of the baseline {baseline}: nothing to compare against")
    if selection == "split":
        chooser, judged, sizes, halves = split_runs(runs)
    else:
        chooser = judged = runs
        sizes, halves = {"selection": None, "report": None}, None
    best_lrs, budgets = choose_lrs(_by_strategy(chooser, strategies), baseline, best_lr_rule)
    by = _by_strategy(judged, strategies)
    on_report = choose_lrs(by, baseline, best_lr_rule)[0] if selection == "split" else best_lrs
    base_lr = best_lrs[baseline]
    base = by[baseline][base_lr]
    report: dict[str, Any] = {"format": REPORT_FORMAT, "baseline": baseline, "best_lr_rule": best_lr_rule,
                              "lrs": sorted(lrs), "seeds": sorted(base), "budgets": budgets,
                              "selection": {"rule": selection, "num_prompts": sizes, "prompts": halves,
                                            "winner_changed": sorted(s for s in best_lrs
                                                                     if on_report[s] != best_lrs[s])},
                              "strategies": {}}
    grid = sorted(lrs)
    for strategy in strategies:
        if not by[strategy]:
            continue
        best = best_lrs[strategy]
        edge = None
        if len(grid) == 1:
            edge = "only"
        elif best in (grid[0], grid[-1]):
            edge = "lowest" if best == grid[0] else "highest"
        entry: dict[str, Any] = {"best_lr": best, "best_lr_at_edge": edge,
                                 "best_lr_on_report_prompts": on_report[strategy], "per_lr": {}}
        for lr in sorted(by[strategy]):
            seeds = sorted(by[strategy][lr])
            hist = [by[strategy][lr][s]["history"] for s in seeds]
            entry["per_lr"][repr(lr)] = {
                "seeds": seeds, "start": [h[0][ACCURACY] for h in hist], "final": [h[-1][ACCURACY] for h in hist],
                "at_tokens": [accuracy_at(h, TOKENS, budgets["tokens"]) for h in hist],
                "at_seconds": [accuracy_at(h, SECONDS, budgets["seconds"]) for h in hist],
                "tokens": [h[-1][TOKENS] for h in hist], "seconds": [h[-1][SECONDS] for h in hist],
                "short_of_tokens": sum(h[-1][TOKENS] < budgets["tokens"] for h in hist),
                "short_of_seconds": sum(h[-1][SECONDS] < budgets["seconds"] for h in hist)}
        chosen = by[strategy][best]
        paired = sorted(set(chosen) & set(base))
        mine, theirs = [chosen[s]["history"] for s in paired], [base[s]["history"] for s in paired]
        differences = {
            "at_steps": [accuracy_at(m, STEP, t[-1][STEP]) - t[-1][ACCURACY] for m, t in zip(mine, theirs)],
            "at_tokens": [accuracy_at(m, TOKENS, budgets["tokens"]) - accuracy_at(t, TOKENS, budgets["tokens"])
                          for m, t in zip(mine, theirs)],
            "at_seconds": [accuracy_at(m, SECONDS, budgets["seconds"]) - accuracy_at(t, SECONDS, budgets["seconds"])
                           for m, t in zip(mine, theirs)]}
        entry["paired"] = {"seeds": paired, **differences}
        entry["paired_mean_ci95"] = {k: list(t_interval(v)) for k, v in differences.items()}
        entry["verdict"] = None if strategy == baseline else {axis: call(differences[axis]) for axis in AXES_IN_WORDS}
        if paired:
            entry["steps_to_baseline_final"] = _with_reason(steps_ratio([_curve(h) for h in mine],
                                                                        [_curve(h) for h in theirs]),
                                                            len(paired), strategy == baseline)
        entry["cost_ratios"] = {
            axis: ratio_interval([m[-1][column] for m in mine], [t[-1][column] for t in theirs])
            for axis, column in (("tokens", TOKENS), ("seconds", SECONDS))}
        timings = [r["timing"] for r in chosen.values()]
        entry["seconds_per_step"] = {part: _mean([t[part] for t in timings if t.get(part) is not None])
                                     for part in ("step", "generation", "scoring", "update", "sync")}
        zero_variance = [r["zero_variance"] for r in chosen.values() if r.get("zero_variance") is not None]
        entry["zero_variance"] = _mean(zero_variance)
        entry["breakdown"] = breakdown(chosen, base, paired, budgets, strategy == baseline)
        report["strategies"][strategy] = entry
    report["runs"] = [{"strategy": s, "lr": lr, "seed": seed, "history": run["history"], "evals": run["evals"],
                       "strata": run["strata"], "dynamics": run["dynamics"]}
                      for (s, lr, seed), run in sorted(judged.items(), key=lambda kv: (strategies.index(kv[0][0]),
                                                                                       kv[0][1], kv[0][2]))]
    return report


def _curve(history: list) -> tuple[list, list]:
    return [h[STEP] for h in history], [h[ACCURACY] for h in history]


def jsonable(value: Any) -> Any:
    """``value`` with every non-finite float as None (strict JSON: nan is "not defined", inf "never reached")."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


MIN_SEEDS_FOR_STEPS_INTERVAL = 3
"""Paired seeds the steps ratio's bootstrap interval needs: over 2 seeds a resample is one of 3 sets (a a, a b, b b),
too few to make an interval of; with fewer the ratio is reported without one, saying so."""


def _with_reason(result: dict[str, float], num_seeds: int, baseline: bool = False) -> dict[str, Any]:
    """:func:`steps_ratio`'s result made consistent for JSON: a point that is not finite nulls its interval too, an
    infinite bound is null, each with the ``reason`` (None when all three are finite numbers). An interval that cannot
    say how uncertain the ratio is -- over fewer than :data:`MIN_SEEDS_FOR_STEPS_INTERVAL` seeds, or of zero width
    (every resample crossed at the same evaluation step) -- is null too, the reason naming what it needs (not for
    ``baseline``, the baseline against itself: exactly 1 [1, 1])."""
    ratio, low, high = result["ratio"], result["ratio_low"], result["ratio_high"]
    reasons = []
    if math.isnan(ratio):
        reasons.append("the baseline's mean curve never improved on its start (its final accuracy is reached at once), "
                       "so there is no number of steps to compare with")
    elif math.isinf(ratio):
        reasons.append("the strategy's mean curve never reached the baseline's mean final accuracy")
    if reasons:
        return {**result, "ratio": math.nan, "ratio_low": math.nan, "ratio_high": math.nan, "reason": reasons[0]}
    if num_seeds < MIN_SEEDS_FOR_STEPS_INTERVAL and not baseline:
        return {**result, "ratio_low": math.nan, "ratio_high": math.nan,
                "reason": f"{num_seeds} paired seed{'s' if num_seeds != 1 else ''}: too few for the bootstrap "
                          f"interval, which needs more seeds (at least {MIN_SEEDS_FOR_STEPS_INTERVAL})"}
    if low == high and not baseline:
        return {**result, "ratio_low": math.nan, "ratio_high": math.nan,
                "reason": f"every bootstrap resample of the {num_seeds} seeds crossed at the same evaluation step, so "
                          f"the interval has zero width and says nothing: it needs more seeds (or a smaller "
                          f"--eval-steps)"}
    if math.isinf(high):
        reasons.append("some bootstrap resamples never reach it, so the interval is unbounded above (ratio_high null)")
    if math.isnan(low) or math.isnan(high):
        reasons.append("no bootstrap resample was defined")
    elif not low <= ratio <= high:
        reasons.append("the point lies outside its bootstrap percentile interval (a skewed resampling distribution)")
    return {**result, "reason": "; ".join(reasons) or None}
