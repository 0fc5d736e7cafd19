"""Learning per generated token and per optimizer step: GRPO (n=4) against adaptive sampling, on the built-in tasks.

Every run starts from the task's shipped warm-started tiny model (``reinforce_ada/models/start_models``: the same
weights on every machine) and, for a given seed, sees the same prompts at every step (the prompt stream is seeded by
the RL seed only). Held-out sampled accuracy (``--eval-prompts`` test prompts x 4 samples) is measured at step 0 and
every ``--eval-every`` steps. Each strategy runs over the learning-rate grid ``--lrs`` and is reported at its own
best rate, so no strategy is judged at a rate tuned for another.

What it reports, per task (mean over seeds, 95% t-interval; details in docs/benchmarks.md):

* **accuracy at GRPO's token budget** (primary): B = GRPO's mean generated tokens over its whole run (at GRPO's best
  lr); each run's accuracy at B is read off its own accuracy-vs-tokens history by linear interpolation (a run that
  generated fewer than B tokens in all counts at its final accuracy). Best lr of every other strategy: the highest
  mean accuracy at B; GRPO's: the highest final accuracy.
* **steps to GRPO's final accuracy** (secondary): the first step at which the strategy's mean curve reaches GRPO's
  mean final accuracy (linear interpolation between evaluations), and its ratio to GRPO's own, with a bootstrap 95%
  interval over seeds.
* the zero-variance fraction of the kept groups per strategy (over the run and at step 1), the per-step ordering
  Ada-balanced >= Ada-positive >= GRPO of the mean curves, and the accuracy gain by difficulty bucket (held-out prompts
  bucketed by the start model's pass rate over ``--bucket-samples`` samples).

    python benchmarks/learning.py --task arithmetic arithmetic-mixed --seeds 0 1 2 3 4 --steps 40 --eval-every 4 \\
        --lrs 5e-4 1e-3 --strategies grpo ada-positive ada-balanced stream-mixed --json results.json

(the documented run's exact commands, split over processes, and its results: docs/benchmarks.md.)

``--json PATH`` writes ``{"rows": [{"task", "strategy", "lr", "seed", "history": [[step, total_generated_tokens,
heldout_accuracy], ...]}, ...]}`` (step 0 included), and next to it ``<stem>_details.json`` (zero-variance per step,
per-prompt pass rates for the buckets). ``--from-json PATH`` recomputes the tables and plots from such files without
training. Plots go to ``--docs``/img/learning-<task>.png unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np

PAPER_STRATEGIES = ("grpo", "ada-positive", "ada-balanced")
STREAM_ONE_AT_A_TIME = dict(mode="streaming", streaming=dict(allocation="fixed"), samples_per_round=1)
"""One sample per request without a round barrier (the streaming sampler on the HF backend)."""


def _stream(strategy: str, max_rounds: int, **sampler) -> dict:
    return dict(strategy=strategy, sampler=dict(STREAM_ONE_AT_A_TIME, max_rounds=max_rounds, **sampler))


def _budget(**sampler) -> dict:
    return dict(strategy="ada-budget", sampler=sampler)


STRATEGIES: dict[str, dict] = {  # name -> TrainConfig fields (the sampler's under "sampler")
    "grpo": dict(strategy="grpo"),
    "ada-positive": dict(strategy="ada-positive"),
    "ada-balanced": dict(strategy="ada-balanced"),
    # beyond the paper (docs/beyond_the_paper.md)
    "ada-mixed": dict(strategy="ada-mixed"),  # exit at one positive and one negative, rounds of M=8
    # one sample per request without a round barrier, paper's rule / mixed
    "stream-balanced": _stream("ada-balanced", 32),
    "stream-mixed": _stream("ada-mixed", 32),
    # the same with at most 8 samples per prompt (2x GRPO's): hopeless prompts cost 8, not 32
    "stream-mixed-cap8": _stream("ada-mixed", 8),
    "stream-mixed-cap6": _stream("ada-mixed", 6),
    # budget mode (branch budget): GRPO's samples per step (or --budget), spread by predicted value, mixed exit rule
    "ada-budget": _budget(),
    "ada-budget-probe2": _budget(budget_probe=2),  # 2 samples first, re-planned once scored
    "ada-budget-2x": _budget(sample_budget_per_step="2x"),  # twice GRPO's samples per step
    # a 2-sample probe that already holds both classes stops there, as a short group with signal
    "ada-budget-probe2-min2": _budget(budget_probe=2, budget_min_group=2),
    # over-draw: k x --batch-size candidate prompts per step, GRPO's samples for --batch-size of them, given to the
    # candidates the cross-step memory rates most likely to give signal (needs a recurring set: --train-prompts)
    "ada-budget-od1.5": _budget(budget_overdraw=1.5),
    "ada-budget-od2": _budget(budget_overdraw=2.0),
    "ada-budget-od3": _budget(budget_overdraw=3.0),
    "ada-budget-od2-probe2": _budget(budget_overdraw=2.0, budget_probe=2),
    "ada-budget-od2-mg2": _budget(budget_overdraw=2.0, budget_probe=2, budget_min_group=2),
    "ada-budget-od2-hl8": _budget(budget_overdraw=2.0, budget_half_life=8.0),  # slower forgetting
    "ada-budget-od3-hl8": _budget(budget_overdraw=3.0, budget_half_life=8.0),
    "ada-budget-od2-hlinf": _budget(budget_overdraw=2.0, budget_half_life=None),  # never forgets
    # train on the whole pool (selection="all"): every generated sample gets a gradient, as in GRPO, instead of n of
    # the pool (docs/benchmarks.md, "Training on the whole pool")
    "stream-mixed-all": _stream("ada-mixed", 32, selection="all"),
    "stream-mixed-cap8-all": _stream("ada-mixed", 8, selection="all"),
    "stream-mixed-cap6-all": _stream("ada-mixed", 6, selection="all"),
    "ada-mixed-all": dict(strategy="ada-mixed", sampler=dict(selection="all")),
    "ada-balanced-all": dict(strategy="ada-balanced", sampler=dict(selection="all")),
    # price of signal: skip what the memory rates below r signal groups per sample and leave its samples unspent
    # (GRESO's skipping), so a step costs fewer tokens and GRPO's token budget buys more steps; run with more
    # --steps than GRPO (needs a recurring set: --train-prompts)
    "ada-budget-price0.08": _budget(budget_min_signal_rate=0.08),
    "ada-budget-price0.10": _budget(budget_min_signal_rate=0.10),
    "ada-budget-price0.11": _budget(budget_min_signal_rate=0.11),
    "ada-budget-price0.12": _budget(budget_min_signal_rate=0.12),
    "ada-budget-price0.10-hl8": _budget(budget_min_signal_rate=0.10, budget_half_life=8.0),
    "ada-budget-price0.12-hl8": _budget(budget_min_signal_rate=0.12, budget_half_life=8.0),
    # higher prices: 0.08-0.12 skipped nothing on addition (the memory rates every prompt there at 0.18-0.21)
    "ada-budget-price0.13": _budget(budget_min_signal_rate=0.13),
    "ada-budget-price0.14": _budget(budget_min_signal_rate=0.14),
    "ada-budget-price0.14-hl8": _budget(budget_min_signal_rate=0.14, budget_half_life=8.0),
    # the mixed rule sampled one at a time without a round barrier, with the price of signal and memory
    "stream-mixed-priced": _stream("ada-mixed", 32, streaming=dict(allocation="fixed", min_signal_rate=0.015,
                                                                   budget=128),
                                   memory=dict(enabled=True, half_life=8.0)),
}
GROUP_SIZE = 4
"""n: every strategy here keeps groups of 4 (TrainConfig's default), GRPO draws exactly that per prompt."""
BUCKETS = ((0.0, 0.0, "p=0"), (0.0, 0.25, "0<p<=.25"), (0.25, 0.75, ".25<p<.75"), (0.75, 1.0, ".75<=p<1"),
           (1.0, 1.0, "p=1"))
"""Difficulty buckets by the start model's per-prompt pass rate p: (low, high, label)."""
BUCKET_SEED = 10_000
"""Seed of the held-out prompts the difficulty buckets use (one fixed set per task, whatever the RL seed)."""

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


# -- running ----------------------------------------------------------------------------------------------------------
def train_config(task: str, strategy: str, lr: float, seed: int, args: argparse.Namespace, out: Path):
    from reinforce_ada.config import TrainConfig

    fields = dict(STRATEGIES[strategy])
    sampler = fields["sampler"] = dict(fields.get("sampler", {}))
    if args.budget is not None and fields.get("strategy") == "ada-budget":
        sampler["sample_budget_per_step"] = args.budget
    elif isinstance(sampler.get("sample_budget_per_step"), str):  # "<k>x": k times GRPO's samples per step
        sampler["sample_budget_per_step"] = int(float(sampler["sample_budget_per_step"][:-1]) * GROUP_SIZE
                                                * args.batch_size)
    return TrainConfig(task=task, seed=seed, max_steps=args.steps, eval_steps=args.eval_every,
                       batch_size=args.batch_size, learning_rate=lr, output_dir=str(out),
                       eval_prompts=args.eval_prompts, num_threads=args.threads, **fields)


def pass_rates(model, tokenizer, verifier, prompts, samples: int, seed: int) -> list[float]:
    """Per-prompt fraction of ``samples`` sampled completions that are correct."""
    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.scoring import score

    generator = HFGenerator(model, tokenizer, max_new_tokens=8, use_chat_template=False, seed=seed)
    outputs = generator.generate([GenerationRequest(p, samples) for p in prompts])
    rates = []
    for prompt, completions in zip(prompts, outputs):
        rewards = score(verifier, [prompt] * len(completions), completions)
        rates.append(sum(1 for r in rewards if r is not None and r > 0.5) / len(completions))
    return rates


def bucket_prompts(task: str, args: argparse.Namespace):
    from reinforce_ada.data import get_task

    return get_task(task).prompts(args.bucket_prompts, seed=BUCKET_SEED, split="test")


def run(task: str, strategy: str, lr: float, seed: int, args: argparse.Namespace) -> dict:
    """Train one run; its [step, tokens, accuracy] history, zero-variance fraction per step and end pass rates."""
    from reinforce_ada.plotting import read_metrics
    from reinforce_ada.training import Trainer

    from reinforce_ada.data import get_task

    out = Path(args.out) / f"{task}-{strategy}-lr{lr:g}-seed{seed}"
    # A fixed training set of --train-prompts prompts (drawn by the seed), cycled in a seeded order, so prompts
    # recur every --train-prompts / --batch-size steps as in multi-epoch RL; 0: the trainer's own 4096-prompt pool.
    train = get_task(task).prompts(args.train_prompts, seed=seed, split="train") if args.train_prompts else None
    trainer = Trainer(train_config(task, strategy, lr, seed, args, out), train_prompts=train)
    trainer.train()
    tokens_at, history, zero_variance = {0: 0}, [], []
    for record in read_metrics(out):
        if "total_tokens" in record:
            tokens_at[record["step"]] = int(record["total_tokens"])
        if "sampling/zero_variance_fraction" in record:
            zero_variance.append(float(record["sampling/zero_variance_fraction"]))
        if "eval/accuracy" in record:
            history.append([int(record["step"]), tokens_at[record["step"]], float(record["eval/accuracy"])])
    end_rates = (pass_rates(trainer.model, trainer.tokenizer, trainer.verifier, bucket_prompts(task, args),
                            args.bucket_samples, seed) if args.bucket_prompts else [])
    return {"history": history, "zero_variance": zero_variance, "end_pass_rates": end_rates}


def start_pass_rates(task: str, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """The start model's per-prompt pass rates on the bucket prompts, twice from independent samples: the first
    assigns the buckets, the second is the start accuracy the gains are measured from (with one estimate for both,
    noise alone would make the lowest bucket "gain" and the highest "lose": regression to the mean)."""
    from reinforce_ada.training import Trainer

    if not args.bucket_prompts:
        return [], []
    probe = Trainer(train_config(task, "grpo", 1e-3, 0, args, Path(args.out) / f"{task}-start-model"))
    prompts = bucket_prompts(task, args)
    return tuple(pass_rates(probe.model, probe.tokenizer, probe.verifier, prompts, args.bucket_samples,
                            BUCKET_SEED + i) for i in (0, 1))


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
          f"{'x GRPO [95% bootstrap]':>26}{'zero-var':>16}{'zero-var step 1':>18}")
    for strategy, entry in report["strategies"].items():
        cell = entry["per_lr"][entry["best_lr"]]
        steps = entry.get("steps", {})
        gain = fmt(entry["gain_vs_grpo_at_budget"], 3) if "gain_vs_grpo_at_budget" in entry else "-"
        ratio = (f"{steps['ratio']:.2f} [{steps['ratio_low']:.2f}, {steps['ratio_high']:.2f}]" if steps else "-")
        zv = fmt(entry["zero_variance_mean"]) if "zero_variance_mean" in entry else "-"
        zv1 = fmt(entry["zero_variance_step1"]) if "zero_variance_step1" in entry else "-"
        label = f"{strategy} @ {entry['best_lr']:g}"
        print(f"{label:<29}{fmt(cell['at_budget']):>16}{gain:>20}{steps.get('steps', math.nan):>22.1f}{ratio:>26}"
              f"{zv:>16}{zv1:>18}")
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


def _merge(into: dict, other: dict) -> None:
    """Deep-merge ``other`` into ``into`` (dicts merged key by key; anything else: the first value kept)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif key not in into:
            into[key] = value


def write_results(path: Path, rows: list[dict], details: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows}))
    details_path(path).write_text(json.dumps(details))


def details_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "_details.json")


def parse_args(argv=None) -> argparse.Namespace:
    from reinforce_ada.data import list_tasks

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", nargs="+", default=["arithmetic"],
                        help=f"built-in task(s): {', '.join(list_tasks())} (default: arithmetic)")
    parser.add_argument("--strategies", nargs="+", default=list(PAPER_STRATEGIES),
                        help=f"any of {', '.join(STRATEGIES)} (default: the paper's three)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lrs", type=float, nargs="+", default=[5e-4, 1e-3],
                        help="learning-rate grid; every strategy is reported at its own best rate")
    parser.add_argument("--budget", type=int, default=None, metavar="SAMPLES",
                        help="samples per step of the ada-budget strategies (default: GRPO's, 4 x --batch-size)")
    parser.add_argument("--train-prompts", type=int, default=0,
                        help="size of the training set, cycled (0: the trainer's 4096-prompt pool, no prompt recurs "
                             "within 128 steps)")
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--bucket-prompts", type=int, default=200,
                        help="held-out prompts for the difficulty buckets (0: skip the buckets)")
    parser.add_argument("--bucket-samples", type=int, default=16, help="samples per bucket prompt")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/benchmark-learning", help="folder for the run folders")
    parser.add_argument("--docs", default="docs", help="plots go to DOCS/img/learning-<task>.png")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the histories (and PATH's _details)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="PATH",
                        help="report from these --json files (merged) instead of training")
    parser.add_argument("--merge-json", default=None, metavar="PATH",
                        help="with --from-json: also write the merged rows (and details) to PATH")
    parser.add_argument("--no-write", action="store_true", help="print the tables only (no plots)")
    args = parser.parse_args(argv)
    for task in args.task:
        if task not in list_tasks():
            parser.error(f"unknown task {task!r}; choose from {', '.join(list_tasks())}")
    for strategy in args.strategies:
        if strategy not in STRATEGIES:
            parser.error(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    for name in ("steps", "eval_every", "batch_size", "eval_prompts"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer (got {getattr(args, name)})")
    if args.budget is not None and args.budget < GROUP_SIZE * args.batch_size:
        parser.error(f"--budget {args.budget} is below one group per prompt: at least group size x --batch-size = "
                     f"{GROUP_SIZE} x {args.batch_size} = {GROUP_SIZE * args.batch_size}")
    if args.train_prompts < 0 or 0 < args.train_prompts < args.batch_size:
        parser.error(f"--train-prompts must be 0 or at least --batch-size {args.batch_size} (got {args.train_prompts})")
    if args.bucket_prompts < 0 or args.bucket_samples < 1:
        parser.error("--bucket-prompts must be >= 0 and --bucket-samples >= 1")
    if any(not (lr > 0 and math.isfinite(lr)) for lr in args.lrs):
        parser.error(f"--lrs must be positive numbers (got {args.lrs})")
    out = Path(args.out)
    if not args.from_json and out.is_dir() and any(out.iterdir()):
        parser.error(f"--out {out} already holds runs (the trainer never overwrites a run folder); "
                     f"choose another folder or delete it")
    for strategy in args.strategies:  # TrainConfig's own checks (e.g. a sample budget below one group per prompt)
        try:
            train_config(args.task[0], strategy, args.lrs[0], args.seeds[0], args, Path(args.out))
        except ValueError as err:
            parser.error(f"strategy {strategy}: {err}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.from_json:
        rows, details, seen = [], {}, {}
        for name in args.from_json:  # several files (e.g. one per task, run in parallel) are merged
            for row in json.loads(Path(name).read_text())["rows"]:
                key = (row["task"], row["strategy"], row["lr"], row["seed"])
                if key in seen:  # the same run in two files (e.g. GRPO, the reference of both): keep one
                    if seen[key] != row["history"]:
                        print(f"note: {key} differs between files; keeping the first", file=sys.stderr)
                    continue
                seen[key] = row["history"]
                rows.append(row)
            details_file = details_path(Path(name))
            _merge(details, json.loads(details_file.read_text()) if details_file.exists() else {})
        tasks = list(dict.fromkeys(row["task"] for row in rows))
        if args.merge_json:
            write_results(Path(args.merge_json), rows, details)
    else:
        rows, details, tasks = [], {"zero_variance": {}, "start_pass_rates": {}, "start_pass_rates_baseline": {},
                                    "end_pass_rates": {},
                                    "args": {k: v for k, v in vars(args).items()}}, args.task
        started = time.perf_counter()
        for task in tasks:
            details["start_pass_rates"][task], details["start_pass_rates_baseline"][task] = \
                start_pass_rates(task, args)
            for lr in args.lrs:
                for seed in args.seeds:
                    for strategy in args.strategies:
                        result = run(task, strategy, lr, seed, args)
                        rows.append({"task": task, "strategy": strategy, "lr": lr, "seed": seed,
                                     "history": result["history"]})
                        details["zero_variance"].setdefault(task, {}).setdefault(strategy, {}).setdefault(
                            str(lr), {})[str(seed)] = result["zero_variance"]
                        details["end_pass_rates"].setdefault(task, {}).setdefault(strategy, {}).setdefault(
                            str(lr), {})[str(seed)] = result["end_pass_rates"]
                        print(f"[{time.perf_counter() - started:7.0f} s] {task} {strategy} lr {lr:g} seed {seed}: "
                              f"accuracy {result['history'][0][2]:.3f} -> {result['history'][-1][2]:.3f}, "
                              f"{result['history'][-1][1]:,} tokens", file=sys.stderr, flush=True)
                        details["wall_seconds"] = round(time.perf_counter() - started, 1)
                        if args.json:  # after every run, so an interrupted benchmark keeps what it measured
                            write_results(Path(args.json), rows, details)
        if args.json:
            print(f"wrote {args.json} and {details_path(Path(args.json))}")
    if not args.from_json and "grpo" not in args.strategies:  # e.g. longer runs of cheaper strategies
        print("no grpo in this invocation: report with --from-json, adding a file with GRPO's runs")
        return 0
    for task in tasks:
        report = analyse(task, rows, details)
        print_report(report)
        if not args.no_write:
            plot(report, rows, Path(args.docs) / "img" / f"learning-{task}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
