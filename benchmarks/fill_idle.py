"""How many extra samples the streaming sampler should start in a step's tail (``fill_idle``), by engine cost.

When no prompt wants more samples and slots are free, ``fill_idle`` gives the prompts still being sampled extra
samples, most of them cancelled when their prompt exits. Whether that pays depends on what a running sequence costs:
on a GPU a decode iteration costs about the same with 40 or 256 sequences, on a CPU each sequence costs its share.
This runs the latency model (:mod:`reinforce_ada.research.latency`; 256 slots, log-normal lengths with median 600
tokens; Beta(0.4, 2) pass rates after ``select-prompts``, drifting) at two per-sequence costs -- 0.05 ms (a GPU-like
decode step, the model's default) and 0.5 ms (compute-bound, CPU-like) -- for the round sampler and the streaming
sampler (Beta allocation, target 0.3) without ``fill_idle``, with it up to the budgets, and with at most 1 or 2 extra
samples per prompt and wave (``fill_idle_per_wave``). Time is relative to one batched call of the same completions.

    python benchmarks/fill_idle.py [--prompts 1024] [--json benchmarks/results/fill_idle.json]
"""

from __future__ import annotations

import argparse
import json

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

VARIANTS = {"no-fill": dict(fill_idle=False), "fill-to-budget": dict(fill_idle_per_wave=None),
            "fill-1-per-wave": dict(fill_idle_per_wave=1), "fill-2-per-wave": dict(fill_idle_per_wave=2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    raw = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, args.seed), 0.5, 0.5, args.seed)
    rates, _ = select_initial(raw, 16, 1 / 16, 15 / 16, args.seed)
    cfg = SamplerConfig()
    out = {}
    for label, per_seq_ms in (("GPU-like", 0.05), ("CPU-like", 0.5)):
        latency = LatencyModel(concurrency=256, step_time_per_seq=per_seq_ms / 1000)
        specs = [StrategySpec("ada-balanced", cfg)] + [
            StrategySpec(name, cfg, StreamingOptions(target=0.3, max_in_flight=256, **options))
            for name, options in VARIANTS.items()]
        results = [run_multistep(s, rates, num_epochs=1, batch_size=args.batch_size, latency=latency, seed=args.seed)
                   for s in specs]
        print(f"== {label}: 12 ms + {per_seq_ms} ms per running sequence per decode step ==")
        print(format_table(results))
        out[label] = {r.strategy: {"time_vs_batched": r.time_ratio, "samples_per_prompt": r.samples_per_prompt,
                                   "tokens": r.total_tokens, "cancelled": r.num_cancelled}
                      for r in results}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=1)


if __name__ == "__main__":
    main()
