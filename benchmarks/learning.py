"""Learning efficiency on the built-in task: GRPO (n=4) vs Ada-positive vs Ada-balanced.

Every run starts from the same warm-started tiny model and, for a given seed, sees the same prompts at every step
(the prompt stream is seeded by the RL seed only). Held-out sampled accuracy is measured every ``--eval-every``
steps. Each strategy runs over a learning-rate grid and is reported at its own best rate (most seeds reaching the
target, then fewest steps), so no strategy is judged at a rate tuned for another. We report the optimizer steps and
generated tokens needed to first reach ``--target`` accuracy (mean over the seeds that reach it) and the final
accuracy.

    python benchmarks/learning.py --seeds 0 1 2 3 4 --steps 80 --eval-every 4 --target 0.50 --lrs 2e-4 5e-4 1e-3

Writes the tables to stdout, ``docs/img/learning.png`` and ``docs/learning_results.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

STRATEGIES = ("grpo", "ada-positive", "ada-balanced")
OPTIONAL_STRATEGIES = {  # beyond the paper (docs/beyond_the_paper.md): name -> TrainConfig fields
    "ada-mixed": dict(strategy="ada-mixed"),  # exit at one positive and one negative, rounds of M=8
    # one sample per request without a round barrier (the streaming sampler on the HF backend), paper's rule / mixed
    "stream-balanced": dict(strategy="ada-balanced", sampler="streaming", streaming_allocation="fixed",
                            samples_per_round=1, max_rounds=32),
    "stream-mixed": dict(strategy="ada-mixed", sampler="streaming", streaming_allocation="fixed",
                         samples_per_round=1, max_rounds=32),
    # the mixed rule sampled one at a time without a round barrier, with the price of signal and memory
    "stream-mixed-priced": dict(strategy="ada-mixed", sampler="streaming", streaming_allocation="fixed",
                                samples_per_round=1, max_rounds=32, min_signal_rate=0.015, sample_budget=128,
                                memory=True, memory_half_life=8.0),
}


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

    out = Path(args.out) / f"{strategy}-lr{args.lr:g}-seed{seed}"
    fields = OPTIONAL_STRATEGIES.get(strategy, dict(strategy=strategy))
    config = TrainConfig(seed=seed, max_steps=args.steps, eval_steps=args.eval_every, batch_size=args.batch_size,
                         learning_rate=args.lr, output_dir=str(out), eval_prompts=args.eval_prompts,
                         num_threads=args.threads, **fields)
    Trainer(config).train()
    tokens_at = {0: 0}
    history = []
    for record in read_metrics(out):
        if "total_tokens" in record:
            tokens_at[record["step"]] = record["total_tokens"]
        if "eval/accuracy" in record:
            history.append((record["step"], record["eval/accuracy"], tokens_at.get(record["step"], 0)))
    return history


def summarize(histories: list[list[tuple[int, float, int]]], target: float) -> dict:
    reached = [first_reach(h, target) for h in histories]
    hits = [r for r in reached if r is not None]
    return {
        "reached": len(hits),
        "runs": len(reached),
        "steps_to_target": statistics.mean(r[0] for r in hits) if hits else None,
        "tokens_to_target": statistics.mean(r[1] for r in hits) if hits else None,
        "accuracy_start": statistics.mean(h[0][1] for h in histories),
        "accuracy_final": statistics.mean(h[-1][1] for h in histories),
        "tokens_total": statistics.mean(h[-1][2] for h in histories),
    }


def _best(rows_by_lr: dict[float, dict]) -> float:
    """The learning rate where the strategy does best: most seeds reaching the target, then fewest steps."""
    return min(rows_by_lr, key=lambda lr: (-rows_by_lr[lr]["reached"], rows_by_lr[lr]["steps_to_target"] or 1e9))


def _row(label: str, row: dict, grpo_steps: float | None) -> str:
    steps, tokens = row["steps_to_target"], row["tokens_to_target"]
    ratio = f"{steps / grpo_steps:.2f}" if steps and grpo_steps else "-"
    return (f"{label:<24}{row['reached']:>4}/{row['runs']:<3}{f'{steps:.1f}' if steps is not None else '-':>7}"
            f"{ratio:>8}{f'{tokens:,.0f}' if tokens is not None else '-':>10}"
            f"{row['accuracy_start']:>8.3f}{row['accuracy_final']:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--target", type=float, default=0.50)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-4, 5e-4, 1e-3],
                        help="learning-rate grid; every strategy is reported at its own best rate")
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/benchmark-learning")
    parser.add_argument("--docs", default="docs")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        choices=STRATEGIES + tuple(OPTIONAL_STRATEGIES))
    parser.add_argument("--no-write", action="store_true", help="print the tables only (no PNG/JSON in --docs)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    histories: dict[str, dict[float, list]] = {s: {lr: [] for lr in args.lrs} for s in args.strategies}
    for lr in args.lrs:
        for seed in args.seeds:
            for strategy in args.strategies:
                args.lr = lr
                histories[strategy][lr].append(run(strategy, seed, args))
    rows = {s: {lr: summarize(h, args.target) for lr, h in by_lr.items()} for s, by_lr in histories.items()}
    best = {s: _best(rows[s]) for s in args.strategies}

    print(f"target held-out accuracy {args.target:.2f}; seeds {args.seeds}; {args.steps} steps of {args.batch_size} "
          f"prompts; eval every {args.eval_every} steps")
    header = f"{'strategy @ lr':<24}{'reached':>8}{'steps':>7}{'x GRPO':>8}{'tokens':>10}{'start':>8}{'final':>8}"
    print("(steps, tokens: mean over the seeds that reached the target; start/final: held-out sampled accuracy)")
    print(header)
    for lr in args.lrs:
        grpo = rows.get("grpo", {}).get(lr, {}).get("steps_to_target")
        for strategy in args.strategies:
            print(_row(f"{strategy} @ {lr:g}", rows[strategy][lr], grpo))
    print("each at its best learning rate (x GRPO: against GRPO at its own best rate):")
    grpo_best = rows["grpo"][best["grpo"]]["steps_to_target"] if "grpo" in best else None
    for strategy in args.strategies:
        print(_row(f"{strategy} @ {best[strategy]:g}", rows[strategy][best[strategy]], grpo_best))
    if args.no_write:
        return

    docs = Path(args.docs)
    (docs / "img").mkdir(parents=True, exist_ok=True)
    (docs / "learning_results.json").write_text(json.dumps({
        "args": vars(args), "best_lr": best,
        "summary": {s: {str(lr): row for lr, row in by_lr.items()} for s, by_lr in rows.items()},
        "histories": {s: {str(lr): h for lr, h in by_lr.items()} for s, by_lr in histories.items()}}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_step, ax_tok) = plt.subplots(1, 2, figsize=(11, 4))
    for strategy in args.strategies:
        runs = histories[strategy][best[strategy]]
        steps = [h[0] for h in runs[0]]
        mean_acc = [statistics.mean(h[i][1] for h in runs) for i in range(len(steps))]
        mean_tok = [statistics.mean(h[i][2] for h in runs) for i in range(len(steps))]
        label = f"{strategy} (lr {best[strategy]:g})"
        ax_step.plot(steps, mean_acc, marker="o", ms=3, label=label)
        ax_tok.plot(mean_tok, mean_acc, marker="o", ms=3, label=label)
    for ax, xlabel in ((ax_step, "optimizer step"), (ax_tok, "generated tokens")):
        ax.axhline(args.target, color="gray", ls="--", lw=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out sampled accuracy")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"tiny model, 2-digit addition, each strategy at its best lr, mean of {len(args.seeds)} seeds")
    fig.tight_layout()
    fig.savefig(docs / "img" / "learning.png", dpi=110)
    print(f"wrote {docs / 'img' / 'learning.png'}")


if __name__ == "__main__":
    main()
