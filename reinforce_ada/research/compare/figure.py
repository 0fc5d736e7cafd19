"""The figure of ``reinforce-ada compare``'s report (``report.png``): held-out accuracy against steps, generated
tokens and step seconds, each strategy at its best lr, mean and 95% t-interval over seeds, the baseline's budgets
marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.research.compare.report import AXES, STEP, accuracy_at
from reinforce_ada.research.compare.stats import t_interval

__all__ = ["plot_report"]


def plot_report(report: dict[str, Any], path: Path, title: str = "") -> Path:
    """Held-out accuracy against steps, generated tokens and step seconds: each strategy at its best lr, mean and 95%
    t-interval over seeds, the baseline's budgets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    for strategy, entry in report["strategies"].items():
        histories = [r["history"] for r in report["runs"] if r["strategy"] == strategy and r["lr"] == entry["best_lr"]]
        label = f"{strategy} (lr {entry['best_lr']:g})"
        color = None
        for ax, (axis, column) in zip(axes, AXES.items()):
            # up to the longest run: a run that ended earlier counts at its final accuracy, as in the table
            top = max(h[-1][column] for h in histories)
            grid = np.linspace(0, top, 80) if axis != "steps" else [h[STEP] for h in histories[0]]
            values = np.array([[accuracy_at(h, column, x) for x in grid] for h in histories])
            mean = values.mean(axis=0)
            line, = ax.plot(grid, mean, label=label, lw=1.5, color=color)
            color = line.get_color()
            if len(histories) > 1:
                half = np.array([t_interval(values[:, i])[1] for i in range(values.shape[1])])
                ax.fill_between(grid, mean - half, mean + half, color=color, alpha=0.15)
    for ax, (axis, xlabel) in zip(axes, (("steps", "optimizer step"), ("tokens", "generated tokens"),
                                         ("seconds", "step seconds (generation + scoring + update + sync)"))):
        ax.axvline(report["budgets"][axis], color="gray", ls="--", lw=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out accuracy")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title or f"each strategy at its best lr, mean and 95% t-interval over seeds; dashed: "
                          f"{report['baseline']}'s budget")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
