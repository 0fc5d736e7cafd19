"""Paired comparison of two strategies of ``benchmarks/learning.py`` from its ``--json`` files, without training.

For each task: the per-seed difference A - B of the accuracy at GRPO's token budget (B = GRPO's mean generated tokens
at ``--grpo-lr``, as in learning.py) and of the final accuracy, both at ``--lr``, over the seeds both ran; mean ± 95%
t-interval. Used for "Training on the whole pool" in docs/benchmarks.md (a whole-pool variant against the same
strategy keeping n per prompt):

    python benchmarks/learning_paired.py benchmarks/results/learning_results.json \\
        --pair stream-mixed-cap6-all stream-mixed-cap6 --pair stream-mixed-cap8-all stream-mixed-cap8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from reinforce_ada.research.compare.stats import fmt, interpolate


def accuracy_at_tokens(history, budget: float) -> float:
    """A [step, tokens, accuracy] history's accuracy after ``budget`` generated tokens (compare's interpolation)."""
    return interpolate([h[1] for h in history], [h[2] for h in history], budget)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="learning.py --json files (a run in several files: the first kept)")
    parser.add_argument("--pair", nargs=2, action="append", required=True, metavar=("A", "B"))
    parser.add_argument("--lr", type=float, default=5e-4, help="learning rate of both strategies (default 5e-4)")
    parser.add_argument("--grpo-lr", type=float, default=5e-4, help="GRPO's lr that sets the token budget")
    args = parser.parse_args(argv)
    runs: dict[tuple, list] = {}
    for name in args.json:
        for row in json.loads(Path(name).read_text())["rows"]:
            runs.setdefault((row["task"], row["strategy"], row["lr"], row["seed"]), row["history"])
    for task in dict.fromkeys(key[0] for key in runs):
        grpo = [h for (t, s, lr, _), h in runs.items() if (t, s, lr) == (task, "grpo", args.grpo_lr)]
        if not grpo:
            print(f"{task}: no GRPO runs at lr {args.grpo_lr:g}; skipped")
            continue
        budget = float(np.mean([h[-1][1] for h in grpo]))
        for a, b in args.pair:
            seeds = sorted(seed for (t, s, lr, seed) in runs if (t, s, lr) == (task, a, args.lr)
                           and (task, b, args.lr, seed) in runs)
            if not seeds:
                continue
            at_b = [accuracy_at_tokens(runs[(task, a, args.lr, s)], budget)
                    - accuracy_at_tokens(runs[(task, b, args.lr, s)], budget) for s in seeds]
            final = [runs[(task, a, args.lr, s)][-1][2] - runs[(task, b, args.lr, s)][-1][2] for s in seeds]
            print(f"{task}: {a} - {b} (lr {args.lr:g}, seeds {seeds}, B = {budget:,.0f} tokens): "
                  f"acc@B {fmt(at_b)}, final {fmt(final)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
