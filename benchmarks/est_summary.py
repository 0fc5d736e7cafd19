"""The summary table of the Est evidence runs (docs/benchmarks.md, "Reinforce-Ada-Est against GRPO-n8"), one row per
bed, from the committed ``compare`` reports ``benchmarks/results/compare_est_<bed>.json`` (against grpo-n8) and
``compare_est_<bed>_vs_grpo.json`` (the same runs against grpo):

    python benchmarks/est_summary.py recurring filtered filtered-low addition mixed

Each cell is a paired difference by seed, mean ± 95% t-interval half-width, each strategy at its own best lr.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def cell(entry: dict, budget: str) -> str:
    mean, half = entry["paired_mean_ci95"][budget]
    return f"{mean:+.3f} ± {half:.3f}"


def row(bed: str) -> str:
    vs_n8 = json.loads((RESULTS / f"compare_est_{bed}.json").read_text())
    vs_n4 = json.loads((RESULTS / f"compare_est_{bed}_vs_grpo.json").read_text())
    n8, est, seq = (vs_n8["strategies"][name] for name in ("grpo-n8", "ada-est", "ada-balanced"))
    base = n8["per_lr"][f"{n8['best_lr']:g}"]
    final = sum(base["final"]) / len(base["final"])
    lrs = ", ".join(f"{name} {vs_n8['strategies'][name]['best_lr']:g}"
                    + ("*" if vs_n8["strategies"][name]["best_lr_at_edge"] else "")
                    for name in ("grpo", "grpo-n8", "ada-est", "ada-balanced"))
    return (f"| {bed} | {final:.3f} | **{cell(est, 'at_tokens')}** | {cell(est, 'at_steps')} | "
            f"{cell(est, 'at_seconds')} | {cell(seq, 'at_tokens')} | {cell(vs_n4['strategies']['ada-est'], 'at_tokens')} "
            f"| {cell(vs_n4['strategies']['grpo-n8'], 'at_tokens')} | {lrs} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beds", nargs="+", help="recurring, filtered, filtered-low, addition, mixed")
    args = parser.parse_args(argv)
    print("| bed | grpo-n8 final | ada-est vs grpo-n8 at its tokens | at equal steps | at its seconds | ada-balanced vs "
          "grpo-n8 at its tokens | ada-est vs grpo at grpo's tokens | grpo-n8 vs grpo at grpo's tokens | best lr "
          "(* grid's edge) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for bed in args.beds:
        print(row(bed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
