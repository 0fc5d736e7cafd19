"""Generation time: round-based vs streaming adaptive sampling, against one batched call of the same completions.

Part 1 -- latency model (:mod:`reinforce_ada.research.latency`: 256 concurrent sequences, 12 ms + 0.05 ms/sequence
per decode step, log-normal completion lengths with median 600 tokens, capped at 3072). Prompts: Beta(0.4, 2) pass
rates after ``select-prompts`` (16 samples, keep 1/16..15/16), drifting over 2 epochs. For every strategy the time of
its steps is divided by the time of one batched call per step that generates the same completions (same lengths, no
adaptivity, no barrier, no cancelled work). Swept: the Beta allocation's target and ``fill_idle``.

Part 2 -- the real HF backend on the tiny model (CPU): wall time of the round-based sampler vs the streaming sampler
over ``AsyncHFEngine`` for the same prompts (the HF backend has no token-level continuous batching, so this shows the
overhead of the asynchronous path rather than a barrier saving).

    python benchmarks/streaming_latency.py [--prompts 2048] [--epochs 2] [--out DIR: default benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from reinforce_ada.config import SamplerConfig
from reinforce_ada.research.latency import LatencyModel
from reinforce_ada.research.simulate import pass_rates_from
from reinforce_ada.research.simulate_multistep import (
    DriftingPassRates,
    StrategySpec,
    format_table,
    run_multistep,
    select_initial,
)
from reinforce_ada.sampling.streaming import StreamingOptions

TARGETS = [0.1, 0.2, 0.3, 0.5, 0.7]


def latency_model_part(args):
    latency = LatencyModel(concurrency=args.concurrency)
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, args.seed), 0.5, 0.5, args.seed)
    rates, _ = select_initial(raw, 16, 1 / 16, 15 / 16, args.seed)
    cfg = SamplerConfig()
    specs = [StrategySpec("ada-balanced", cfg),
             StrategySpec("stream-fixed", cfg, StreamingOptions(allocation="fixed", max_in_flight=args.concurrency))]
    for fill in (False, True):
        for target in TARGETS:
            specs.append(StrategySpec(f"beta-t{target}{'-fill' if fill else ''}", cfg,
                                      StreamingOptions(target=target, fill_idle=fill, max_in_flight=args.concurrency)))
    results = [run_multistep(s, rates, num_epochs=args.epochs, batch_size=args.batch_size, latency=latency,
                             seed=args.seed) for s in specs]
    print(f"== latency model: {len(rates.initial)} selected prompts x {args.epochs} epochs, "
          f"concurrency {args.concurrency} ==")
    print(format_table(results))
    return results


def hf_part(args):
    from reinforce_ada.generation.async_hf import AsyncHFEngine
    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model
    from reinforce_ada.sampling.sampler import AdaptiveSampler
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.streaming import StreamingSampler
    from reinforce_ada.types import Prompt

    def verifier(prompts, completions):  # the untrained model starts with a digit now and then
        return [1.0 if c.text[:1].isdigit() else 0.0 for c in completions]

    import torch

    # One intra-op thread: on a loaded 2-core machine, OpenMP threads in the main thread spin against other
    # processes and made the (main-thread) round-based calls up to 30x slower than the same call in a worker thread.
    torch.set_num_threads(1)
    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    prompts = [Prompt(i, f"{i % 10}+{i // 10}=") for i in range(args.hf_prompts)]
    cfg = SamplerConfig()
    HFGenerator(model, tokenizer, max_new_tokens=args.hf_tokens, seed=args.seed).generate(  # warm-up, not timed
        [GenerationRequest(prompts[0], 8)])
    rows = []
    for repeat in range(args.hf_repeats):
        for name in ("round-based", "streaming"):
            gen = HFGenerator(model, tokenizer, max_new_tokens=args.hf_tokens, seed=args.seed + repeat,
                              max_batch_size=256)
            if name == "round-based":
                sampler = AdaptiveSampler(gen, verifier, cfg)
            else:
                # fill_idle off: a synchronous HF batch cannot be cancelled (what the sampler factory does too)
                sampler = StreamingSampler(AsyncHFEngine(gen, max_batch_size=256), verifier, cfg,
                                           StreamingOptions(max_in_flight=256, fill_idle=False))
            start = time.perf_counter()
            batch = sampler.sample(prompts)
            wall = time.perf_counter() - start
            rows.append(dict(sampler=name, repeat=repeat, wall_s=wall, samples=batch.metrics["total_samples"],
                             signal_fraction=batch.metrics["signal_fraction"], generate_calls=gen.num_calls))
    print(f"\n== real HF backend, tiny model, CPU: {len(prompts)} prompts, {args.hf_tokens} new tokens, "
          f"{args.hf_repeats} repeats (seeds differ per repeat) ==")
    print(f"{'sampler':<14}{'repeat':>7}{'wall s':>9}{'samples':>9}{'% signal':>10}{'generate calls':>16}")
    for r in rows:
        print(f"{r['sampler']:<14}{r['repeat']:>7d}{r['wall_s']:>9.2f}{r['samples']:>9.0f}{100 * r['signal_fraction']:>9.1f}%"
              f"{r['generate_calls']:>16d}")
    return rows


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    by = {r.strategy: r for r in results}
    for fill, style in ((False, "o-"), (True, "s-")):
        names = [f"beta-t{t}{'-fill' if fill else ''}" for t in TARGETS]
        axes[0].plot(TARGETS, [by[n].time_ratio for n in names], style, label=f"stream-beta, fill_idle={fill}")
        axes[1].plot(TARGETS, [by[n].samples_per_signal_prompt for n in names], style,
                     label=f"stream-beta, fill_idle={fill}")
    for name, color in (("ada-balanced", "tab:red"), ("stream-fixed", "tab:green")):
        axes[0].axhline(by[name].time_ratio, color=color, ls="--", label=name)
        axes[1].axhline(by[name].samples_per_signal_prompt, color=color, ls="--", label=name)
    axes[0].axhline(1.15, color="grey", ls=":", label="1.15x target")
    axes[0].set_ylabel("time / one batched call of the same completions")
    axes[1].set_ylabel("samples per signal-prompt")
    for ax in axes:
        ax.set_xlabel("Beta allocation target P(exit)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--hf-prompts", type=int, default=32)
    parser.add_argument("--hf-tokens", type=int, default=16)
    parser.add_argument("--hf-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                        help="folder for streaming_latency.png/.json (default: benchmarks/results)")
    args = parser.parse_args()
    results = latency_model_part(args)
    hf_rows = hf_part(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(results, out / "streaming_latency.png")
    (out / "streaming_latency.json").write_text(json.dumps({"latency_model": [r.summary() for r in results],
                                                            "hf_tiny": hf_rows}, indent=1))
    print(f"\nwrote {out / 'streaming_latency.png'} and {out / 'streaming_latency.json'}")


if __name__ == "__main__":
    main()
