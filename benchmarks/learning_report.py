"""The learning benchmark's statistics, tables and plots: everything ``benchmarks/learning.py`` reports, computed
from the JSON rows it writes (``{"rows": [{"task", "strategy", "lr", "seed", "history": [[step, tokens, accuracy],
...]}]}`` and the ``_details`` file), so a report can be recomputed without training (``--from-json``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from learning_strategies import PAPER_STRATEGIES

BUCKETS = ((0.0, 0.0, "p=0"), (0.0, 0.25, "0<p<=.25"), (0.25, 0.75, ".25<p<.75"), (0.75, 1.0, ".75<=p<1"),
           (1.0, 1.0, "p=1"))
"""Difficulty buckets by the start model's per-prompt pass rate p: (low, high, label)."""
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 25: 2.060, 30: 2.042}


# -- statistics -----------------------------------------------------------------------------------------------------
def t_interval(values) -> tuple[float, float]:
    """(mean, half-width of the two-sided 95% Student-t interval); half-width nan for fewer than two values."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()) if len(values) else math.nan, math.nan
    df = len(values) - 1
    t = _T975.get(df) or (_T975[max(k for k in _T975 if k <= df)] if df < 30 else 1.96)
    return float(values.mean()), float(t * values.std(ddof=1) / math.sqrt(len(values)))


def fmt(values, digits: int = 3, scale: float = 1.0) -> str:
    mean, half = t_interval(np.asarray(values, dtype=float) * scale)
    return f"{mean:.{digits}f} ± {half:.{digits}f}" if not math.isnan(half) else f"{mean:.{digits}f}"


def accuracy_at_tokens(history, budget: float) -> float:
    """Accuracy after ``budget`` generated tokens, linearly interpolated on one run's [step, tokens, accuracy]
    history; a run that generated fewer tokens than ``budget`` counts at its final accuracy."""
    tokens = [h[1] for h in history]
    accuracy = [h[2] for h in history]
    return float(np.interp(budget, tokens, accuracy))


def accuracy_at_step(history, step: float) -> float:
    """Accuracy at optimizer step ``step``, linearly interpolated on one run's [step, tokens, accuracy] history (a run
    that ended earlier counts at its final accuracy): the per-step comparison at GRPO's last step."""
    return float(np.interp(step, [h[0] for h in history], [h[2] for h in history]))


def first_crossing(steps, accuracy, target: float) -> float:
    """First step at which a curve reaches ``target`` (linear interpolation between evaluations); inf if never."""
    for i, value in enumerate(accuracy):
        if value >= target:
            if i == 0:
                return float(steps[0])
            s0, s1, a0, a1 = steps[i - 1], steps[i], accuracy[i - 1], accuracy[i]
            return float(s0 + (s1 - s0) * (target - a0) / (a1 - a0))
    return math.inf


def mean_curve(histories) -> tuple[list[int], np.ndarray]:
    steps = [h[0] for h in histories[0]]
    return steps, np.mean([[h[2] for h in run] for run in histories], axis=0)


def steps_ratio(strategy_runs, grpo_runs, num_boot: int = 2000, seed: int = 0) -> dict:
    """Steps for the strategy's mean curve to reach GRPO's mean final accuracy, against GRPO's own, with a paired
    bootstrap over seeds (the two lists are aligned by seed). Each curve is read on its own steps, so a strategy may
    run for more (or fewer) steps than GRPO."""
    def ratio(idx):
        grpo_steps, grpo = mean_curve([grpo_runs[i] for i in idx])
        my_steps, mine = mean_curve([strategy_runs[i] for i in idx])
        target = grpo[-1]
        return first_crossing(my_steps, mine, target), first_crossing(grpo_steps, grpo, target)

    own, grpo_steps = ratio(range(len(grpo_runs)))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(num_boot):
        mine, theirs = ratio(rng.integers(0, len(grpo_runs), len(grpo_runs)))
        boots.append(mine / theirs if theirs > 0 else math.nan)
    boots = [b for b in boots if not math.isnan(b)]  # resamples where GRPO never improved on its start
    num_boot = len(boots)
    if not boots:
        return {"steps": own, "grpo_steps": grpo_steps, "ratio": math.nan, "ratio_low": math.nan,
                "ratio_high": math.nan}
    boots.sort()  # percentiles by rank, so that "never reached" (inf) counts as the largest value
    low, high = boots[int(0.025 * num_boot)], boots[min(num_boot - 1, int(0.975 * num_boot))]
    return {"steps": own, "grpo_steps": grpo_steps, "ratio": own / grpo_steps if grpo_steps > 0 else math.nan,
            "ratio_low": float(low), "ratio_high": float(high)}


# -- reporting --------------------------------------------------------------------------------------------------------
def analyse(task: str, rows: list[dict], details: dict) -> dict:
    """Every figure the docs report for one task, from the JSON rows (and the details file, when present)."""
    runs: dict[str, dict[float, dict[int, list]]] = {}
    for row in rows:
        if row["task"] == task:
            runs.setdefault(row["strategy"], {}).setdefault(row["lr"], {})[row["seed"]] = row["history"]
    if "grpo" not in runs:
        raise ValueError(f"task {task}: the report compares against GRPO; run --strategies grpo as well")

    def final_mean(by_seed):
        return float(np.mean([h[-1][2] for h in by_seed.values()]))

    grpo_lr = max(runs["grpo"], key=lambda lr: final_mean(runs["grpo"][lr]))
    grpo = runs["grpo"][grpo_lr]
    budget = float(np.mean([h[-1][1] for h in grpo.values()]))

    def at_budget(by_seed):
        return float(np.mean([accuracy_at_tokens(h, budget) for h in by_seed.values()]))

    best = {s: grpo_lr if s == "grpo" else max(by_lr, key=lambda lr: at_budget(by_lr[lr])) for s, by_lr in runs.items()}
    seeds = sorted(grpo)
    report: dict = {"task": task, "grpo_lr": grpo_lr, "grpo_token_budget": budget, "seeds": seeds, "strategies": {}}
    zero_var = details.get("zero_variance", {}).get(task, {})
    for strategy, by_lr in runs.items():
        per_lr = {}
        for lr, by_seed in by_lr.items():
            per_lr[lr] = {"at_budget": [accuracy_at_tokens(by_seed[s], budget) for s in sorted(by_seed)],
                          "final": [by_seed[s][-1][2] for s in sorted(by_seed)],
                          "tokens": [by_seed[s][-1][1] for s in sorted(by_seed)],
                          "short_of_budget": sum(h[-1][1] < budget for h in by_seed.values())}
        chosen = by_lr[best[strategy]]
        entry = {"best_lr": best[strategy], "per_lr": per_lr,
                 "start": [chosen[s][0][2] for s in sorted(chosen)]}
        if sorted(chosen) == seeds:
            entry["steps"] = steps_ratio([chosen[s] for s in seeds], [grpo[s] for s in seeds])
            entry["gain_vs_grpo_at_budget"] = [accuracy_at_tokens(chosen[s], budget) - accuracy_at_tokens(grpo[s],
                                                                                                           budget)
                                               for s in seeds]
            entry["gain_vs_grpo_final"] = [accuracy_at_step(chosen[s], grpo[s][-1][0]) - grpo[s][-1][2]
                                           for s in seeds]
        zv = zero_var.get(strategy, {}).get(str(best[strategy]), {})
        if zv:
            entry["zero_variance_mean"] = [float(np.mean(v)) for v in zv.values()]
            entry["zero_variance_step1"] = [v[0] for v in zv.values()]
        report["strategies"][strategy] = entry
    # per-step ordering of the paper's strategies, each at its best lr (mean curves)
    if all(s in runs for s in PAPER_STRATEGIES):
        curves = {s: mean_curve(list(runs[s][best[s]].values()))[1] for s in PAPER_STRATEGIES}
        steps = mean_curve(list(grpo.values()))[0]
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
            per_seed = by_lr.get(str(best.get(strategy)), {})
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
