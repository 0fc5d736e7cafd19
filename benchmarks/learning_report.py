"""The learning benchmark's tables and plots: everything ``benchmarks/learning.py`` reports, computed by
``reinforce-ada compare``'s report and statistics (reinforce_ada/research/compare/report.py, stats.py) from
the JSON rows it writes (``{"rows": [{"task", "strategy", "lr", "seed", "history": [[step, tokens, accuracy],
...]}]}`` and the ``_details`` file), so a report can be recomputed without training (``--from-json``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from learning_strategies import PAPER_STRATEGIES
from reinforce_ada.research.compare.report import analyse as compare_analyse
from reinforce_ada.research.compare.stats import first_crossing, fmt, interpolate, t_interval
from reinforce_ada.research.compare.stats import steps_ratio as compare_steps_ratio

__all__ = ["BUCKETS", "accuracy_at_step", "accuracy_at_tokens", "analyse", "first_crossing", "fmt",
           "plot", "print_report", "steps_ratio", "t_interval"]

BUCKETS = ((0.0, 0.0, "p=0"), (0.0, 0.25, "0<p<=.25"), (0.25, 0.75, ".25<p<.75"), (0.75, 1.0, ".75<=p<1"),
           (1.0, 1.0, "p=1"))
"""Difficulty buckets by the start model's per-prompt pass rate p: (low, high, label)."""


# -- statistics: reinforce_ada.research.compare.stats, on this benchmark's [step, tokens, accuracy] histories -------
def accuracy_at_tokens(history, budget: float) -> float:
    """Accuracy after ``budget`` generated tokens, linearly interpolated on one run's [step, tokens, accuracy]
    history; a run that generated fewer tokens than ``budget`` counts at its final accuracy."""
    return interpolate([h[1] for h in history], [h[2] for h in history], budget)


def accuracy_at_step(history, step: float) -> float:
    """Accuracy at optimizer step ``step``, linearly interpolated on one run's [step, tokens, accuracy] history."""
    return interpolate([h[0] for h in history], [h[2] for h in history], step)


def steps_ratio(strategy_runs, grpo_runs, num_boot: int = 2000, seed: int = 0) -> dict:
    """:func:`reinforce_ada.research.compare.stats.steps_ratio` on [step, tokens, accuracy] histories, its
    ``baseline_steps`` named ``grpo_steps``."""
    def curves(runs):
        return [([h[0] for h in run], [h[2] for h in run]) for run in runs]

    out = compare_steps_ratio(curves(strategy_runs), curves(grpo_runs), num_boot, seed)
    out["grpo_steps"] = out.pop("baseline_steps")
    return out


# -- reporting: compare's report (reinforce_ada.research.compare.report.analyse), GRPO the baseline ---------------
def analyse(task: str, rows: list[dict], details: dict) -> dict:
    """Every figure the docs report for one task, from the JSON rows (and the details file, when present): compare's
    report at GRPO's token budget (its step seconds are not in these rows), in this benchmark's keys, with the
    zero-variance fractions, the per-step ordering of the paper's strategies and the difficulty buckets."""
    runs, strategies, lrs = {}, [], []
    for row in rows:
        if row["task"] == task:
            history = [[step, tokens, math.nan, accuracy] for step, tokens, accuracy in row["history"]]
            runs[(row["strategy"], row["lr"], row["seed"])] = {"history": history, "timing": {}}
            strategies += [row["strategy"]] if row["strategy"] not in strategies else []
            lrs += [row["lr"]] if row["lr"] not in lrs else []
    if "grpo" not in strategies:
        raise ValueError(f"task {task}: the report compares against GRPO; run --strategies grpo as well")
    compared = compare_analyse(runs, strategies, lrs, "grpo", "tokens")
    grpo_lr = compared["strategies"]["grpo"]["best_lr"]
    report: dict = {"task": task, "grpo_lr": grpo_lr, "grpo_token_budget": compared["budgets"]["tokens"],
                    "seeds": compared["seeds"], "strategies": {}}
    zero_var = details.get("zero_variance", {}).get(task, {})
    for strategy, entry in compared["strategies"].items():
        per_lr = {float(lr): {"at_budget": cell["at_tokens"], "final": cell["final"], "tokens": cell["tokens"],
                              "short_of_budget": cell["short_of_tokens"]} for lr, cell in entry["per_lr"].items()}
        best = entry["best_lr"]
        out = {"best_lr": best, "per_lr": per_lr, "start": entry["per_lr"][repr(best)]["start"]}
        if entry["paired"]["seeds"] == compared["seeds"]:
            steps = dict(entry["steps_to_baseline_final"])
            steps["grpo_steps"] = steps.pop("baseline_steps")
            out.update(steps=steps, gain_vs_grpo_at_budget=entry["paired"]["at_tokens"],
                       gain_vs_grpo_final=entry["paired"]["at_steps"])
        zv = zero_var.get(strategy, {}).get(str(best), {})
        if zv:
            out["zero_variance_mean"] = [float(np.mean(v)) for v in zv.values()]
            out["zero_variance_step1"] = [v[0] for v in zv.values()]
        report["strategies"][strategy] = out
    by_seed = {s: {seed: row["history"] for (name, lr, seed), row in runs.items()
                   if name == s and lr == report["strategies"][s]["best_lr"]} for s in strategies}
    # per-step ordering of the paper's strategies, each at its best lr (mean curves)
    if all(s in strategies for s in PAPER_STRATEGIES):
        curves = {s: np.mean([[h[3] for h in run] for run in by_seed[s].values()], axis=0) for s in PAPER_STRATEGIES}
        steps = [h[0] for h in next(iter(by_seed["grpo"].values()))]
        later = [i for i, step in enumerate(steps) if step > 0]
        report["ordering"] = {
            "steps": [steps[i] for i in later],
            "balanced_ge_positive": [bool(curves["ada-balanced"][i] >= curves["ada-positive"][i]) for i in later],
            "positive_ge_grpo": [bool(curves["ada-positive"][i] >= curves["grpo"][i]) for i in later],
        }
    start = details.get("start_pass_rates", {}).get(task)
    ends = details.get("end_pass_rates", {}).get(task, {})
    baseline = details.get("start_pass_rates_baseline", {}).get(task)
    if start and baseline:
        start, baseline = np.asarray(start), np.asarray(baseline)
        report["start_zero_variance_closed_form_n4"] = float(np.mean(start ** 4 + (1 - start) ** 4))
        report["start_pass_rate_histogram"] = {label: int(np.sum(_in_bucket(start, lo, hi)))
                                               for lo, hi, label in BUCKETS}
        buckets = {}
        for strategy, by_lr in ends.items():
            per_seed = by_lr.get(str(report["strategies"].get(strategy, {}).get("best_lr")), {})
            if not per_seed:
                continue
            buckets[strategy] = {label: [float(np.mean(np.asarray(rates)[_in_bucket(start, lo, hi)] -
                                                       baseline[_in_bucket(start, lo, hi)]))
                                         for rates in per_seed.values() if np.any(_in_bucket(start, lo, hi))]
                                 for lo, hi, label in BUCKETS}
        report["bucket_gain"] = buckets
    return report


def _in_bucket(rates: np.ndarray, low: float, high: float) -> np.ndarray:
    if low == high:
        return rates == low
    if low == 0.0:
        return (rates > 0.0) & (rates <= high)
    if high == 1.0:
        return (rates >= low) & (rates < 1.0)
    return (rates > low) & (rates < high)


def print_report(report: dict) -> None:
    task, budget = report["task"], report["grpo_token_budget"]
    print(f"\n== {task}: seeds {report['seeds']}; GRPO's token budget B = {budget:,.0f} generated tokens "
          f"(GRPO at lr {report['grpo_lr']:g}, whole run) ==")
    if "start_zero_variance_closed_form_n4" in report:
        print(f"start model: per-prompt pass rates {report['start_pass_rate_histogram']}; "
              f"expected zero-variance fraction of a GRPO n=4 group {report['start_zero_variance_closed_form_n4']:.3f}")
    print("mean ± 95% t-interval over seeds; acc@B: held-out accuracy after B generated tokens")
    print(f"{'strategy @ lr':<28}{'acc@B':>16}{'final acc':>16}{'tokens':>18}{'short':>6}")
    for strategy, entry in report["strategies"].items():
        for lr, cell in sorted(entry["per_lr"].items()):
            mark = " *" if lr == entry["best_lr"] else ""
            print(f"{f'{strategy} @ {lr:g}{mark}':<28}{fmt(cell['at_budget']):>16}{fmt(cell['final']):>16}"
                  f"{fmt(cell['tokens'], 0):>18}{cell['short_of_budget']:>6}")
    print("(* best lr; short: runs that generated fewer than B tokens in all, counted at their final accuracy)")
    print(f"\neach at its best lr{'':<10}{'acc@B':>16}{'vs GRPO (paired)':>20}{'steps to GRPO final':>22}"
          f"{'x GRPO [95% bootstrap]':>26}{'final vs GRPO (paired)':>24}{'zero-var':>16}{'zero-var step 1':>18}")
    for strategy, entry in report["strategies"].items():
        cell = entry["per_lr"][entry["best_lr"]]
        steps = entry.get("steps", {})
        gain = fmt(entry["gain_vs_grpo_at_budget"], 3) if "gain_vs_grpo_at_budget" in entry else "-"
        ratio = (f"{steps['ratio']:.2f} [{steps['ratio_low']:.2f}, {steps['ratio_high']:.2f}]" if steps else "-")
        final_gain = fmt(entry["gain_vs_grpo_final"], 3) if "gain_vs_grpo_final" in entry else "-"
        zv = fmt(entry["zero_variance_mean"]) if "zero_variance_mean" in entry else "-"
        zv1 = fmt(entry["zero_variance_step1"]) if "zero_variance_step1" in entry else "-"
        label = f"{strategy} @ {entry['best_lr']:g}"
        print(f"{label:<29}{fmt(cell['at_budget']):>16}{gain:>20}{steps.get('steps', math.nan):>22.1f}{ratio:>26}"
              f"{final_gain:>24}{zv:>16}{zv1:>18}")
    if "ordering" in report:
        order = report["ordering"]
        print(f"per-step ordering of the mean curves (each at its best lr), over {len(order['steps'])} evaluations: "
              f"Ada-balanced >= Ada-positive at {sum(order['balanced_ge_positive'])}, "
              f"Ada-positive >= GRPO at {sum(order['positive_ge_grpo'])}")
    if report.get("bucket_gain"):
        labels = [label for _, _, label in BUCKETS]
        print("accuracy gain (end - start pass rate) by the start model's pass-rate bucket (buckets from an independent "
              "start estimate), mean ± 95% over seeds:")
        print(f"{'strategy':<22}" + "".join(f"{label:>18}" for label in labels))
        for strategy, gains in report["bucket_gain"].items():
            print(f"{strategy:<22}" + "".join(f"{fmt(gains[label]) if gains[label] else '-':>18}" for label in labels))


def plot(report: dict, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task = report["task"]
    fig, (ax_tok, ax_step) = plt.subplots(1, 2, figsize=(12, 4.2))
    for strategy, entry in report["strategies"].items():
        histories = [r["history"] for r in rows if r["task"] == task and r["strategy"] == strategy
                     and r["lr"] == entry["best_lr"]]
        label = f"{strategy} (lr {entry['best_lr']:g})"
        steps = [h[0] for h in histories[0]]
        acc = np.array([[h[2] for h in run] for run in histories])
        grid = np.linspace(0, min(run[-1][1] for run in histories), 60)
        acc_tok = np.array([[accuracy_at_tokens(run, b) for b in grid] for run in histories])
        for ax, x, values in ((ax_step, steps, acc), (ax_tok, grid, acc_tok)):
            mean = values.mean(axis=0)
            half = np.array([t_interval(values[:, i])[1] for i in range(values.shape[1])])
            line, = ax.plot(x, mean, label=label, lw=1.5)
            if len(histories) > 1:
                ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.15)
    ax_tok.axvline(report["grpo_token_budget"], color="gray", ls="--", lw=1, label="GRPO's token budget")
    for ax, xlabel in ((ax_tok, "generated tokens"), (ax_step, "optimizer step")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out sampled accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"tiny model, {task}: each strategy at its best lr, mean and 95% t-interval over "
                 f"{len(report['seeds'])} seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
