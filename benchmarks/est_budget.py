"""Where Reinforce-Ada-Est's budget went: samples per prompt against the estimated pass rate, from the runs' metrics.

Reads the ``sampling/samples_by_p_hat/<bin>`` and ``sampling/prompts_by_p_hat/<bin>`` metrics that ``ada-est`` logs
every step (:mod:`reinforce_ada.sampling.estimate`) from every ``ada-est`` run folder under the given ``compare``
folders, and reports per bin of the estimated pass rate: the share of the step's prompts in it, the mean samples a
prompt got, and the share of the budget -- over the first and the last third of training separately (the memory
fills as prompts come back). ``--plot`` draws it; ``--json`` writes it.

    python benchmarks/est_budget.py runs/compare/est-recurring --plot docs/img/est-budget-recurring.png \\
        --json benchmarks/results/est_budget_recurring.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BIN_PREFIX = "sampling/samples_by_p_hat/"
COUNT_PREFIX = "sampling/prompts_by_p_hat/"


def run_folders(compares: list[Path], strategy: str) -> list[Path]:
    """The finished run folders of ``strategy`` in each comparison folder (their ``summary.json`` says so)."""
    found = []
    for folder in compares:
        for summary in sorted(folder.glob("*/summary.json")):
            if json.loads(summary.read_text()).get("strategy") == "ada-est" and summary.parent.name.startswith(
                    f"{strategy}-lr"):
                found.append(summary.parent)
    return found


def budget_by_bin(folders: list[Path], part: tuple[float, float]) -> dict[str, dict[str, float]]:
    """Per p_hat bin, over the steps in the fraction ``part`` of each run (e.g. ``(0, 1/3)``): prompts, samples, their
    shares, and samples per prompt."""
    prompts: dict[str, float] = {}
    samples: dict[str, float] = {}
    for folder in folders:
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if any(k.startswith(COUNT_PREFIX) for k in r)]
        lo, hi = int(part[0] * len(steps)), int(part[1] * len(steps))
        for record in steps[lo:hi]:
            for key, count in record.items():
                if key.startswith(COUNT_PREFIX):
                    name = key[len(COUNT_PREFIX):]
                    prompts[name] = prompts.get(name, 0.0) + count
                    samples[name] = samples.get(name, 0.0) + count * record[BIN_PREFIX + name]
    total_prompts, total_samples = sum(prompts.values()), sum(samples.values())
    return {name: {"prompt_share": prompts[name] / total_prompts, "budget_share": samples[name] / total_samples,
                   "samples_per_prompt": samples[name] / prompts[name]}
            for name in sorted(prompts, key=lambda n: float(n.split("-")[0]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compares", nargs="+", type=Path, help="reinforce-ada compare output folders")
    parser.add_argument("--strategy", default="ada-est", help="the strategy name in the comparison (default: ada-est)")
    parser.add_argument("--plot", type=Path, help="write the figure here (PNG)")
    parser.add_argument("--json", type=Path, help="write the table here")
    args = parser.parse_args(argv)
    folders = run_folders(args.compares, args.strategy)
    if not folders:
        parser.error(f"no finished {args.strategy} run (strategy ada-est) under {', '.join(map(str, args.compares))}")
    parts = {"first third": (0.0, 1 / 3), "last third": (2 / 3, 1.0)}
    table = {label: budget_by_bin(folders, part) for label, part in parts.items()}
    print(f"{len(folders)} {args.strategy} runs; per bin of the estimated pass rate p_hat: share of prompts, samples "
          f"per prompt, share of the budget")
    for label, rows in table.items():
        print(f"  {label}:")
        for name, row in rows.items():
            print(f"    p_hat {name}: {100 * row['prompt_share']:5.1f}% of prompts, {row['samples_per_prompt']:5.2f} "
                  f"samples each, {100 * row['budget_share']:5.1f}% of the budget")
    if args.json:
        args.json.write_text(json.dumps({"runs": [str(f) for f in folders], "bins": table}, indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.38
        for offset, (label, rows) in zip((-width / 2, width / 2), table.items()):
            names = list(rows)
            x = [i + offset for i in range(len(names))]
            axes[0].bar(x, [rows[n]["samples_per_prompt"] for n in names], width, label=label)
            axes[1].bar(x, [100 * rows[n]["budget_share"] for n in names], width, label=label)
        for ax, title in zip(axes, ("samples per prompt", "share of the budget (%)")):
            names = list(next(iter(table.values())))
            ax.set_xticks(range(len(names)), [f"p_hat {n}" for n in names], rotation=20, fontsize=8)
            ax.set_title(f"{args.strategy}: {title}, by estimated pass rate")
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
