"""Sampler overhead: how many completions per second can AdaptiveSampler push through its own bookkeeping?

What it measures: the cost of the sampling loop itself -- building requests, the retry wrapper, scoring into the
pools (running moments, class counts), exit checks, downsampling, advantages, importance weights and metrics -- with
the model and the reward function taken out. The generator is zero-cost: every completion the step can ask for
(M * N per prompt) is built before the clock starts from Bernoulli(pass rate) draws, and ``generate`` only hands out
the next slice. The verifier is zero-cost: it reads the precomputed reward off the completion text.

Setup (the paper's): 512 prompts per step, M=8, N=4, n=4, balanced exit and balanced selection, pass rates drawn from
Beta(0.4, 2). Throughput is completions drawn per second of ``AdaptiveSampler.sample`` wall time ("per CPU-s": per
second of process CPU time, steadier on a shared machine); the "bookkeeping only" column also subtracts the wall time
spent inside the two fake backends. The goal is >= 100,000
completions/s on one CPU core, so that sampling logic is never the bottleneck next to generation.

    python benchmarks/sampler_overhead.py             # table for the paper setup plus GRPO and Ada-positive
    python benchmarks/sampler_overhead.py --profile   # cProfile of the paper setup, top 25 by cumulative time
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.research.simulate import pass_rates_from
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion, Prompt


class PrecomputedGenerator:
    """Hands out completions built ahead of time: ``stock[prompt_id]`` holds M * N of them for the current step."""

    def __init__(self) -> None:
        self.stock: dict[int, list[Completion]] = {}
        self.cursor: dict[int, int] = {}
        self.seconds = 0.0

    def restock(self, prompts: Sequence[Prompt], per_prompt: int, rng: np.random.Generator) -> None:
        rates = np.array([p.metadata["pass_rate"] for p in prompts])
        correct = rng.random((len(prompts), per_prompt)) < rates[:, None]
        self.stock = {p.prompt_id: [Completion(p.prompt_id, "1" if ok else "0") for ok in row]
                      for p, row in zip(prompts, correct.tolist())}
        self.cursor = dict.fromkeys(self.stock, 0)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        start_time = time.perf_counter()
        outputs = []
        for request in requests:
            pid = request.prompt.prompt_id
            start = self.cursor[pid]
            self.cursor[pid] = start + request.num_samples
            outputs.append(self.stock[pid][start:start + request.num_samples])
        self.seconds += time.perf_counter() - start_time
        return outputs


class TextVerifier:
    """Reward 1.0 for text "1", else 0.0 (the generator already decided correctness)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float]:
        start_time = time.perf_counter()
        rewards = [1.0 if c.text == "1" else 0.0 for c in completions]
        self.seconds += time.perf_counter() - start_time
        return rewards


@dataclass
class Result:
    name: str
    steps: int
    completions: int
    seconds: float
    cpu_seconds: float
    backend_seconds: float

    @property
    def per_second(self) -> float:
        return self.completions / self.seconds

    @property
    def per_cpu_second(self) -> float:
        return self.completions / self.cpu_seconds

    @property
    def bookkeeping_per_second(self) -> float:
        return self.completions / (self.seconds - self.backend_seconds)


def measure(name: str, config: SamplerConfig, prompts: list[Prompt], steps: int, seed: int = 0) -> Result:
    generator, verifier = PrecomputedGenerator(), TextVerifier()
    sampler = AdaptiveSampler(generator, verifier, config)
    rng = np.random.default_rng(seed)
    total, seconds, cpu_seconds = 0, 0.0, 0.0
    for _ in range(steps):
        generator.restock(prompts, config.max_samples, rng)  # not timed
        start, cpu_start = time.perf_counter(), time.process_time()
        batch = sampler.sample(prompts)
        seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start
        total += int(batch.metrics["total_samples"])
    return Result(name, steps, total, seconds, cpu_seconds, generator.seconds + verifier.seconds)


def configs() -> dict[str, SamplerConfig]:
    return {
        "ada-balanced M8 N4 n4": SamplerConfig(samples_per_round=8, max_rounds=4, group_size=4),
        "ada-positive M8 N4 n4": SamplerConfig(samples_per_round=8, max_rounds=4, group_size=4, exit_rule="positive"),
        "ada-balanced + weights": SamplerConfig(importance_weights=True, normalize_std=True),
        "grpo n4": SamplerConfig.grpo(4),
    }


def format_table(results: list[Result]) -> str:
    header = (f"{'setup':<24}{'steps':>6}{'completions/step':>18}{'ms/step':>9}{'completions/s':>15}"
              f"{'per CPU-s':>12}{'bookkeeping only':>18}")
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.name:<24}{r.steps:>6}{r.completions / r.steps:>18.0f}{1000 * r.seconds / r.steps:>9.1f}"
                     f"{r.per_second:>15,.0f}{r.per_cpu_second:>12,.0f}{r.bookkeeping_per_second:>18,.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dist", default="beta:0.4,2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile the paper setup instead of the table")
    args = parser.parse_args(argv)

    rates = pass_rates_from(args.dist, args.prompts, args.seed)
    prompts = [Prompt(i, "", metadata={"pass_rate": float(r)}) for i, r in enumerate(rates)]
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(measure, "paper", configs()["ada-balanced M8 N4 n4"], prompts, args.steps, args.seed)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return 0
    measure("warm-up", SamplerConfig(), prompts, 1, args.seed)
    results = [measure(name, cfg, prompts, args.steps, args.seed) for name, cfg in configs().items()]
    print(f"{args.prompts} prompts per step, pass rates {args.dist}, zero-cost generator and verifier")
    print(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
