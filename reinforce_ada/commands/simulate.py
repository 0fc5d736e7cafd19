"""``reinforce-ada simulate``: GRPO, DAPO, Ada-positive and Ada-balanced through the real samplers on prompts with
hidden pass rates and Bernoulli rewards (:mod:`reinforce_ada.research.simulate`), as a table, JSON or a plot."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dist", default="beta:0.4,2",
                   help="pass-rate distribution: beta:A,B, or a file with one pass rate per line (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=20000, help="number of simulated prompts (default: %(default)s)")
    p.add_argument("-M", "--samples-per-round", type=int, default=8, help="M (default: %(default)s)")
    p.add_argument("-N", "--max-rounds", type=int, default=4, help="N (default: %(default)s)")
    p.add_argument("-n", "--group-size", type=int, default=4, help="n (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=512, help="prompts per step (default: %(default)s)")
    p.add_argument("--dapo-max-batches", type=int, default=4,
                   help="DAPO's budget: generation batches per step (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="", metavar="PATH", help="also write a plot of the results to this PNG "
                                                              "(default: none)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table (stdout holds "
                                                       "only the JSON)")


def run(args: argparse.Namespace) -> int:
    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.json_stdout import print_result
    from reinforce_ada.research.simulate import (check_counts, check_simulation_inputs, finite_or_none, format_table,
                                                 grpo_signal_closed_form, pass_rates_from, plot, simulate)
    from reinforce_ada.outputs import refuse_unsafe_outputs

    refuse_unsafe_outputs({"--plot": args.plot}, [("--dist", args.dist)])
    check_simulation_inputs(args.prompts, args.seed)
    check_counts(batch_size=args.batch_size, dapo_max_batches=args.dapo_max_batches)
    SamplerConfig(samples_per_round=args.samples_per_round, max_rounds=args.max_rounds, group_size=args.group_size)
    rates = pass_rates_from(args.dist, args.prompts, args.seed)
    results = simulate(rates, samples_per_round=args.samples_per_round, max_rounds=args.max_rounds,
                       group_size=args.group_size, batch_size=args.batch_size,
                       dapo_max_batches=args.dapo_max_batches, seed=args.seed)
    keys = ("strategy", "samples_per_prompt", "signal_fraction", "samples_per_signal_prompt", "rounds_max")
    if args.json:
        print_result(json.dumps([{k: finite_or_none(asdict(r)[k]) for k in keys} for r in results], indent=2,
                                allow_nan=False))
    else:
        print(f"{len(rates)} prompts, pass rates {args.dist}, M={args.samples_per_round} N={args.max_rounds} "
              f"n={args.group_size}; GRPO n={args.group_size} closed-form signal "
              f"{100 * grpo_signal_closed_form(rates, args.group_size):.1f}%")
        print(format_table(results))
    if args.plot:
        plot(results, args.plot, title=f"{args.dist}, M={args.samples_per_round} N={args.max_rounds} "
                                       f"n={args.group_size}")
        print(f"wrote {Path(args.plot).resolve()}", file=sys.stderr if args.json else sys.stdout)
    return 0
