"""Sampling simulator: how many samples does each strategy spend, and how many prompts end up with signal?

Each simulated prompt has a hidden pass rate ``p`` (drawn from a Beta distribution or read from a file); a
completion is correct with probability ``p``. The simulated generator and verifier plug into the *real* samplers
(:class:`AdaptiveSampler`, :class:`DynamicSampler`), so what is measured is the library's own loop, exit rules and
selection -- only the model is replaced by coin flips.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.errors import DataError, UsageError
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion, Prompt


class SimulatedGenerator:
    """Completions whose text is ``"1"`` (correct) with the prompt's hidden pass rate, else ``"0"``.

    The pass rate is read from ``prompt.metadata["pass_rate"]``. ``num_generated`` counts completions produced.
    """

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.num_generated = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        sizes = [r.num_samples for r in requests]
        rates = np.repeat([r.prompt.metadata["pass_rate"] for r in requests], sizes)
        correct = (self.rng.random(len(rates)) < rates).tolist()
        self.num_generated += len(rates)
        outputs, start = [], 0
        for request, size in zip(requests, sizes):
            outputs.append([Completion(request.prompt.prompt_id, "1" if ok else "0")
                            for ok in correct[start:start + size]])
            start += size
        return outputs


def simulated_verifier(prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float]:
    """Reward 1 for a completion whose text is ``"1"``."""
    return [1.0 if c.text == "1" else 0.0 for c in completions]


MAX_PROMPTS = 10_000_000
"""Most simulated prompts: ten million rates are 80 MB and minutes of simulation; more is a typo, not a study."""


def check_counts(**counts: int) -> None:
    """A UsageError naming the first ``--name`` (given as ``name=value``) that is not a positive integer."""
    for name, value in counts.items():
        if value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer (got {value})")


def check_positive_numbers(**numbers: float) -> None:
    """A UsageError naming the first ``--name`` (given as ``name=value``) that is not a positive finite number."""
    for name, value in numbers.items():
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number (got {value})")


def check_simulation_inputs(num_prompts: int, seed: int) -> None:
    """A UsageError for a prompt count outside 1..MAX_PROMPTS or a seed outside numpy's 0..2**32-1."""
    from reinforce_ada.config.checks import SEED_MAX

    if not 0 < num_prompts <= MAX_PROMPTS:
        raise UsageError(f"--prompts must be a positive integer at most {MAX_PROMPTS} (got {num_prompts})")
    if not 0 <= seed <= SEED_MAX:
        raise UsageError(f"--seed must be in 0..{SEED_MAX} (2**32-1) (got {seed})")


def finite_or_none(value: Any) -> Any:
    """``value`` with NaN and +-inf (a ratio over zero prompts) made None, so JSON stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def pass_rates_from(dist: str, num_prompts: int, seed: int = 0) -> np.ndarray:
    """``"beta:A,B"`` draws ``num_prompts`` rates; any other value is a file with one rate per line (or JSON list)."""
    if dist.startswith("beta:"):
        try:
            a, b = (float(x) for x in dist[len("beta:"):].split(","))
        except ValueError:
            raise UsageError(f"--dist {dist!r}: expected beta:A,B with two positive numbers") from None
        if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
            raise UsageError(f"--dist {dist!r}: Beta parameters must be positive finite numbers")
        return np.random.default_rng(seed).beta(a, b, size=num_prompts)
    path = Path(dist)
    if not path.exists():
        raise UsageError(f"--dist {dist!r} is neither beta:A,B nor an existing file of pass rates")
    text = path.read_text().strip()
    try:
        rates = np.array(json.loads(text) if text.startswith("[") else text.split(), dtype=np.float64)
    except (ValueError, TypeError) as err:
        raise DataError(f"{path}: pass rates must be numbers in [0, 1] ({err})") from None
    if rates.size == 0 or np.any((rates < 0) | (rates > 1)) or not np.all(np.isfinite(rates)):
        raise DataError(f"{path}: pass rates must be numbers in [0, 1]")
    return rates


@dataclass
class StrategyResult:
    strategy: str
    samples_per_prompt: float
    signal_fraction: float
    samples_per_signal_prompt: float
    rounds_max: int
    num_prompts: int
    total_samples: int


def strategies(samples_per_round: int, max_rounds: int, group_size: int) -> dict[str, SamplerConfig]:
    """The compared configurations, by display name (DAPO is handled separately)."""
    ada = dict(samples_per_round=samples_per_round, max_rounds=max_rounds, group_size=group_size)
    return {
        f"grpo-n{group_size}": SamplerConfig.grpo(group_size),
        "ada-positive": SamplerConfig(exit_rule="positive", **ada),
        "ada-balanced": SamplerConfig(exit_rule="balanced", **ada),
    }


def run_strategy(name: str, config: SamplerConfig | DynamicSamplingConfig, prompts: list[Prompt],
                 batch_size: int, seed: int = 0) -> StrategyResult:
    """Run one strategy over all prompts, ``batch_size`` prompts per step, and total the samples and signal."""
    generator = SimulatedGenerator(seed)
    total_samples = num_signal = num_prompts = rounds_max = 0
    if isinstance(config, DynamicSamplingConfig):
        sampler = DynamicSampler(generator, simulated_verifier, config)
        stream = iter(prompts)
        while True:
            try:
                batch = sampler.sample(stream)
            except ValueError:  # the stream is exhausted
                break
            consumed = int(batch.metrics["num_prompts_consumed"])
            num_prompts += consumed
            num_signal += round(batch.metrics["signal_fraction"] * consumed)
            total_samples += int(batch.metrics["total_samples"])
            rounds_max = max(rounds_max, len(batch.rounds))
    else:
        sampler = AdaptiveSampler(generator, simulated_verifier, config)
        for start in range(0, len(prompts), batch_size):
            batch = sampler.sample(prompts[start:start + batch_size])
            num_prompts += batch.num_prompts
            num_signal += sum(1 for g in batch.groups if g.has_signal)
            total_samples += int(batch.metrics["total_samples"])
            rounds_max = max(rounds_max, len(batch.rounds))
    assert total_samples == generator.num_generated
    return StrategyResult(name, total_samples / num_prompts, num_signal / num_prompts,
                          total_samples / num_signal if num_signal else float("inf"), rounds_max, num_prompts,
                          total_samples)


def simulate(rates: np.ndarray, *, samples_per_round: int = 8, max_rounds: int = 4, group_size: int = 4,
             batch_size: int = 512, dapo_max_batches: int = 4, seed: int = 0) -> list[StrategyResult]:
    """Compare GRPO, DAPO, Ada-positive and Ada-balanced on prompts with the given hidden pass rates."""
    prompts = [Prompt(i, "", metadata={"pass_rate": float(r)}) for i, r in enumerate(rates)]
    configs: dict[str, SamplerConfig | DynamicSamplingConfig] = dict(
        strategies(samples_per_round, max_rounds, group_size))
    configs["dapo"] = DynamicSamplingConfig(batch_size=batch_size, group_size=group_size,
                                            max_generation_batches=dapo_max_batches, seed=seed)
    return [run_strategy(name, cfg, prompts, batch_size, seed) for name, cfg in configs.items()]


def grpo_signal_closed_form(rates: np.ndarray, group_size: int) -> float:
    """E[1 - p^n - (1 - p)^n]: the chance that n independent samples are not all equal."""
    return float(np.mean(1.0 - rates**group_size - (1.0 - rates) ** group_size))


def format_table(results: list[StrategyResult]) -> str:
    header = f"{'strategy':<14}{'samples/prompt':>16}{'% with signal':>15}{'samples/signal':>16}{'rounds':>8}"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.strategy:<14}{r.samples_per_prompt:>16.2f}{100 * r.signal_fraction:>14.1f}%"
                     f"{r.samples_per_signal_prompt:>16.2f}{r.rounds_max:>8d}")
    return "\n".join(lines)


def plot(results: list[StrategyResult], path: str | Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    names = [r.strategy for r in results]
    axes[0].bar(names, [100 * r.signal_fraction for r in results], color="tab:green")
    axes[0].set_ylabel("% prompts whose group has signal")
    x = np.arange(len(names))
    axes[1].bar(x - 0.2, [r.samples_per_prompt for r in results], width=0.4, color="tab:blue", label="per prompt")
    axes[1].bar(x + 0.2, [r.samples_per_signal_prompt for r in results], width=0.4, color="tab:orange",
                label="per prompt with signal")
    axes[1].set_xticks(x, names)
    axes[1].set_ylabel("samples drawn")
    axes[1].legend()
    for ax in axes:
        ax.tick_params(axis="x", rotation=20)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
