"""Plots of one or more training runs, read from their ``metrics.jsonl``.

``reinforce-ada plot RUN [RUN ...]`` overlays runs in one figure: reward and held-out accuracy against step and
against samples drawn (the compute that adaptive sampling spends), the zero-variance fraction, and the samples per
prompt spent in each round; then where adaptive sampling acts (arXiv 2510.04996v3, Table 5, Fig. 5 and 6): held-out
accuracy per difficulty stratum, the pass@k curve at the first and last evaluation, reward against the policy's
token entropy, samples per step, the prompts still active at each round, and the budget per prompt against the
memory's estimated pass rate (:mod:`reinforce_ada.analyses`). A panel whose metric no run has says so instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada import analyses


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run's ``metrics.jsonl``; a folder that is not a run but sits in one or holds runs is named
    with the folder to give instead."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        from reinforce_ada.errors import UsageError

        run = Path(run_dir)
        inside = next((parent for parent in run.parents if (parent / "metrics.jsonl").is_file()), None)
        if inside is not None and run.is_dir():
            raise UsageError(f"{run_dir} is inside run {inside}, not a run itself: give {inside}")
        holds = sorted(child for child in run.iterdir() if (child / "metrics.jsonl").is_file()) if run.is_dir() else []
        if holds:
            raise UsageError(f"{run_dir} is not a run but holds runs ({', '.join(map(str, holds[:4]))}"
                             f"{', ...' if len(holds) > 4 else ''}): give them")
        raise FileNotFoundError(f"{path} does not exist (is {run_dir} a run folder?)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            from reinforce_ada.errors import DataError

            raise DataError(f"{path}:{number}: not valid JSON ({err.msg}); a run killed while writing can leave a "
                            "cut last line -- delete it") from None
    return records


def _run_label(run_dir: Path) -> str:
    config = run_dir / "config.json"
    if config.exists():
        strategy = json.loads(config.read_text()).get("strategy")
        if strategy:
            return f"{run_dir.name} ({strategy})"
    return run_dir.name


def plot_runs(run_dirs: Sequence[str | Path], out_dir: str | Path) -> Path:
    """Write ``training.png`` into ``out_dir`` (whole or not at all) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [(Path(run), read_metrics(run)) for run in run_dirs]  # every run read before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(4, 3, figsize=(15, 16))
    (ax_rs, ax_rn, ax_zero), (ax_as, ax_an, ax_rounds) = axes[:2]
    width = 0.8 / max(len(run_dirs), 1)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for i, (run, records) in enumerate(runs):
        label = _run_label(run)
        train = [r for r in records if "sampling/reward_mean" in r]
        ax_rs.plot(*analyses.series(train, "sampling/reward_mean"), label=label, color=colors[i])
        ax_rn.plot(*analyses.series(train, "sampling/reward_mean", x="total_samples"), label=label, color=colors[i])
        ax_zero.plot(*analyses.series(train, "sampling/zero_variance_fraction"), label=label, color=colors[i])
        ax_as.plot(*analyses.series(records, "eval/accuracy"), marker="o", label=label, color=colors[i])
        ax_an.plot(*analyses.series(records, "eval/accuracy", x="total_samples"), marker="o", label=label, color=colors[i])
        rounds = sorted({int(k.split("/")[1][len("round_"):]) for r in train for k in r
                         if k.startswith("sampling/round_") and k.endswith("/num_samples")})
        per_round = []
        for k in rounds:
            values = [r.get(f"sampling/round_{k}/num_samples", 0.0) / r["sampling/num_prompts"] for r in train]
            per_round.append(sum(values) / max(len(values), 1))
        ax_rounds.bar([k + i * width for k in rounds], per_round, width=width, label=label, color=colors[i])
        if rounds:
            ax_rounds.set_xticks(rounds)
    for ax, title, xlabel in [
        (ax_rs, "sampled reward (all completions)", "step"),
        (ax_rn, "sampled reward vs samples drawn", "samples drawn"),
        (ax_zero, "zero-variance fraction of kept groups", "step"),
        (ax_as, "held-out sampled accuracy", "step"),
        (ax_an, "held-out accuracy vs samples drawn", "samples drawn"),
        (ax_rounds, "samples per prompt, by round (mean over steps)", "round"),
    ]:
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    labelled = [(_run_label(run), colors[i], records) for i, (run, records) in enumerate(runs)]
    draw_analyses(axes[2:].ravel(), labelled)
    ax_rs.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "training.png"
    tmp = out_dir / f".training.png.tmp-{os.getpid()}"  # a kill while drawing leaves no torn plot
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        plt.close(fig)
    return path


# -- where adaptive sampling acts: one panel per analysis, for any runs -----------------------------------------------
Labelled = Sequence[tuple[str, str, Sequence[dict[str, Any]]]]
"""``(label, color, records)`` per run (or per strategy: records standing for it)."""

_STRATUM_STYLES = ("-", "--", "-.", ":")


def note(ax: Any, text: str) -> None:
    """A panel whose data no run has: the reason in words instead of empty axes."""
    import textwrap

    ax.text(0.5, 0.5, textwrap.fill(text, 48), ha="center", va="center", transform=ax.transAxes, fontsize=9,
            color="dimgray")
    ax.set_xticks([])
    ax.set_yticks([])


def _lacking(ax: Any, labels: list[str]) -> None:
    if labels:
        ax.text(0.01, 0.01, "not logged by: " + ", ".join(labels), transform=ax.transAxes, fontsize=7,
                color="dimgray", va="bottom")


def draw_analyses(axes: Sequence[Any], runs: Labelled) -> None:
    """Six panels into ``axes``: accuracy per difficulty stratum, pass@k, reward against entropy, samples per step,
    prompts active per round, budget against estimated pass rate (:mod:`reinforce_ada.analyses`); a run lacking a
    metric is named in its panel, a panel no run has data for says why."""
    ax_strata, ax_pass, ax_entropy, ax_samples, ax_active, ax_budget = axes
    _strata_panel(ax_strata, runs)
    _pass_panel(ax_pass, runs)
    _entropy_panel(ax_entropy, runs)
    lacking = []
    for label, color, records in runs:
        steps, samples = analyses.samples_per_step(records)
        if steps:
            ax_samples.plot(steps, samples, color=color, label=label, lw=1)
        else:
            lacking.append(label)
    ax_samples.set_title("samples drawn per step")
    if len(lacking) == len(runs):
        note(ax_samples, "no sampling/total_samples in these runs")
    else:
        ax_samples.set(xlabel="step", ylabel="samples")
        _lacking(ax_samples, lacking)
    active_panel(ax_active, [(label, color, analyses.active_by_round(records)) for label, color, records in runs])
    budget_panel(ax_budget, [(label, color, analyses.budget_by_pass_rate(records)) for label, color, records in runs])
    for ax in axes:
        ax.grid(alpha=0.3)


def _strata_panel(ax: Any, runs: Labelled) -> None:
    ax.set_title("held-out accuracy by difficulty stratum")
    names, lacking = [], []
    for label, color, records in runs:
        strata = analyses.strata_series(records)
        if not strata:
            lacking.append(label)
        for j, (name, (steps, values)) in enumerate(strata.items()):
            ax.plot(steps, values, color=color, ls=_STRATUM_STYLES[j % 4], marker=".", lw=1)
            if name not in names:
                names.append(name)
    if not names:
        return note(ax, "no eval/accuracy/<stratum> in these runs: the strata are fixed before training "
                        "(--eval-strata-samples, 16 by default; 0 turns them off), and runs from before them have none")
    from matplotlib.lines import Line2D

    ax.legend([Line2D([], [], color="gray", ls=_STRATUM_STYLES[j % 4]) for j in range(len(names))], names,
              fontsize=7, title="stratum (start model)", title_fontsize=7)
    ax.set(xlabel="step", ylabel="held-out accuracy", ylim=(-0.02, 1.02))
    _lacking(ax, lacking)


def _pass_panel(ax: Any, runs: Labelled) -> None:
    ax.set_title("pass@k at the first (dashed) and last evaluation")
    drawn, lacking = False, []
    for label, color, records in runs:
        curves = analyses.pass_curves(records)
        if not curves:
            lacking.append(label)
            continue
        first, last = curves[0], curves[-1]
        if len(curves) > 1:
            ax.plot(list(first[1]), list(first[1].values()), color=color, ls="--", marker=".", lw=1)
        ax.plot(list(last[1]), list(last[1].values()), color=color, marker="o", lw=1.5,
                label=f"{label} (step {last[0]})")
        drawn = True
    if not drawn:
        return note(ax, "no eval/pass@k in these runs (held-out evaluations log it from their eval_samples samples "
                        "per prompt; runs from before that have none)")
    ax.set_xscale("log", base=2)
    ks = sorted({k for _, _, records in runs for _, curve in analyses.pass_curves(records) for k in curve})
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set(xlabel="k", ylabel="pass@k (unbiased estimator)", ylim=(-0.02, 1.02))
    _lacking(ax, lacking)


def _entropy_panel(ax: Any, runs: Labelled) -> None:
    ax.set_title("reward vs token entropy (o held-out, . training)")
    drawn, lacking = False, []
    for label, color, records in runs:
        points = analyses.entropy_points(records)
        held_x, held_y = points["held_out"]
        train_x, train_y = points["train"]
        if train_x:
            ax.scatter(train_x, train_y, color=color, s=4, alpha=0.25)
        if held_x:
            ax.plot(held_x, held_y, color=color, marker="o", lw=1)
            ax.annotate("start", (held_x[0], held_y[0]), fontsize=6, color=color)
        if held_x or train_x:
            drawn = True
        else:
            lacking.append(label)
    if not drawn:
        return note(ax, "no eval/entropy or train/entropy in these runs (runs from before they were logged)")
    ax.set(xlabel="mean token entropy (nats)", ylabel="held-out accuracy / sampled reward")
    _lacking(ax, lacking)


def active_panel(ax: Any, shown: Sequence[tuple[str, str, dict[int, float]]]) -> None:
    """Bars of the share of a step's prompts still active at each round, per ``(label, color, {round: share})``
    (:func:`reinforce_ada.analyses.active_by_round`)."""
    ax.set_title("prompts still active at each round (mean over steps)")
    shown = [(label, color, {int(k): v for k, v in active.items()}) for label, color, active in shown]
    with_rounds = [row for row in shown if row[2]]
    if not with_rounds:
        return note(ax, "no sampling/round_<k>/num_active in these runs (a sampler without rounds)")
    width = 0.8 / len(with_rounds)
    for i, (label, color, active) in enumerate(with_rounds):
        ax.bar([k + i * width for k in active], list(active.values()), width=width, color=color, label=label)
    # a tick per round, under the middle of its bars (every few rounds when there are many: a streaming sampler has
    # up to 32 waves); never a fractional round, which a locator gives when only one or two rounds are drawn
    rounds = sorted({k for _, _, active in with_rounds for k in active})
    every = -(-len(rounds) // 10)
    shown_rounds = rounds[::every]
    ax.set_xticks([k + (len(with_rounds) - 1) * width / 2 for k in shown_rounds], [str(k) for k in shown_rounds])
    ax.set_xlim(rounds[0] - 0.6, rounds[-1] + 0.6 + (len(with_rounds) - 1) * width)
    ax.set(xlabel="round", ylabel="share of the step's prompts", ylim=(0, 1.05))
    _lacking(ax, [label for label, _, active in shown if not active])


def budget_panel(ax: Any, shown: Sequence[tuple[str, str, dict[str, Sequence[float]]]]) -> None:
    """Samples per prompt against the memory's estimated pass rate, per ``(label, color, {bin: (prompts,
    samples)})`` (:func:`reinforce_ada.analyses.budget_by_pass_rate`)."""
    ax.set_title("samples per prompt vs its estimated pass rate")
    drawn, lacking = False, []
    for label, color, bins in shown:
        if not bins:
            lacking.append(label)
            continue
        xs = [-0.1 if b == "unseen" else sum(map(float, b.split("-"))) / 2 for b in bins]
        ys = [samples / prompts for prompts, samples in bins.values()]
        ax.plot([x for x, b in zip(xs, bins) if b != "unseen"], [y for y, b in zip(ys, bins) if b != "unseen"],
                color=color, marker="o", lw=1, label=label)
        if "unseen" in bins:
            ax.scatter([-0.1], [ys[-1]], color=color, marker="s", facecolors="none")
        drawn = True
    if not drawn:
        return note(ax, "no sampling/by_pass_rate/* in these runs: only a strategy with a cross-step pass-rate memory "
                        "(ada-est, ada-budget, the streaming sampler with --sampler.memory.enabled) logs it")
    ax.set_xticks([-0.1, 0.0, 0.2, 0.4, 0.6, 0.8, 1.0], ["unseen", "0", "0.2", "0.4", "0.6", "0.8", "1"])
    ax.set(xlabel="memory's pass-rate estimate before the step (bin centre)", ylabel="samples per prompt")
    _lacking(ax, lacking)
