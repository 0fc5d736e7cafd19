"""Plots of one or more training runs, read from their ``metrics.jsonl``.

``reinforce-ada plot RUN [RUN ...]`` overlays runs in one figure: reward and held-out accuracy against step and
against samples drawn (the compute that adaptive sampling spends), the zero-variance fraction, and the samples per
prompt spent in each round.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence


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


def _series(records: list[dict[str, Any]], key: str, x: str = "step") -> tuple[list[float], list[float]]:
    points = [(r[x], r[key]) for r in records if key in r and x in r]
    return [p[0] for p in points], [p[1] for p in points]


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
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    (ax_rs, ax_rn, ax_zero), (ax_as, ax_an, ax_rounds) = axes
    width = 0.8 / max(len(run_dirs), 1)
    for i, (run, records) in enumerate(runs):
        label = _run_label(run)
        train = [r for r in records if "sampling/reward_mean" in r]
        ax_rs.plot(*_series(train, "sampling/reward_mean"), label=label)
        ax_rn.plot(*_series(train, "sampling/reward_mean", x="total_samples"), label=label)
        ax_zero.plot(*_series(train, "sampling/zero_variance_fraction"), label=label)
        ax_as.plot(*_series(records, "eval/accuracy"), marker="o", label=label)
        ax_an.plot(*_series(records, "eval/accuracy", x="total_samples"), marker="o", label=label)
        rounds = sorted({int(k.split("/")[1][len("round_"):]) for r in train for k in r
                         if k.startswith("sampling/round_") and k.endswith("/num_samples")})
        per_round = []
        for k in rounds:
            values = [r.get(f"sampling/round_{k}/num_samples", 0.0) / r["sampling/num_prompts"] for r in train]
            per_round.append(sum(values) / max(len(values), 1))
        ax_rounds.bar([k + i * width for k in rounds], per_round, width=width, label=label)
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
