"""The report of ``reinforce-ada compare``: every strategy at its own best learning rate against the baseline, at equal
steps, at the baseline's generated-token budget and at the baseline's wall-clock, from the runs' histories.

Input: one history per run, ``[[step, generated tokens, step seconds, held-out accuracy], ...]`` (step 0 included;
tokens and seconds cumulative; seconds are ``time/step_seconds``: generation + scoring + update + weight sync, no
held-out evaluations or checkpoints).

The rules, fixed before any run (the comparison's ``compare.json`` records them and a rerun cannot change them):

* **budgets**: S = the baseline's last step; B_tokens and B_seconds = the mean over seeds of the baseline's total
  generated tokens and step seconds, at its best lr.
* **best lr**: the baseline's is the lr with the highest mean final accuracy; every other strategy's is by
  ``best_lr_rule``: ``final`` (highest mean final accuracy), ``tokens`` (highest mean accuracy at B_tokens) or
  ``seconds`` (at B_seconds). A best lr at the lowest or highest lr of the grid is flagged (the optimum may lie
  outside it).
* **paired differences**, per seed the baseline also ran, then mean ± 95% Student-t interval: the strategy's
  accuracy at step S minus the baseline's final accuracy (``at_steps``); accuracy at B_tokens minus the baseline's
  at B_tokens (``at_tokens``); the same at B_seconds (``at_seconds``). A run's accuracy at a budget is linearly
  interpolated on its own history; a run that used less than the budget counts at its final accuracy (counted as
  ``short_of_tokens`` / ``short_of_seconds``).
* **steps to the baseline's final accuracy**: the first step at which the strategy's mean curve reaches the
  baseline's mean final accuracy, as a ratio of the baseline's own, with a paired bootstrap 95% interval over seeds
  (2000 resamples; null in JSON: never reached, or the baseline never improved on its start).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from reinforce_ada.research.compare.stats import fmt, interpolate, steps_ratio, t_interval

__all__ = ["BEST_LR_RULES", "REPORT_FORMAT", "analyse", "format_report", "jsonable"]

BEST_LR_RULES = ("tokens", "seconds", "final")
REPORT_FORMAT = 1
STEP, TOKENS, SECONDS, ACCURACY = range(4)  # the columns of a history row
AXES = {"steps": STEP, "tokens": TOKENS, "seconds": SECONDS}


def accuracy_at(history: list, column: int, budget: float) -> float:
    return interpolate([h[column] for h in history], [h[ACCURACY] for h in history], budget)


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def analyse(runs: dict[tuple[str, float, int], dict], strategies: list[str], lrs: list[float], baseline: str,
            best_lr_rule: str) -> dict[str, Any]:
    """The report (see the module docstring) from ``runs[(strategy, lr, seed)] = {"history": [...], "timing":
    {...}, "zero_variance": float | None}``, the finished runs (a missing one is left out; its seeds are not paired)."""
    by: dict[str, dict[float, dict[int, dict]]] = {s: {} for s in strategies}
    for (strategy, lr, seed), run in runs.items():
        by[strategy].setdefault(lr, {})[seed] = run
    if not by[baseline]:
        raise ValueError(f"no finished run of the baseline {baseline}: nothing to compare against")

    def final_mean(by_seed):
        return _mean([r["history"][-1][ACCURACY] for r in by_seed.values()])

    base_lr = max(sorted(by[baseline]), key=lambda lr: final_mean(by[baseline][lr]))
    base = by[baseline][base_lr]
    budgets = {"steps": max(r["history"][-1][STEP] for r in base.values()),
               "tokens": _mean([r["history"][-1][TOKENS] for r in base.values()]),
               "seconds": _mean([r["history"][-1][SECONDS] for r in base.values()])}

    def score(by_seed):  # what the best-lr rule maximises
        if best_lr_rule == "final":
            return final_mean(by_seed)
        column = AXES[best_lr_rule]
        return _mean([accuracy_at(r["history"], column, budgets[best_lr_rule]) for r in by_seed.values()])

    report: dict[str, Any] = {"format": REPORT_FORMAT, "baseline": baseline, "best_lr_rule": best_lr_rule,
                              "lrs": sorted(lrs), "seeds": sorted(base), "budgets": budgets, "strategies": {}}
    grid = sorted(lrs)
    for strategy in strategies:
        if not by[strategy]:
            continue
        best = base_lr if strategy == baseline else max(sorted(by[strategy]), key=lambda lr: score(by[strategy][lr]))
        edge = None
        if len(grid) > 1 and best in (grid[0], grid[-1]):
            edge = "lowest" if best == grid[0] else "highest"
        entry: dict[str, Any] = {"best_lr": best, "best_lr_at_edge": edge, "per_lr": {}}
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
        if paired:
            entry["steps_to_baseline_final"] = steps_ratio([_curve(h) for h in mine], [_curve(h) for h in theirs])
        entry["tokens_ratio"] = _mean([h[-1][TOKENS] for h in mine]) / _mean([h[-1][TOKENS] for h in theirs]) \
            if paired else math.nan
        entry["seconds_ratio"] = _mean([h[-1][SECONDS] for h in mine]) / _mean([h[-1][SECONDS] for h in theirs]) \
            if paired else math.nan
        timings = [r["timing"] for r in chosen.values()]
        entry["seconds_per_step"] = {part: _mean([t[part] for t in timings if t.get(part) is not None])
                                     for part in ("step", "generation", "scoring", "update", "sync")}
        zero_variance = [r["zero_variance"] for r in chosen.values() if r.get("zero_variance") is not None]
        entry["zero_variance"] = _mean(zero_variance)
        report["strategies"][strategy] = entry
    report["runs"] = [{"strategy": s, "lr": lr, "seed": seed, "history": run["history"]}
                      for (s, lr, seed), run in sorted(runs.items(), key=lambda kv: (strategies.index(kv[0][0]),
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


def _ci(pair) -> str:
    mean, half = pair
    return "-" if math.isnan(mean) else f"{mean:+.3f} ± {half:.3f}" if not math.isnan(half) else f"{mean:+.3f}"


def format_report(report: dict[str, Any], notes: list[str] = ()) -> str:
    """The report as markdown: the budgets and rules, a table per (strategy, lr), and each strategy at its best lr
    against the baseline."""
    b, base = report["budgets"], report["baseline"]
    lines = [f"Baseline {base} at lr {report['strategies'][base]['best_lr']:g}; seeds {report['seeds']}; budgets: "
             f"{b['steps']:g} steps, {b['tokens']:,.0f} generated tokens, {b['seconds']:,.1f} s of steps "
             f"(the baseline's mean totals). Best lr of the others: highest mean "
             + {"final": "final accuracy", "tokens": "accuracy at the baseline's token budget",
                "seconds": "accuracy at the baseline's seconds"}[report["best_lr_rule"]]
             + f" (rule `{report['best_lr_rule']}`); the baseline's: highest mean final accuracy.", ""]
    lines += ["| strategy @ lr | runs | final accuracy | at B tokens | at B seconds | tokens | step seconds |",
              "|---|---|---|---|---|---|---|"]
    for strategy, entry in report["strategies"].items():
        for lr_key, cell in entry["per_lr"].items():
            mark = " *" if float(lr_key) == entry["best_lr"] else ""
            lines.append(f"| {strategy} @ {float(lr_key):g}{mark} | {len(cell['seeds'])} | {fmt(cell['final'])} | "
                         f"{fmt(cell['at_tokens'])} | {fmt(cell['at_seconds'])} | {fmt(cell['tokens'], 0)} | "
                         f"{fmt(cell['seconds'], 1)} |")
    lines += ["", "(* best lr; mean ± 95% t-interval over seeds)", "",
              f"| each at its best lr | vs {base} at equal steps | at {base}'s tokens | at {base}'s seconds | "
              f"steps to {base}'s final, x [95%] | tokens x | seconds x | s/step: generation / scoring / update / "
              f"sync |", "|---|---|---|---|---|---|---|---|"]
    for strategy, entry in report["strategies"].items():
        ci = entry["paired_mean_ci95"]
        steps = entry.get("steps_to_baseline_final")
        ratio = "-" if not steps or math.isnan(steps["ratio"]) else \
            f"{steps['ratio']:.2f} [{steps['ratio_low']:.2f}, {steps['ratio_high']:.2f}]"
        t = entry["seconds_per_step"]
        split = " / ".join("-" if math.isnan(t[p]) else f"{t[p]:.3f}"
                           for p in ("generation", "scoring", "update", "sync"))
        edge = f" (edge: {entry['best_lr_at_edge']})" if entry["best_lr_at_edge"] else ""
        lines.append(f"| {strategy} @ {entry['best_lr']:g}{edge} | {_ci(ci['at_steps'])} | {_ci(ci['at_tokens'])} | "
                     f"{_ci(ci['at_seconds'])} | {ratio} | {entry['tokens_ratio']:.2f} | {entry['seconds_ratio']:.2f} "
                     f"| {split} |")
    lines += ["", "(paired by seed: the strategy's accuracy minus the baseline's, mean ± 95% t-interval; edge: the best "
                  "lr is the lowest or highest of the grid, so a better one may lie outside it)"]
    return "\n".join(lines + [f"{note}" for note in notes]) + "\n"
