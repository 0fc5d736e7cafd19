"""Multi-step sampling simulator: drifting pass rates, cross-step memory, and generation time.

Extends :mod:`reinforce_ada.research.simulate` from one step to a training run. Each prompt ``i`` has a pass rate
that moves as the model learns -- a logistic learning model:

    logit p_i(t) = logit p_i(0) + v_i * t,      v_i ~ Normal(drift_mean, drift_std),   t in epochs

so most prompts get easier, some stay put and a few get harder (forgetting). Every epoch visits all prompts in a fresh
order, ``batch_size`` per step. Rewards are Bernoulli(p_i(t)). Completion lengths and time come from the latency
model (:mod:`reinforce_ada.research.latency`).

Strategies (all through the library's own code):

* ``ada-balanced`` / ``ada-positive`` -- the round-based :class:`~reinforce_ada.sampling.sampler.AdaptiveSampler`;
  its time is the sum of its rounds, each waiting for its slowest completion.
* ``stream-fixed`` -- the streaming scheduler with the paper's request size M (no barrier, cancellation on exit).
* ``stream-beta`` -- plus Beta-posterior request sizes.
* ``stream-beta-mem`` -- plus cross-step memory (skip/cap hopeless or saturated prompts, prior for request sizes).
* ``stream-priced`` -- the configuration that spends least per signal-prompt: Beta request sizes, the ``mixed``
  exit rule (a group has signal as soon as the pool holds one of each class), memory, and the price of signal
  (``min_signal_rate``: give up a one-class pool, or skip a prompt, once a sample is unlikely to bring signal; the
  per-prompt budget may then exceed ``M * N``).
* ``grpo-n8`` -- one round of 8 per prompt (``--est-samples`` per prompt): the budget Est is matched to.
* ``ada-est`` -- Reinforce-Ada-Est (:class:`~reinforce_ada.sampling.estimate.EstSampler`, arXiv 2510.04996v3
  Alg. 1): ``--est-samples`` x prompts per step, each prompt's share proportional to ``1 / sqrt(p_hat)`` from its
  per-visit-decayed memory, clipped to ``[--est-min, --est-max]``, in one call; every sample kept.

Reported per strategy: samples per prompt, signal fraction (prompts whose kept group has non-equal rewards, over all
prompts presented), samples per signal-prompt, generated tokens per signal-prompt (counting the partial tokens of
cancelled requests), where the samples went (the share on prompts whose pass rate at the time was below 0.1: hard),
the time, and the time of one batched call producing the same completions.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.config import EstConfig, SamplerConfig
from reinforce_ada.core.allocation import HARD_BELOW
from reinforce_ada.errors import ConfigError, UsageError
from reinforce_ada.sampling.memory import PassRateMemory, prompt_key
from reinforce_ada.research.latency import LatencyModel, TimedGenerator, batched_time, run_streaming
from reinforce_ada.research.simulate import (SimulatedGenerator, check_counts, check_positive_numbers,
                                             check_simulation_inputs, finite_or_none, pass_rates_from,
                                             simulated_verifier)
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.pools import GroupSelector
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingScheduler
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)


@dataclass
class DriftingPassRates:
    """The logistic learning model of the module docstring."""

    initial: np.ndarray
    velocity: np.ndarray

    @classmethod
    def draw(cls, initial: np.ndarray, drift_mean: float, drift_std: float, seed: int = 0) -> "DriftingPassRates":
        velocity = np.random.default_rng(seed + 1).normal(drift_mean, drift_std, size=len(initial))
        return cls(np.asarray(initial, dtype=np.float64), velocity)

    def at(self, epoch: float) -> np.ndarray:
        p0 = np.clip(self.initial, 1e-6, 1 - 1e-6)
        logit = np.log(p0) - np.log1p(-p0) + self.velocity * epoch
        return 1.0 / (1.0 + np.exp(-logit))


@dataclass
class StrategySpec:
    name: str
    config: SamplerConfig
    options: StreamingOptions | None = None
    """None: the round-based sampler."""
    memory: dict[str, Any] | None = None
    """PassRateMemory keyword arguments, or None for no memory (``ada-est`` keeps its own)."""


@dataclass
class MultistepResult:
    strategy: str
    num_prompts: int = 0
    num_signal: int = 0
    num_skipped: int = 0
    total_samples: int = 0
    total_tokens: int = 0
    time: float = 0.0
    batched_time: float = 0.0
    num_cancelled: int = 0
    hard_samples: int = 0
    """Samples drawn for prompts whose pass rate at the time was below :data:`HARD_BELOW`."""
    per_epoch_signal: list[float] = field(default_factory=list)
    per_epoch_samples: list[float] = field(default_factory=list)

    @property
    def samples_per_prompt(self) -> float:
        return self.total_samples / self.num_prompts

    @property
    def signal_fraction(self) -> float:
        return self.num_signal / self.num_prompts

    @property
    def samples_per_signal_prompt(self) -> float:
        return self.total_samples / self.num_signal if self.num_signal else float("inf")

    @property
    def tokens_per_signal_prompt(self) -> float:
        return self.total_tokens / self.num_signal if self.num_signal else float("inf")

    @property
    def hard_share(self) -> float:
        """The share of the samples spent on prompts whose pass rate was below :data:`HARD_BELOW` when drawn."""
        return self.hard_samples / self.total_samples if self.total_samples else 0.0

    @property
    def time_ratio(self) -> float:
        """Time over the time of one batched call producing the same completions."""
        return self.time / self.batched_time if self.batched_time else float("nan")

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("samples_per_prompt", "signal_fraction", "samples_per_signal_prompt", "tokens_per_signal_prompt",
                     "hard_share", "time_ratio"):
            out[name] = getattr(self, name)
        return out


def default_strategies(samples_per_round: int = 8, max_rounds: int = 4, group_size: int = 4,
                       concurrency: int = 256, target: float = 0.3, skip_below: float = 0.1,
                       cap_below: float = 0.0, half_life: float = 8.0, give_up_below: float = 0.0,
                       min_signal_rate: float = 0.012, budget: int = 64, priced_exit_rule: str = "mixed",
                       priced_half_life: float = 16.0, est_samples: int = 8, est_min: int = 2,
                       est_max: int = 32) -> list[StrategySpec]:
    """The rows of ``reinforce-ada simulate-multistep`` (see the module docstring); the ``stream-priced`` defaults
    are the ones measured in docs/beyond_the_paper.md."""
    cfg = SamplerConfig(samples_per_round=samples_per_round, max_rounds=max_rounds, group_size=group_size)
    priced = SamplerConfig(samples_per_round=samples_per_round, max_rounds=max_rounds, group_size=group_size,
                           exit_rule=priced_exit_rule)
    mem = dict(half_life=half_life)
    return [
        StrategySpec("ada-balanced", cfg),
        StrategySpec("stream-fixed", cfg, StreamingOptions(allocation="fixed", max_in_flight=concurrency)),
        StrategySpec("stream-beta", cfg, StreamingOptions(target=target, max_in_flight=concurrency)),
        StrategySpec("stream-beta-mem", cfg, StreamingOptions(target=target, max_in_flight=concurrency,
                                                             skip_below=skip_below, cap_below=cap_below,
                                                             give_up_below=give_up_below), mem),
        StrategySpec("stream-priced", priced, StreamingOptions(target=target, max_in_flight=concurrency,
                                                               min_signal_rate=min_signal_rate, budget=budget),
                     dict(half_life=priced_half_life)),
        StrategySpec(f"grpo-n{est_samples}", SamplerConfig.grpo(est_samples)),
        StrategySpec("ada-est", SamplerConfig.reinforce_ada_est(
            est=EstConfig(min_samples=est_min, max_samples=est_max, samples_per_prompt=est_samples))),
    ]


def _prompt(i: int, rate: float) -> Prompt:
    return Prompt(int(i), f"prompt-{int(i)}", metadata={"pass_rate": float(rate)})


def select_initial(rates: DriftingPassRates, k: int, low: float, high: float, seed: int = 0
                   ) -> tuple[DriftingPassRates, list]:
    """The paper's data step on the simulated prompts: ``k`` samples each under the starting model
    (:func:`~reinforce_ada.research.select_prompts.estimate_pass_rates`), keep ``low <= rate <= high``. Returns the kept
    prompts' pass-rate model (renumbered) and their estimates (to seed memory)."""
    from reinforce_ada.research.select_prompts import estimate_pass_rates, select_by_pass_rate

    p0 = rates.at(0.0)
    prompts = [_prompt(i, p0[i]) for i in range(len(p0))]
    estimates = estimate_pass_rates(prompts, SimulatedGenerator(seed + 17), simulated_verifier, k)
    kept = [e.prompt_id for e in select_by_pass_rate(estimates, low, high)]
    if not kept:
        raise UsageError(f"no prompt has an estimated pass rate in [{low}, {high}]")
    kept_rates = DriftingPassRates(rates.initial[kept], rates.velocity[kept])
    renumbered = [e for e in estimates if e.kept]
    for new_id, e in enumerate(renumbered):
        e.prompt_id, e.key = new_id, prompt_key(_prompt(new_id, 0.0))
    return kept_rates, renumbered


def _make_completion(prompt: Prompt, rng: np.random.Generator) -> Completion:
    return Completion(prompt.prompt_id, "1" if rng.random() < prompt.metadata["pass_rate"] else "0")


def run_multistep(spec: StrategySpec, rates: DriftingPassRates, *, num_epochs: int = 4, batch_size: int = 256,
                  latency: LatencyModel | None = None, seed: int = 0, seed_estimates: list | None = None
                  ) -> MultistepResult:
    """Run one strategy for ``num_epochs`` epochs over every prompt; the prompt order and pass-rate trajectory are
    the same for every strategy (same ``seed``). ``seed_estimates`` (from :func:`select_initial`) seed the memory of
    strategies that have one."""
    latency = latency or LatencyModel()
    num = len(rates.initial)
    order_rng = np.random.default_rng(seed)
    orders = [order_rng.permutation(num) for _ in range(num_epochs)]
    steps_per_epoch = -(-num // batch_size)
    result = MultistepResult(spec.name)
    memory = PassRateMemory(**spec.memory) if spec.memory is not None else None
    selector = GroupSelector(spec.config)
    generator = TimedGenerator(SimulatedGenerator(seed), latency, seed)
    # the round-based sampler, or Est's one call; None: the streaming scheduler
    round_sampler = build_sampler(spec.config, generator, simulated_verifier) if spec.options is None else None
    seeded = round_sampler.memory if spec.config.mode == "est" else memory  # type: ignore[union-attr]
    if seeded is not None and seed_estimates:
        for e in seed_estimates:
            seeded.seed(e.key, e.pass_rate, e.num_samples)
    step = 0
    for epoch, order in enumerate(orders):
        epoch_signal = epoch_prompts = epoch_samples = 0
        for start in range(0, num, batch_size):
            ids = order[start:start + batch_size]
            p = rates.at(epoch + (start // batch_size) / steps_per_epoch)
            prompts = [_prompt(i, p[i]) for i in ids]
            if round_sampler is not None:
                before_time, before_len = generator.time, len(generator.lengths)
                batch = round_sampler.sample(prompts)
                lengths = generator.lengths[before_len:]
                result.time += generator.time - before_time
                result.total_tokens += int(sum(lengths))
            else:
                scheduler = StreamingScheduler(prompts, spec.config, spec.options, memory, step_id=str(step))
                run = run_streaming(scheduler, latency, simulated_verifier, _make_completion, seed=seed * 100003 + step)
                batch = scheduler.finish(selector, prompts, memory)
                lengths = run.lengths
                result.time += run.time
                result.total_tokens += run.tokens
                result.num_cancelled += int(batch.metrics["num_cancelled"])
                result.num_skipped += int(batch.metrics["num_skipped"])
            result.batched_time += batched_time(lengths, latency)
            result.hard_samples += sum(pool.num_drawn for pid, pool in batch.pools.items() if p[pid] < HARD_BELOW)
            num_signal = sum(1 for g in batch.groups if g.has_signal)
            samples = int(batch.metrics["total_samples"])
            result.num_prompts += len(prompts)
            result.num_signal += num_signal
            result.total_samples += samples
            epoch_signal += num_signal
            epoch_prompts += len(prompts)
            epoch_samples += samples
            step += 1
        result.per_epoch_signal.append(epoch_signal / epoch_prompts)
        result.per_epoch_samples.append(epoch_samples / max(epoch_signal, 1))
    return result


def format_table(results: list[MultistepResult]) -> str:
    header = (f"{'strategy':<18}{'samples/prompt':>15}{'% signal':>10}{'samples/signal':>16}{'tokens/signal':>15}"
              f"{'% on hard':>10}{'skipped':>9}{'time':>9}{'/batched':>10}")
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.strategy:<18}{r.samples_per_prompt:>15.2f}{100 * r.signal_fraction:>9.1f}%"
                     f"{r.samples_per_signal_prompt:>16.2f}{r.tokens_per_signal_prompt:>15.0f}"
                     f"{100 * r.hard_share:>9.1f}%{r.num_skipped:>9d}{r.time:>9.0f}{r.time_ratio:>10.3f}")
    lines.append(f"(% on hard: the share of the samples drawn for prompts whose pass rate was below {HARD_BELOW} "
                 f"at the time)")
    return "\n".join(lines)


# -- command line ---------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``reinforce-ada simulate-multistep`` (registered in :mod:`reinforce_ada.cli`)."""
    p.add_argument("--dist", default="beta:0.4,2", help="initial pass rates: beta:A,B or a file (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=2048, help="number of prompts (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=4, help="epochs over the prompts (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=256, help="prompts per step (default: %(default)s)")
    p.add_argument("--drift-mean", type=float, default=0.5, help="mean logit change per epoch (default: %(default)s)")
    p.add_argument("--drift-std", type=float, default=0.5, help="std of the per-prompt drift (default: %(default)s)")
    p.add_argument("-M", "--samples-per-round", type=int, default=8)
    p.add_argument("-N", "--max-rounds", type=int, default=4)
    p.add_argument("-n", "--group-size", type=int, default=4)
    p.add_argument("--sampler", default="all", choices=["all", "adaptive", "streaming"],
                   help="which samplers to run (default: %(default)s)")
    p.add_argument("--target", type=float, default=0.3, help="beta allocation: exit-probability target")
    p.add_argument("--skip-below", type=float, default=0.1,
                   help="memory: skip prompts whose chance of any signal in M*N samples is below this")
    p.add_argument("--cap-below", type=float, default=0.0, help="memory: cap prompts below this exit chance")
    p.add_argument("--half-life", type=float, default=8.0, help="memory: evidence half-life in steps")
    p.add_argument("--concurrency", type=int, default=256, help="engine concurrency (default: %(default)s)")
    p.add_argument("--length-median", type=float, default=600.0, help="median completion tokens")
    p.add_argument("--max-tokens", type=int, default=3072, help="completion cap in tokens")
    p.add_argument("--give-up-below", type=float, default=0.0, help="streaming: give a prompt up below this chance")
    p.add_argument("--min-signal-rate", type=float, default=0.012,
                   help="stream-priced: the price of signal, in signal-prompts per sample (default: %(default)s)")
    p.add_argument("--budget", type=int, default=64,
                   help="stream-priced: most samples per prompt per step (default: %(default)s)")
    p.add_argument("--priced-exit-rule", default="mixed", choices=["mixed", "balanced", "positive"],
                   help="stream-priced: exit rule (default: %(default)s)")
    p.add_argument("--priced-half-life", type=float, default=16.0,
                   help="stream-priced: memory half-life in steps (default: %(default)s)")
    p.add_argument("--est-samples", type=int, default=8,
                   help="ada-est and its GRPO baseline: samples per prompt per step, the budget (default: %(default)s)")
    p.add_argument("--est-min", type=int, default=2, help="ada-est: fewest samples per prompt (default: %(default)s)")
    p.add_argument("--est-max", type=int, default=32, help="ada-est: most samples per prompt (default: %(default)s)")
    p.add_argument("--select-k", type=int, default=0,
                   help="first run select-prompts with this many samples per prompt (0: off; the paper used 16)")
    p.add_argument("--select-min", type=float, default=1 / 16, help="select-prompts: lowest pass rate kept")
    p.add_argument("--select-max", type=float, default=15 / 16, help="select-prompts: highest pass rate kept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default="", help="also write the results to this JSON file")


def _strategies_from(args: argparse.Namespace) -> tuple[LatencyModel, list[StrategySpec]]:
    """The latency model and the strategies the options describe, each built (its memory too) before anything is
    simulated: a value one of them refuses that the option checks above do not name is one line, not a traceback."""
    try:
        latency = LatencyModel(concurrency=args.concurrency, length_median=args.length_median,
                               max_tokens=args.max_tokens)
        specs = default_strategies(args.samples_per_round, args.max_rounds, args.group_size, args.concurrency,
                                   args.target, args.skip_below, args.cap_below, args.half_life, args.give_up_below,
                                   args.min_signal_rate, args.budget, args.priced_exit_rule, args.priced_half_life,
                                   args.est_samples, args.est_min, args.est_max)
        for spec in specs:
            if spec.memory is not None:
                PassRateMemory(**spec.memory)
    except ValueError as err:  # a ConfigError (a UserError) names its field already
        if isinstance(err, (UsageError, ConfigError)):
            raise
        raise UsageError(f"simulate-multistep: {err}") from None
    return latency, specs


def run(args: argparse.Namespace) -> int:
    """``reinforce-ada simulate-multistep``: run the strategies, print the table, optionally write JSON."""
    from reinforce_ada.outputs import refuse_unsafe_outputs

    refuse_unsafe_outputs({"--json": args.json}, [("--dist", args.dist)])
    check_simulation_inputs(args.prompts, args.seed)
    check_counts(epochs=args.epochs, batch_size=args.batch_size, concurrency=args.concurrency,
                 max_tokens=args.max_tokens, samples_per_round=args.samples_per_round, max_rounds=args.max_rounds,
                 group_size=args.group_size, budget=args.budget, est_samples=args.est_samples, est_min=args.est_min,
                 est_max=args.est_max)
    if not args.est_min <= args.est_samples <= args.est_max:
        raise UsageError(f"--est-samples {args.est_samples} must lie in [--est-min, --est-max] = "
                         f"[{args.est_min}, {args.est_max}]: the budget is spent within those bounds")
    check_positive_numbers(length_median=args.length_median, half_life=args.half_life,
                           priced_half_life=args.priced_half_life)
    if args.select_k < 0:
        raise UsageError(f"--select-k must be 0 (off) or a positive integer (got {args.select_k})")
    if args.select_k and not 0.0 <= args.select_min <= args.select_max <= 1.0:
        raise UsageError(f"need 0 <= --select-min <= --select-max <= 1 (got {args.select_min}, {args.select_max})")
    latency, specs = _strategies_from(args)  # every option's object built before anything is simulated
    rates = DriftingPassRates.draw(pass_rates_from(args.dist, args.prompts, args.seed), args.drift_mean,
                                   args.drift_std, args.seed)
    estimates = None
    if args.select_k:
        before = len(rates.initial)
        rates, estimates = select_initial(rates, args.select_k, args.select_min, args.select_max, args.seed)
        print(f"select-prompts: kept {len(rates.initial)} of {before} prompts ({args.select_k} samples each, pass "
              f"rate in [{args.select_min:.4g}, {args.select_max:.4g}]); their rates seed the memory")
    if args.sampler == "adaptive":
        specs = [s for s in specs if s.options is None]
    elif args.sampler == "streaming":
        specs = [s for s in specs if s.options is not None]
    results = [run_multistep(s, rates, num_epochs=args.epochs, batch_size=args.batch_size, latency=latency,
                             seed=args.seed, seed_estimates=estimates) for s in specs]
    print(f"{args.prompts} prompts x {args.epochs} epochs, initial pass rates {args.dist}, drift "
          f"N({args.drift_mean}, {args.drift_std}) logits/epoch, M={args.samples_per_round} N={args.max_rounds} "
          f"n={args.group_size}, concurrency {args.concurrency}")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([{k: finite_or_none(v) for k, v in r.summary().items()} for r in results],
                                              indent=2, allow_nan=False))
        print(f"wrote {Path(args.json).resolve()}")
    return 0
