"""Learning efficiency on the built-in task: GRPO (n=4) vs Ada-positive vs Ada-balanced.

Every run starts from the same warm-started tiny model and, for a given seed, sees the same prompts at every step
(the prompt stream is seeded by the RL seed only). Held-out sampled accuracy is measured every ``--eval-every``
steps; we report, per strategy, the optimizer steps and the generated tokens needed to first reach
``--target`` accuracy (mean over seeds; runs that never reach it count as not reached), and the final accuracy.

    python benchmarks/learning.py --seeds 0 1 2 --steps 60 --target 0.35

Writes a table to stdout, ``docs/img/learning.png`` and ``docs/learning_results.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

STRATEGIES = ("grpo", "ada-positive", "ada-balanced")


def first_reach(history: list[tuple[int, float, int]], target: float) -> tuple[int, int] | None:
    """(step, tokens) of the first evaluation at or above target."""
    for step, accuracy, tokens in history:
        if accuracy >= target:
            return step, tokens
    return None


def run(strategy: str, seed: int, args: argparse.Namespace) -> list[tuple[int, float, int]]:
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.plotting import read_metrics
    from reinforce_ada.trainer import Trainer

    out = Path(args.out) / f"{strategy}-seed{seed}"
    config = TrainConfig(strategy=strategy, seed=seed, max_steps=args.steps, eval_steps=args.eval_every,
                         batch_size=args.batch_size, learning_rate=args.lr, output_dir=str(out),
                         eval_prompts=args.eval_prompts, num_threads=args.threads)
    Trainer(config).train()
    tokens_at = {0: 0}
    history = []
    for record in read_metrics(out):
        if "total_tokens" in record:
            tokens_at[record["step"]] = record["total_tokens"]
        if "eval/accuracy" in record:
            history.append((record["step"], record["eval/accuracy"], tokens_at.get(record["step"], 0)))
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.35)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/benchmark-learning")
    parser.add_argument("--docs", default="docs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    results: dict[str, list[list[tuple[int, float, int]]]] = {s: [] for s in STRATEGIES}
    for seed in args.seeds:
        for strategy in STRATEGIES:
            results[strategy].append(run(strategy, seed, args))

    rows = {}
    for strategy, histories in results.items():
        reached = [first_reach(h, args.target) for h in histories]
        hits = [r for r in reached if r is not None]
        rows[strategy] = {
            "reached": f"{len(hits)}/{len(reached)}",
            "steps_to_target": statistics.mean(r[0] for r in hits) if hits else None,
            "tokens_to_target": statistics.mean(r[1] for r in hits) if hits else None,
            "accuracy_start": statistics.mean(h[0][1] for h in histories),
            "accuracy_final": statistics.mean(h[-1][1] for h in histories),
            "tokens_total": statistics.mean(h[-1][2] for h in histories),
        }
    grpo_steps = rows["grpo"]["steps_to_target"]
    print(f"target accuracy {args.target:.2f}; seeds {args.seeds}; {args.steps} steps of {args.batch_size} prompts")
    print(f"{'strategy':<14}{'reached':>9}{'steps':>8}{'x GRPO':>8}{'tokens':>10}{'start':>8}{'final':>8}")
    print("(steps and tokens: mean over the seeds that reached the target; start/final: held-out sampled accuracy)")
    for strategy, row in rows.items():
        steps, tokens = row["steps_to_target"], row["tokens_to_target"]
        ratio = f"{steps / grpo_steps:.2f}" if steps and grpo_steps else "-"
        print(f"{strategy:<14}{row['reached']:>9}{f'{steps:.1f}' if steps is not None else '-':>8}{ratio:>8}"
              f"{f'{tokens:,.0f}' if tokens is not None else '-':>10}"
              f"{row['accuracy_start']:>8.3f}{row['accuracy_final']:>8.3f}")

    docs = Path(args.docs)
    (docs / "img").mkdir(parents=True, exist_ok=True)
    (docs / "learning_results.json").write_text(json.dumps({"args": vars(args), "summary": rows,
                                                            "histories": results}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_step, ax_tok) = plt.subplots(1, 2, figsize=(11, 4))
    for strategy, histories in results.items():
        steps = [h[0] for h in histories[0]]
        mean_acc = [statistics.mean(h[i][1] for h in histories) for i in range(len(steps))]
        mean_tok = [statistics.mean(h[i][2] for h in histories) for i in range(len(steps))]
        ax_step.plot(steps, mean_acc, marker="o", label=strategy)
        ax_tok.plot(mean_tok, mean_acc, marker="o", label=strategy)
    for ax, xlabel in ((ax_step, "optimizer step"), (ax_tok, "generated tokens")):
        ax.axhline(args.target, color="gray", ls="--", lw=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out sampled accuracy")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"tiny model, 2-digit addition, mean of {len(args.seeds)} seeds")
    fig.tight_layout()
    fig.savefig(docs / "img" / "learning.png", dpi=110)
    print(f"wrote {docs / 'img' / 'learning.png'}")


if __name__ == "__main__":
    main()
