"""Where Reinforce-Ada-Est's budget went: samples per prompt against the estimated pass rate, from the runs' metrics.

Reads the ``sampling/by_pass_rate/<bin>/num_prompts`` and ``.../num_samples`` metrics every sampler with a pass-rate
memory logs each step (:func:`reinforce_ada.sampling.pools.remember_pools`; binned by the estimate the step was
sampled with) from every run of the strategy under the given ``compare`` folders, and reports per bin: the share of
the prompts in it, the mean samples a prompt got, and the share of the budget -- over the first and the last third of
training separately (the memory fills as prompts come back). ``--plot`` draws it; ``--json`` writes it.

    python benchmarks/est_budget.py runs/compare/est-recurring --plot docs/img/est-budget-recurring.png \\
        --json benchmarks/results/est_budget_recurring.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reinforce_ada.analyses import budget_by_pass_rate


def run_folders(compares: list[Path], strategy: str) -> list[Path]:
    """The finished run folders of ``strategy`` in each comparison folder (those with a ``summary.json``)."""
    return [summary.parent for folder in compares for summary in sorted(folder.glob(f"{strategy}-lr*/summary.json"))]


def budget_by_bin(folders: list[Path], part: tuple[float, float]) -> dict[str, dict[str, float]]:
    """Per bin of the estimated pass rate, over the steps in the fraction ``part`` of each run (e.g. ``(0, 1/3)``):
    the share of the prompts, the share of the samples, and samples per prompt."""
    totals: dict[str, list[float]] = {}
    for folder in folders:
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if any(k.startswith("sampling/by_pass_rate/") for k in r)]
        lo, hi = int(part[0] * len(steps)), int(part[1] * len(steps))
        for name, (prompts, samples) in budget_by_pass_rate(steps[lo:hi]).items():
            cell = totals.setdefault(name, [0.0, 0.0])
            cell[0] += prompts
            cell[1] += samples
    num_prompts = sum(p for p, _ in totals.values())
    num_samples = sum(s for _, s in totals.values())
    return {name: {"prompt_share": p / num_prompts, "budget_share": s / num_samples, "samples_per_prompt": s / p}
            for name, (p, s) in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compares", nargs="+", type=Path, help="reinforce-ada compare output folders")
    parser.add_argument("--strategy", default="ada-est",
                        help="the strategy's name in the comparison (default: ada-est)")
    parser.add_argument("--plot", type=Path, help="write the figure here (PNG)")
    parser.add_argument("--json", type=Path, help="write the table here")
    args = parser.parse_args(argv)
    folders = run_folders(args.compares, args.strategy)
    if not folders:
        parser.error(f"no finished {args.strategy} run under {', '.join(map(str, args.compares))}")
    table = {label: budget_by_bin(folders, part) for label, part in (("first third", (0.0, 1 / 3)),
                                                                      ("last third", (2 / 3, 1.0)))}
    print(f"{len(folders)} {args.strategy} runs; per bin of the estimated pass rate: share of the prompts, samples "
          f"per prompt, share of the budget")
    for label, rows in table.items():
        print(f"  {label}:")
        for name, row in rows.items():
            print(f"    {name:>9}: {100 * row['prompt_share']:5.1f}% of prompts, {row['samples_per_prompt']:5.2f} "
                  f"samples each, {100 * row['budget_share']:5.1f}% of the budget")
    if args.json:
        args.json.write_text(json.dumps({"runs": [str(f) for f in folders], "bins": table}, indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = list(dict.fromkeys(n for rows in table.values() for n in rows))
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.38
        for offset, (label, rows) in zip((-width / 2, width / 2), table.items()):
            x = [i + offset for i, n in enumerate(names) if n in rows]
            present = [n for n in names if n in rows]
            axes[0].bar(x, [rows[n]["samples_per_prompt"] for n in present], width, label=label)
            axes[1].bar(x, [100 * rows[n]["budget_share"] for n in present], width, label=label)
        for ax, title in zip(axes, ("samples per prompt", "share of the budget (%)")):
            ax.set_xticks(range(len(names)), [f"p_hat {n}" for n in names], rotation=20, fontsize=8)
            ax.set_title(f"{args.strategy}: {title}, by estimated pass rate", fontsize=10)
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
