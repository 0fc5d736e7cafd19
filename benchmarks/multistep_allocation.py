"""Multi-step simulation: samples per signal-prompt of streaming + Beta allocation + memory vs the paper's Ada-balanced.

Runs :mod:`reinforce_ada.simulate_multistep` (drifting pass rates, latency model) on two prompt sets:

* ``raw``       -- initial pass rates Beta(0.4, 2) (many hopeless prompts, as in ``reinforce-ada simulate``);
* ``selected``  -- the same prompts after ``select-prompts`` (16 samples, keep 1/16 <= rate <= 15/16, the paper's
  data step), whose estimates seed the memory.

For each it runs Ada-balanced (M=8, N=4, n=4, round-based), the streaming sampler with fixed and Beta request
sizes, Beta + memory, and one sample at a time per prompt (``sequential-floor``: the fewest samples any sampler with
the same exit rule can draw on a prompt that exits, and the same as the others on one that does not). It then sweeps
the memory's skip threshold (``skip_below``, with ``max_evidence`` 32 or 128) and the give-up threshold
(``give_up_below``) to trace samples per signal-prompt against signal fraction, prints the tables and the best
streaming point whose signal fraction is at least Ada-balanced's, and writes ``docs/img/multistep_allocation.png``
and a JSON of every number.

It also runs the ``mixed`` exit rule (exit once the pool holds >= 1 positive and >= 1 negative, the least that gives a
group with signal; balanced selection keeps 1+3 or 2+2): round-based (``ada-mixed``, to separate the rule's effect
from the sampler's), streaming one sample per request (``stream-1by1-mixed``: ``allocation="fixed"`` with ``M = 1,
N = 32``, the same budget of 32 -- the streaming scheduler accepts ``mixed`` only with ``fixed`` allocation until it
takes its list of Beta-capable rules from ``core.beta_allocation.THRESHOLD_EXIT_RULES``), and the same with memory
skipping (``skip_below`` sweep, ``max_evidence`` 128). The knobs of ``mixed-mem-tuned`` (skip_below 0.3,
max_evidence 128, cap off) were chosen on seed 0's raw set (the sweep below, and a one-off grid, not in this script,
over skip_below, cap_below, cap_samples, max_evidence, give_up_below and half_life); ``--report-seeds`` reruns Ada-balanced and the fixed mixed
configurations on other seeds, untuned, and prints their ratios.

    python benchmarks/multistep_allocation.py [--prompts 2048] [--epochs 4] [--out docs/img] [--report-seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reinforce_ada.config import SamplerConfig
from reinforce_ada.latency import LatencyModel
from reinforce_ada.simulate import pass_rates_from
from reinforce_ada.simulate_multistep import (
    DriftingPassRates,
    StrategySpec,
    default_strategies,
    format_table,
    run_multistep,
    select_initial,
)
from reinforce_ada.streaming import StreamingOptions

GIVE_UP = [0.02, 0.05, 0.1, 0.2, 0.3]
SKIP = [(0.3, 32), (0.4, 32), (0.3, 128), (0.4, 128)]  # (skip_below, memory max_evidence)
MIXED_SKIP = [0.3, 0.4, 0.45, 0.5, 0.55]  # skip_below with the mixed exit rule, max_evidence 128
TUNED = dict(skip_below=0.3, max_evidence=128.0)  # chosen on seed 0, raw set; not retuned on any other seed


def mixed_strategies(concurrency):
    """The mixed-exit-rule rows that need no tuning, plus the tuned memory configuration."""
    one_by_one = SamplerConfig(exit_rule="mixed", samples_per_round=1, max_rounds=32)  # budget M * N = 32, as Ada's
    opts = dict(allocation="fixed", max_in_flight=concurrency)
    return [
        StrategySpec("ada-mixed", SamplerConfig(exit_rule="mixed")),
        StrategySpec("stream-1by1-mixed", one_by_one, StreamingOptions(**opts)),
        StrategySpec("mixed-mem-tuned", one_by_one, StreamingOptions(skip_below=TUNED["skip_below"], **opts),
                     dict(half_life=8.0, max_evidence=TUNED["max_evidence"])),
    ]


def run_set(name, rates, estimates, args, latency):
    specs = default_strategies(concurrency=args.concurrency)
    cfg = SamplerConfig()
    specs.append(StrategySpec("sequential-floor", cfg, StreamingOptions(max_request=1, fill_idle=False,
                                                                       max_in_flight=10**6)))
    for skip, max_evidence in SKIP:
        specs.append(StrategySpec(f"beta-mem-skip{skip}-ev{max_evidence}", cfg,
                                  StreamingOptions(max_in_flight=args.concurrency, skip_below=skip),
                                  dict(half_life=8.0, max_evidence=float(max_evidence))))
    for g in GIVE_UP:
        specs.append(StrategySpec(f"beta-mem-giveup{g}", cfg,
                                  StreamingOptions(max_in_flight=args.concurrency, skip_below=0.1, give_up_below=g),
                                  dict(half_life=8.0)))
    specs += mixed_strategies(args.concurrency)
    one_by_one = SamplerConfig(exit_rule="mixed", samples_per_round=1, max_rounds=32)
    for skip in MIXED_SKIP:
        specs.append(StrategySpec(f"mixed-mem-skip{skip}", one_by_one,
                                  StreamingOptions(allocation="fixed", max_in_flight=args.concurrency, skip_below=skip),
                                  dict(half_life=8.0, max_evidence=128.0)))
    results = [run_multistep(s, rates, num_epochs=args.epochs, batch_size=args.batch_size, latency=latency,
                             seed=args.seed, seed_estimates=estimates) for s in specs]
    print(f"\n== {name}: {len(rates.initial)} prompts x {args.epochs} epochs ==")
    print(format_table(results))
    print_ratios(results)
    ada = results[0]
    eligible = [r for r in results[1:] if r.signal_fraction >= ada.signal_fraction and r.strategy != "sequential-floor"]
    for label, rows in (("balanced exit rule", [r for r in eligible if "mixed" not in r.strategy]),
                        ("any exit rule", eligible)):
        best = min(rows, key=lambda r: r.samples_per_signal_prompt) if rows else None
        if best is not None:
            print(f"best streaming point ({label}) with signal >= Ada-balanced's ({100 * ada.signal_fraction:.1f}%): "
                  f"{best.strategy} at {100 * best.signal_fraction:.1f}%, samples/signal "
                  f"{best.samples_per_signal_prompt:.2f} = "
                  f"{best.samples_per_signal_prompt / ada.samples_per_signal_prompt:.3f}x of Ada-balanced")
    return results, best


def print_ratios(results):
    """Samples per signal-prompt over Ada-balanced's (the first row), and whether the signal fraction is >= its."""
    ada = results[0]
    for r in results[1:]:
        ok = "ok " if r.signal_fraction >= ada.signal_fraction else "LOW"
        print(f"  {r.strategy:<26} signal {100 * r.signal_fraction:5.1f}% vs {100 * ada.signal_fraction:5.1f}% [{ok}]  "
              f"samples/signal {r.samples_per_signal_prompt:6.2f} = "
              f"{r.samples_per_signal_prompt / ada.samples_per_signal_prompt:.3f}x")


def report_seed(seed, args, latency):
    """Ada-balanced and the fixed mixed configurations on another seed (no tuning)."""
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, seed), 0.5, 0.5, seed)
    selected, estimates = select_initial(raw, 16, 1 / 16, 15 / 16, seed)
    out = {}
    for name, rates, est in (("raw Beta(0.4, 2)", raw, None), ("after select-prompts", selected, estimates)):
        specs = [StrategySpec("ada-balanced", SamplerConfig())] + mixed_strategies(args.concurrency)
        results = [run_multistep(s, rates, num_epochs=args.epochs, batch_size=args.batch_size, latency=latency,
                                 seed=seed, seed_estimates=est) for s in specs]
        print(f"\n== seed {seed}, {name}: {len(rates.initial)} prompts x {args.epochs} epochs (reported, not tuned) ==")
        print(format_table(results))
        print_ratios(results)
        out[name] = [r.summary() for r in results]
    return out


def plot(sets, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 6.5))
    for ax, (name, results) in zip(axes, sets.items()):
        ada = results[0]
        sweep = [r for r in results if r.strategy.startswith("beta-mem-giveup")]
        ax.plot([100 * r.signal_fraction for r in sweep], [r.samples_per_signal_prompt for r in sweep], "k.-", lw=0.8,
                label="beta+mem, give_up_below " + "/".join(r.strategy.removeprefix("beta-mem-giveup") for r in sweep))
        skips = [r for r in results if r.strategy.startswith("beta-mem-skip")]
        ax.scatter([100 * r.signal_fraction for r in skips], [r.samples_per_signal_prompt for r in skips], marker="+",
                   s=70, color="black", label="beta+mem, skip_below 0.3/0.4 x max_evidence 32/128")
        mixed = [r for r in results if r.strategy.startswith("mixed-mem-skip")]
        ax.plot([100 * r.signal_fraction for r in mixed], [r.samples_per_signal_prompt for r in mixed], "b.--", lw=0.8,
                label="mixed exit + mem, skip_below " + "/".join(r.strategy.removeprefix("mixed-mem-skip")
                                                                  for r in mixed))
        markers = {"ada-balanced": "s", "stream-fixed": "^", "stream-beta": "o", "stream-beta-mem": "D",
                   "sequential-floor": "x", "ada-mixed": "P", "stream-1by1-mixed": "v", "mixed-mem-tuned": "*"}
        for r in results:
            if r.strategy in markers:
                ax.scatter(100 * r.signal_fraction, r.samples_per_signal_prompt, marker=markers[r.strategy], s=70,
                           label=r.strategy)
        ax.axhline(0.6 * ada.samples_per_signal_prompt, color="tab:red", ls="--", lw=1, label="0.6x Ada-balanced")
        ax.axvline(100 * ada.signal_fraction, color="grey", ls=":", lw=1, label="Ada-balanced signal")
        ax.set_xlabel("% prompts whose group has signal")
        ax.set_ylabel("samples per signal-prompt")
        ax.set_title(name)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
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
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--report-seeds", type=int, nargs="*", default=[1, 2, 3],
                        help="seeds on which the untuned/tuned mixed rows are rerun against Ada-balanced")
    args = parser.parse_args()
    latency = LatencyModel(concurrency=args.concurrency)
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, args.seed), 0.5, 0.5, args.seed)
    selected, estimates = select_initial(raw, 16, 1 / 16, 15 / 16, args.seed)
    sets, summary = {}, {}
    for name, rates, est in (("raw Beta(0.4, 2)", raw, None), ("after select-prompts", selected, estimates)):
        results, best = run_set(name, rates, est, args, latency)
        sets[name] = results
        summary[name] = {"results": [r.summary() for r in results], "best_at_ada_signal": best and best.strategy}
    summary["report_seeds"] = {str(seed): report_seed(seed, args, latency) for seed in args.report_seeds}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(sets, out / "multistep_allocation.png")
    (out / "multistep_allocation.json").write_text(json.dumps(summary, indent=1))
    print(f"\nwrote {out / 'multistep_allocation.png'} and {out / 'multistep_allocation.json'}")


if __name__ == "__main__":
    main()
