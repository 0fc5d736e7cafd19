"""Multi-step simulation: samples per signal-prompt of the streaming sampler vs the paper's Ada-balanced.

Runs :mod:`reinforce_ada.research.simulate_multistep` (drifting pass rates, latency model) on two prompt sets:

* ``raw``       -- initial pass rates Beta(0.4, 2) (many hopeless prompts, as in ``reinforce-ada simulate``);
* ``selected``  -- the same prompts after ``select-prompts`` (16 samples, keep 1/16 <= rate <= 15/16, the paper's
  data step), whose estimates seed the memory.

Rows (all with the same prompts, pass-rate trajectories, order and steps; ``ada-balanced`` is the reference):

* ``ada-balanced`` -- the paper (round-based, M=8, N=4, n=4, balanced exit rule);
* ``stream-fixed`` / ``stream-beta`` / ``stream-beta-mem`` -- streaming with the balanced rule (no barrier; Beta
  request sizes; + memory);
* ``sequential-floor`` -- the balanced rule one sample at a time (no sampler with that rule draws fewer on a
  prompt that exits);
* ``ada-mixed`` -- round-based with the ``mixed`` exit rule (>= 1 positive and >= 1 negative);
* ``stream-1by1-mixed`` -- the mixed rule one sample per request, budget 32 (nothing tuned);
* ``stream-priced`` -- the mixed rule with Beta request sizes, memory (half-life 16 steps, max_evidence 128), the
  price of signal ``min_signal_rate`` and a per-prompt budget of 64. Its knobs were chosen on seed 0's raw set (a
  grid over half-life 4/8/16/32/never x max_evidence 32/64/128 x budget 64/128 x price 0.008-0.025, not kept in
  this script); ``min_signal_rate`` is the trade-off knob and is swept here (``priced@<rate>`` rows);
* ``balanced-priced@<rate>`` -- the same pricing with the paper's balanced exit rule.

"At Ada-balanced's signal fraction" is read off each price sweep by linear interpolation between the two sweep
points that bracket Ada-balanced's signal fraction (a sweep that never reaches it reports nothing).
``--report-seeds`` reruns the reference, ``stream-1by1-mixed`` and the priced sweep on other seeds with every knob
fixed.

    python benchmarks/multistep_allocation.py [--prompts 2048] [--epochs 4] [--out DIR: default benchmarks/results] [--report-seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reinforce_ada.config import SamplerConfig
from reinforce_ada.research.latency import LatencyModel
from reinforce_ada.research.simulate import pass_rates_from
from reinforce_ada.research.simulate_multistep import (
    DriftingPassRates,
    MultistepResult,
    StrategySpec,
    default_strategies,
    format_table,
    run_multistep,
    select_initial,
)
from reinforce_ada.sampling.streaming import StreamingOptions

PRICES = [0.008, 0.010, 0.011, 0.012, 0.013, 0.014, 0.016, 0.02, 0.03, 0.05, 0.08]  # min_signal_rate sweep
BALANCED_PRICES = [0.005, 0.01, 0.02, 0.04]  # the same with the balanced exit rule
PRICED = dict(budget=64, memory=dict(half_life=16.0, max_evidence=128.0), rate=0.012)  # chosen on seed 0, raw


def priced(name: str, rate: float, concurrency: int, exit_rule: str = "mixed") -> StrategySpec:
    return StrategySpec(name, SamplerConfig(exit_rule=exit_rule),
                        StreamingOptions(max_in_flight=concurrency, min_signal_rate=rate, budget=PRICED["budget"]),
                        dict(PRICED["memory"]))


def one_by_one_mixed(concurrency: int) -> StrategySpec:
    return StrategySpec("stream-1by1-mixed", SamplerConfig(exit_rule="mixed", samples_per_round=1, max_rounds=32),
                        StreamingOptions(allocation="fixed", max_in_flight=concurrency))


def at_signal(sweep: list[MultistepResult], signal: float) -> float | None:
    """Samples per signal-prompt at ``signal``, interpolated between the sweep points that bracket it."""
    points = sorted((r.signal_fraction, r.samples_per_signal_prompt) for r in sweep)
    for (s0, y0), (s1, y1) in zip(points, points[1:]):
        if s0 <= signal <= s1:
            return y0 if s1 == s0 else y0 + (y1 - y0) * (signal - s0) / (s1 - s0)
    return None


def run_specs(specs, rates, estimates, args, latency, seed):
    return [run_multistep(s, rates, num_epochs=args.epochs, batch_size=args.batch_size, latency=latency, seed=seed,
                          seed_estimates=estimates) for s in specs]


def summarize(name: str, results: list[MultistepResult]) -> dict:
    """Print the ratios against Ada-balanced (the first row) and the interpolated sweeps; return the numbers."""
    ada = results[0]
    print(f"  ratios to ada-balanced ({ada.samples_per_signal_prompt:.2f} samples/signal at "
          f"{100 * ada.signal_fraction:.1f}% signal):")
    for r in results[1:]:
        ok = "ok " if r.signal_fraction >= ada.signal_fraction else "LOW"
        print(f"    {r.strategy:<26} signal {100 * r.signal_fraction:5.1f}% [{ok}]  samples/signal "
              f"{r.samples_per_signal_prompt:6.2f} = {r.samples_per_signal_prompt / ada.samples_per_signal_prompt:.3f}x")
    out = {"ada_signal": ada.signal_fraction, "ada_samples_per_signal": ada.samples_per_signal_prompt}
    for label, prefix in (("mixed rule, priced", "priced@"), ("balanced rule, priced", "balanced-priced@")):
        sweep = [r for r in results if r.strategy.startswith(prefix)]
        if not sweep:
            continue
        value = at_signal(sweep, ada.signal_fraction)
        ratio = value / ada.samples_per_signal_prompt if value is not None else None
        out[prefix.rstrip("@")] = ratio
        text = f"{ratio:.3f}x" if ratio is not None else "not reached by the sweep"
        print(f"  {name}: {label} at Ada-balanced's signal fraction (interpolated): {text}")
    return out


def run_set(name, rates, estimates, args, latency):
    cfg = SamplerConfig()
    specs = default_strategies(concurrency=args.concurrency)[:4]  # ada-balanced, stream-fixed/-beta/-beta-mem
    specs.append(StrategySpec("sequential-floor", cfg, StreamingOptions(max_request=1, fill_idle=False,
                                                                       max_in_flight=10**6)))
    specs += [StrategySpec("ada-mixed", SamplerConfig(exit_rule="mixed")), one_by_one_mixed(args.concurrency),
              priced("stream-priced", PRICED["rate"], args.concurrency)]
    specs += [priced(f"priced@{rate:g}", rate, args.concurrency) for rate in PRICES if rate != PRICED["rate"]]
    specs += [priced(f"balanced-priced@{rate:g}", rate, args.concurrency, "balanced") for rate in BALANCED_PRICES]
    results = run_specs(specs, rates, estimates, args, latency, args.seed)
    for r in results:  # the tuned point is also a point of the sweep
        if r.strategy == "stream-priced":
            results.append(MultistepResult(**{**r.__dict__, "strategy": f"priced@{PRICED['rate']:g}"}))
    print(f"\n== {name}: {len(rates.initial)} prompts x {args.epochs} epochs, seed {args.seed} ==")
    print(format_table(results))
    return results, summarize(name, results)


def report_seed(seed, args, latency):
    """The reference, the untuned mixed row and the priced sweep on another seed (nothing retuned)."""
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, seed), 0.5, 0.5, seed)
    selected, estimates = select_initial(raw, 16, 1 / 16, 15 / 16, seed)
    out = {}
    for name, rates, est in (("raw Beta(0.4, 2)", raw, None), ("after select-prompts", selected, estimates)):
        specs = [StrategySpec("ada-balanced", SamplerConfig()), one_by_one_mixed(args.concurrency)]
        specs += [priced(f"priced@{rate:g}", rate, args.concurrency) for rate in PRICES]
        results = run_specs(specs, rates, est, args, latency, seed)
        print(f"\n== seed {seed}, {name}: {len(rates.initial)} prompts x {args.epochs} epochs (knobs fixed) ==")
        print(format_table(results))
        out[name] = {"results": [r.summary() for r in results], **summarize(name, results)}
    return out


def plot(sets, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 6.8))
    for ax, (name, results) in zip(axes, sets.items()):
        ada = results[0]
        for prefix, style, label in (("priced@", "b.-", "mixed rule + memory, priced (min_signal_rate sweep)"),
                                     ("balanced-priced@", "k.--", "balanced rule + memory, priced")):
            sweep = sorted((r for r in results if r.strategy.startswith(prefix)), key=lambda r: r.signal_fraction)
            ax.plot([100 * r.signal_fraction for r in sweep], [r.samples_per_signal_prompt for r in sweep], style,
                    lw=0.9, label=label)
            for r in sweep:
                ax.annotate(r.strategy.removeprefix(prefix), (100 * r.signal_fraction, r.samples_per_signal_prompt),
                            fontsize=6, xytext=(3, 3), textcoords="offset points")
        markers = {"ada-balanced": "s", "stream-fixed": "^", "stream-beta": "o", "stream-beta-mem": "D",
                   "sequential-floor": "x", "ada-mixed": "P", "stream-1by1-mixed": "v", "stream-priced": "*"}
        for r in results:
            if r.strategy in markers:
                ax.scatter(100 * r.signal_fraction, r.samples_per_signal_prompt, marker=markers[r.strategy],
                           s=110 if r.strategy == "stream-priced" else 60, label=r.strategy, zorder=3)
        ax.axhline(0.6 * ada.samples_per_signal_prompt, color="tab:red", ls="--", lw=1, label="0.6x Ada-balanced")
        ax.axvline(100 * ada.signal_fraction, color="grey", ls=":", lw=1, label="Ada-balanced's signal fraction")
        ax.set_xlabel("% prompt-visits whose group has signal")
        ax.set_ylabel("samples per signal-prompt")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                        help="folder for multistep_allocation.png/.json (default: benchmarks/results)")
    parser.add_argument("--report-seeds", type=int, nargs="*", default=[1, 2, 3],
                        help="seeds on which the reference and the priced sweep are rerun with the knobs fixed")
    args = parser.parse_args()
    latency = LatencyModel(concurrency=args.concurrency)
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, args.seed), 0.5, 0.5, args.seed)
    selected, estimates = select_initial(raw, 16, 1 / 16, 15 / 16, args.seed)
    sets, summary = {}, {}
    for name, rates, est in (("raw Beta(0.4, 2)", raw, None), ("after select-prompts", selected, estimates)):
        results, numbers = run_set(name, rates, est, args, latency)
        sets[name] = results
        summary[name] = {"results": [r.summary() for r in results], **numbers}
    summary["report_seeds"] = {str(seed): report_seed(seed, args, latency) for seed in args.report_seeds}
    print("\nmixed rule, priced, at Ada-balanced's signal fraction (x Ada-balanced's samples per signal-prompt):")
    seeds = {str(args.seed): summary, **summary["report_seeds"]}
    for name in sets:
        cells = [f"seed {s}: " + (f"{v[name]['priced']:.3f}x" if v[name].get("priced") else "-")
                 for s, v in seeds.items()]
        print(f"  {name:<22}" + "   ".join(cells))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(sets, out / "multistep_allocation.png")
    (out / "multistep_allocation.json").write_text(json.dumps(summary, indent=1))
    print(f"\nwrote {out / 'multistep_allocation.png'} and {out / 'multistep_allocation.json'}")


if __name__ == "__main__":
    main()
