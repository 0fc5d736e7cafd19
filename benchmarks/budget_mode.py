"""Budget mode vs GRPO and Reinforce-Ada on simulated prompts that come back every epoch (no model: Bernoulli rewards).

Each prompt has a fixed pass rate drawn from ``--dist`` (``beta:A,B``; the paper's hard math prompts look like
Beta(0.4, 2)). Every epoch visits every prompt once, in a new order, ``--batch`` prompts per step; the samplers are
the library's own ``AdaptiveSampler`` configurations, run on a scripted generator whose completions are positive with
the prompt's pass rate. Reported per strategy over all steps after the first epoch (when the cross-step memory has
seen every prompt once), mean over ``--seeds``: samples per step (relative to GRPO's ``n x batch``), the fraction of
prompts whose kept group has signal, signal groups per 100 samples, and the fraction of prompts skipped.

    python benchmarks/budget_mode.py                       # ~30 s on one core
    python benchmarks/budget_mode.py --dist beta:2,2       # pass rates clustered around 0.5

This measures only the allocation (which prompts get samples, how many groups have signal per sample), not
learning: pass rates do not move. Learning runs: docs/beyond_the_paper.md, section 6.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.types import Completion, Prompt


class BernoulliGenerator:
    """Completions whose text is their reward: 1 with the prompt's pass rate, else 0."""

    def __init__(self, rates: dict, rng: np.random.Generator):
        self.rates, self.rng = rates, rng

    def generate(self, requests):
        return [[Completion(r.prompt.prompt_id, "1" if self.rng.random() < self.rates[r.prompt.prompt_id] else "0")
                 for _ in range(r.num_samples)] for r in requests]


def reward_from_text(prompts, completions):
    return [float(c.text) for c in completions]


def strategies(n: int, batch: int, half_life: float | None) -> dict[str, SamplerConfig]:
    budget = dict(group_size=n, exit_rule="mixed", allocation="budget", budget_half_life=half_life)
    return {
        "grpo": SamplerConfig.grpo(n),
        "ada-budget": SamplerConfig(**budget),
        "ada-budget probe 2": SamplerConfig(**budget, budget_probe=2),
        "ada-budget probe 2, min 2": SamplerConfig(**budget, budget_probe=2, budget_min_group=2),
        "ada-budget 1.5x": SamplerConfig(**budget, samples_per_round=n, sample_budget_per_step=int(1.5 * n * batch)),
        "ada-mixed (M=8, N=4)": SamplerConfig(group_size=n, exit_rule="mixed"),
        "ada-balanced (M=8, N=4)": SamplerConfig(group_size=n, exit_rule="balanced"),
    }


def run(config: SamplerConfig, rates: np.ndarray, args: argparse.Namespace, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    prompts = [Prompt(i, f"prompt {i}", answer=str(i)) for i in range(len(rates))]
    generator = BernoulliGenerator(dict(enumerate(rates)), rng)
    memory = PassRateMemory(half_life=args.step_half_life or None) if config.allocation == "budget" else None
    sampler = AdaptiveSampler(generator, reward_from_text, config, memory=memory)
    samples = signal = skipped = num = 0.0
    steps_per_epoch = len(prompts) // args.batch
    for epoch in range(args.epochs):
        order = rng.permutation(len(prompts))
        for step in range(steps_per_epoch):
            batch = sampler.sample([prompts[i] for i in order[step * args.batch:(step + 1) * args.batch]])
            if epoch == 0:
                continue
            samples += batch.metrics["total_samples"]
            signal += batch.metrics["signal_fraction"] * args.batch
            skipped += batch.metrics.get("num_skipped", 0.0)
            num += args.batch
    return {"samples_per_step": samples / (num / args.batch), "signal_fraction": signal / num,
            "signal_per_100": 100 * signal / samples, "skipped_fraction": skipped / num}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dist", default="beta:0.4,2", help="pass-rate distribution, beta:A,B")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--half-life", type=float, default=2.0,
                        help="budget_half_life: presentations of a prompt after which its evidence counts half "
                             "(the default, 2; 0: no decay)")
    parser.add_argument("--step-half-life", type=float, default=0.0,
                        help="also decay the memory per step (PassRateMemory(half_life=...); 0: no, the default)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the per-seed results as JSON")
    args = parser.parse_args()
    kind, _, params = args.dist.partition(":")
    if kind != "beta":
        parser.error(f"--dist {args.dist!r}: expected beta:A,B")
    a, b = (float(x) for x in params.split(","))
    n, grpo_samples = args.group_size, args.group_size * args.batch
    print(f"pass rates ~ Beta({a:g}, {b:g}); {args.prompts} prompts, {args.batch} per step, n={n}; epochs 2-"
          f"{args.epochs}, seeds {args.seeds}; memory half-life {args.half_life:g} visits"
          + (f", {args.step_half_life:g} steps" if args.step_half_life else ""))
    print(f"{'strategy':<27}{'samples/step':>13}{'x GRPO':>8}{'signal':>8}{'signal/100 samples':>20}{'skipped':>9}")
    rows = []
    for name, config in strategies(n, args.batch, args.half_life or None).items():
        results = []
        for seed in args.seeds:
            rates = np.random.default_rng(1000 + seed).beta(a, b, size=args.prompts)
            results.append(run(config, rates, args, seed))
            rows.append({"strategy": name, "seed": seed, **results[-1]})
        mean = {k: statistics.mean(r[k] for r in results) for k in results[0]}
        print(f"{name:<27}{mean['samples_per_step']:>13.1f}{mean['samples_per_step'] / grpo_samples:>8.2f}"
              f"{mean['signal_fraction']:>8.3f}{mean['signal_per_100']:>20.2f}{mean['skipped_fraction']:>9.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
