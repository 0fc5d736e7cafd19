"""The figure of ``reinforce-ada compare``'s report (``report.png``), each strategy at its best lr:

* held-out accuracy against steps, generated tokens and step seconds: the mean over seeds with its 95% t-band clipped
  to [0, 1] (with fewer than three seeds, each seed's own line instead of a band), the baseline's budgets marked;
* where it lands (:mod:`.breakdown`): the paired difference from the baseline per difficulty stratum (at equal steps
  and at the baseline's tokens, with 95% intervals), pass@k at equal steps and at the baseline's tokens, and held-out
  accuracy against the samples' token entropy along training (Fig. 6 of arXiv 2510.04996v3);
* sampling dynamics: samples per step, prompts still active at each round, samples per prompt by estimated pass
  rate (:func:`reinforce_ada.plotting.active_panel`, :func:`~reinforce_ada.plotting.budget_panel`).

A panel whose data no strategy has says why instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.research.compare.report import AXES, STEP, accuracy_at
from reinforce_ada.research.compare.stats import t_interval

__all__ = ["plot_report"]

MIN_SEEDS_FOR_BANDS = 3
"""With fewer seeds than this a t-band is too wide to read (t_0.975,1 = 12.7): each seed's line is drawn instead."""


def plot_report(report: dict[str, Any], path: Path, title: str = "") -> Path:
    """Write the figure (see the module docstring) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(16, 13.5))
    colors = {strategy: f"C{i % 10}" for i, strategy in enumerate(report["strategies"])}
    _accuracy_row(axes[0], report, colors)
    _strata_panel(axes[1][0], report, colors)
    _pass_panel(axes[1][1], report, colors)
    _entropy_panel(axes[1][2], report, colors)
    _dynamics_row(axes[2], report, colors)
    for ax in axes.ravel():
        ax.grid(alpha=0.3)
    fig.suptitle(title or f"each strategy at its best lr over seeds {report['seeds']}; dashed: {report['baseline']}'s "
                          f"budget")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _histories(report: dict[str, Any], strategy: str) -> list[dict[str, Any]]:
    entry = report["strategies"][strategy]
    return [r for r in report["runs"] if r["strategy"] == strategy and r["lr"] == entry["best_lr"]]


def _accuracy_row(axes: Any, report: dict[str, Any], colors: dict[str, str]) -> None:
    num_seeds = len(report["seeds"])
    for strategy, entry in report["strategies"].items():
        histories = [r["history"] for r in _histories(report, strategy)]
        label = f"{strategy} (lr {entry['best_lr']:g})"
        for ax, (axis, column) in zip(axes, AXES.items()):
            # up to the longest run: a run that ended earlier counts at its final accuracy, as in the table
            top = max(h[-1][column] for h in histories)
            grid = np.linspace(0, top, 80) if axis != "steps" else [h[STEP] for h in histories[0]]
            values = np.array([[accuracy_at(h, column, x) for x in grid] for h in histories])
            mean = values.mean(axis=0)
            ax.plot(grid, mean, label=label, lw=1.8, color=colors[strategy])
            if len(histories) >= MIN_SEEDS_FOR_BANDS:
                half = np.array([t_interval(values[:, i])[1] for i in range(values.shape[1])])
                ax.fill_between(grid, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1), color=colors[strategy],
                                alpha=0.15)
            else:
                for row in values:
                    ax.plot(grid, row, color=colors[strategy], lw=0.7, alpha=0.5)
    for ax, (axis, xlabel) in zip(axes, (("steps", "optimizer step"), ("tokens", "generated tokens"),
                                         ("seconds", "step seconds (generation + scoring + update + sync)"))):
        ax.axvline(report["budgets"][axis], color="gray", ls="--", lw=1)
        ax.set(xlabel=xlabel, ylabel="held-out accuracy")
    band = ("mean and 95% t-band over seeds" if num_seeds >= MIN_SEEDS_FOR_BANDS
            else "mean (thick) and each seed (thin): too few seeds for a band")
    axes[0].set_title(f"held-out accuracy: {band}", fontsize=10)
    axes[0].legend(fontsize=8)


def _note(ax: Any, text: str) -> None:
    from reinforce_ada.plotting import note

    note(ax, text)


def _strata_panel(ax: Any, report: dict[str, Any], colors: dict[str, str]) -> None:
    ax.set_title(f"vs {report['baseline']} by difficulty stratum (o equal steps, s at its tokens)", fontsize=10)
    others = {s: e for s, e in report["strategies"].items() if s != report["baseline"]
              and e["breakdown"]["strata"] is not None}
    if not others:
        return _note(ax, "no difficulty strata in these runs (or no strategy besides the baseline): runs fix them "
                         "before training with --eval-strata-samples (16 by default)")
    names = list(next(iter(others.values()))["breakdown"]["strata"]["by_stratum"])
    width = 0.8 / len(others)
    few = len(report["seeds"]) < MIN_SEEDS_FOR_BANDS  # each seed's difference instead of an unreadable interval
    for i, (strategy, entry) in enumerate(others.items()):
        for j, (axis, marker) in enumerate((("at_steps", "o"), ("at_tokens", "s"))):
            xs, means, halves = [], [], []
            for x, name in enumerate(names):
                cell = entry["breakdown"]["strata"]["by_stratum"].get(name)
                mean, half = cell["paired"]["ci95"][axis] if cell else (None, None)
                if mean is None or np.isnan(mean):
                    continue
                xs.append(x - 0.4 + width * (i + 0.25 + 0.5 * j))
                means.append(mean)
                halves.append(0.0 if few or half is None or np.isnan(half) else half)
                if few:
                    seeds = cell["paired"][axis]
                    ax.scatter([xs[-1]] * len(seeds), seeds, color=colors[strategy], s=8, alpha=0.5)
            ax.errorbar(xs, means, yerr=halves, fmt=marker, color=colors[strategy], capsize=3, ms=5,
                        label=strategy if j == 0 else None, mfc="none" if j else colors[strategy])
    ax.axhline(0, color="gray", lw=1)
    if few:
        ax.set_title(ax.get_title() + "\nmean (large) and each seed (small): too few seeds for an interval",
                     fontsize=9)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("paired accuracy difference" + ("" if few else " (95% t-interval)"))
    ax.legend(fontsize=8)


def _pass_panel(ax: Any, report: dict[str, Any], colors: dict[str, str]) -> None:
    ax.set_title("pass@k: equal steps (solid), at the baseline's tokens (dashed)", fontsize=10)
    drawn = False
    for strategy, entry in report["strategies"].items():
        cells = entry["breakdown"]["pass_at_k"]
        if not cells:
            continue
        ks = [int(k) for k in cells]
        for axis, style in (("at_steps", "-"), ("at_tokens", "--")):
            ax.plot(ks, [cells[str(k)][axis] for k in ks], ls=style, marker="o", ms=4, color=colors[strategy],
                    label=strategy if axis == "at_steps" else None)
        drawn = True
    if not drawn:
        return _note(ax, "no eval/pass@k in these runs (run folders from before it was logged)")
    ks = sorted({int(k) for e in report["strategies"].values() for k in e["breakdown"]["pass_at_k"]})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set(xlabel="k", ylabel="pass@k (mean over seeds)")
    ax.legend(fontsize=8)


def _entropy_panel(ax: Any, report: dict[str, Any], colors: dict[str, str]) -> None:
    ax.set_title("held-out accuracy vs token entropy along training", fontsize=10)
    drawn = False
    for strategy, entry in report["strategies"].items():
        entropy = entry["breakdown"]["entropy"]
        if not entropy or not entropy["path"]:
            continue
        _, xs, ys = zip(*entropy["path"])
        ax.plot(xs, ys, marker="o", ms=3, lw=1.2, color=colors[strategy], label=strategy)
        ax.annotate("start", (xs[0], ys[0]), xytext=(3, 3), textcoords="offset points", fontsize=7,
                    color=colors[strategy])
        drawn = True
    if not drawn:
        return _note(ax, "no eval/entropy in these runs (run folders from before it was logged)")
    ax.margins(x=0.15, y=0.15)  # room for the "start" labels inside the axes
    ax.set(xlabel="mean token entropy of held-out samples (nats; mean over seeds)", ylabel="held-out accuracy")
    ax.legend(fontsize=8)


def _dynamics_row(axes: Any, report: dict[str, Any], colors: dict[str, str]) -> None:
    from reinforce_ada.plotting import active_panel, budget_panel

    ax_samples, ax_active, ax_budget = axes
    drawn = False
    for strategy, entry in report["strategies"].items():
        per_step = entry["breakdown"]["dynamics"]["samples_per_step"]
        if per_step:
            ax_samples.plot(range(1, len(per_step) + 1), per_step, color=colors[strategy], lw=1, label=strategy)
            drawn = True
    if drawn:
        ax_samples.set(title="samples drawn per step (mean over seeds)", xlabel="step", ylabel="samples")
        ax_samples.legend(fontsize=8)
    else:
        _note(ax_samples, "no sampling/total_samples in these runs")
    active_panel(ax_active, [(s, colors[s], e["breakdown"]["dynamics"]["active_by_round"])
                             for s, e in report["strategies"].items()])
    budget_panel(ax_budget, [(s, colors[s], e["breakdown"]["dynamics"]["budget_by_pass_rate"])
                             for s, e in report["strategies"].items()])
