"""``reinforce-ada`` command line: train, eval, simulate, simulate-multistep, plot, select-prompts.

Errors: an option no subcommand has is refused (no prefix matching: ``--learning-rat`` is not ``--learning-rate``).
A :class:`~reinforce_ada.errors.UserError` (a bad setting, file, row or option), a missing optional package
(``ImportError``) or an operating-system error (a missing file, a full disk) is printed as one line
``error: <message>`` and the command exits with status 2; any other exception is a bug and keeps its traceback.

Every subcommand is one row of :data:`SUBCOMMANDS`, here and nowhere else: its name, help texts, and the
``add_arguments(parser)`` and ``run(args)`` functions that live beside the code they drive (train, simulate and plot
keep theirs in this file).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from reinforce_ada.errors import UsageError, UserError


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
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


def _run_simulate(args: argparse.Namespace) -> int:
    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.research.simulate import (check_counts, check_simulation_inputs, finite_or_none, format_table,
                                                 grpo_signal_closed_form, pass_rates_from, plot, simulate)

    check_simulation_inputs(args.prompts, args.seed)
    check_counts(batch_size=args.batch_size, dapo_max_batches=args.dapo_max_batches)
    SamplerConfig(samples_per_round=args.samples_per_round, max_rounds=args.max_rounds, group_size=args.group_size)
    rates = pass_rates_from(args.dist, args.prompts, args.seed)
    results = simulate(rates, samples_per_round=args.samples_per_round, max_rounds=args.max_rounds,
                       group_size=args.group_size, batch_size=args.batch_size,
                       dapo_max_batches=args.dapo_max_batches, seed=args.seed)
    keys = ("strategy", "samples_per_prompt", "signal_fraction", "samples_per_signal_prompt", "rounds_max")
    if args.json:
        print(json.dumps([{k: finite_or_none(asdict(r)[k]) for k in keys} for r in results], indent=2, allow_nan=False))
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


def _train_arguments(p: argparse.ArgumentParser) -> None:
    from reinforce_ada.config import STRATEGIES, TrainConfig, add_config_arguments
    from reinforce_ada.data.tasks import task_names_text
    from reinforce_ada.verifiers.registry import VERIFIERS

    p.add_argument("--config", help="YAML file of TrainConfig fields")
    add_config_arguments(p, TrainConfig, choices={  # from the registries, so that a new entry is listed
        "task": task_names_text(), "strategy": ", ".join(STRATEGIES),
        "verifier": ", ".join([*VERIFIERS.names(), "package.module:function"])})


def _run_train(args: argparse.Namespace) -> int:
    from reinforce_ada.config import TrainConfig, load_config

    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "func", "config", "verbose")}
    config = load_config(TrainConfig, args.config, overrides)  # every field checked before anything loads
    from reinforce_ada.training import Trainer

    trainer = Trainer(config)
    try:
        summary = trainer.train()
    finally:  # shut a vLLM engine down and remove the folder it was built from, also when the run stops
        trainer.close()
    if trainer.nothing_to_do is not None:
        print(trainer.nothing_to_do)
    before, after = summary["accuracy_before"], summary["accuracy_after"]
    if before is not None and after is not None:
        print(f"held-out sampled accuracy: {100 * before:.1f}% -> {100 * after:.1f}%")
    print(f"steps {summary['steps']}, samples drawn {summary['total_samples']}, "
          f"tokens generated {summary['total_tokens']}, wall {summary['wall_seconds']:.0f} s")
    print(f"run folder: {Path(config.output_dir).resolve()}")
    return 0


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (each with metrics.jsonl)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for training.png (default for one run: its plots/ folder; several runs: required)")


def _run_plot(args: argparse.Namespace) -> int:
    from reinforce_ada.plotting import plot_runs

    out = args.out
    if out is None:
        if len(args.runs) > 1:
            raise UsageError(f"plotting {len(args.runs)} runs together: give --out DIR for their training.png")
        out = Path(args.runs[0]) / "plots"
    print(f"wrote {plot_runs(args.runs, out).resolve()}")
    return 0


# -- the subcommands, in the order ``--help`` lists them -----------------------------------------------------------
@dataclass(frozen=True)
class Subcommand:
    """One ``reinforce-ada NAME``: its help texts and where its options and its action live.

    ``arguments(parser)`` adds the options, ``run(args)`` does the work and returns the exit status; each is a
    function or a ``"module:function"`` string, imported when the parser is built (not when this file is).
    ``doc_description``: the description is the second paragraph of ``run``'s module docstring, shown as written.
    """

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None] | str
    run: Callable[[argparse.Namespace], int] | str
    description: str = ""
    doc_description: bool = False


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("train", "train a model with Reinforce-Ada (no arguments: the built-in CPU demo)",
               _train_arguments, _run_train,
               description="Train with Reinforce-Ada, GRPO or DAPO. Settings come from the defaults, then --config "
                           "YAML, then the options below. With no arguments: a tiny char-level model on 2-digit "
                           "addition, on CPU."),
    Subcommand("simulate", "compare sampling strategies on simulated prompts",
               _simulate_arguments, _run_simulate,
               description="Run GRPO, DAPO, Ada-positive and Ada-balanced through the real samplers on prompts with "
                           "hidden pass rates and Bernoulli rewards."),
    Subcommand("plot", "overlay the metrics of one or more runs",
               _plot_arguments, _run_plot,
               description="Reward and accuracy vs step and vs samples, zero-variance fraction, samples per prompt "
                           "by round."),
    Subcommand("eval", "Ave@k / pass@k of a checkpoint on one or more data sources",
               "reinforce_ada.evaluation:add_arguments", "reinforce_ada.evaluation:run",
               description="Sample k completions per prompt from a safetensors checkpoint, score them and print "
                           "Ave@k, pass@1 and pass@k per data source."),
    Subcommand("select-prompts", "estimate pass rates with k samples and keep a difficulty range",
               "reinforce_ada.research.select_prompts:add_arguments", "reinforce_ada.research.select_prompts:run",
               doc_description=True),
    Subcommand("simulate-multistep", "multi-step simulation: drifting pass rates, streaming, memory, latency",
               "reinforce_ada.research.simulate_multistep:add_arguments",
               "reinforce_ada.research.simulate_multistep:run",
               description="Run round-based and streaming samplers for several epochs on prompts whose pass rates "
                           "drift (logistic learning model), with a generation-latency model."),
)


def _resolve(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` without prefix matching; ``add_subparsers`` makes every subcommand's parser one too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from reinforce_ada.config.checks import terminal_text

    parser = _Parser(prog="reinforce-ada", description=terminal_text(__doc__.split("\n\n")[0]))
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS:
        run = _resolve(command.run)
        if command.doc_description:
            p = subparsers.add_parser(command.name, help=command.help,
                                      description=terminal_text(sys.modules[run.__module__].__doc__.split("\n\n")[1]),
                                      formatter_class=argparse.RawTextHelpFormatter)
        else:
            p = subparsers.add_parser(command.name, help=command.help, description=command.description)
        _resolve(command.arguments)(p)
        p.set_defaults(func=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # httpx logs every request it sends (a server-backed run sends thousands)
        logging.getLogger("httpx").setLevel(logging.WARNING)
    from reinforce_ada.training.guards import RunStopped

    try:
        return args.func(args)
    except (UserError, ImportError) as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except RunStopped as err:  # a run that cannot learn: stopped early, with the cause
        print(f"error: {err}", file=sys.stderr)
        return 3
    except OSError as err:
        print(f"error: {_one_line(_os_error_message(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # nothing is half-written: checkpoints and metrics lines are written whole
        print(f"interrupted: reinforce-ada {args.command} stopped (KeyboardInterrupt); a training run continues from "
              "its newest checkpoint with --resume", file=sys.stderr)
        return 130


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _os_error_message(err: OSError) -> str:
    """``strerror: file`` when the OS named the file, else the message as raised (it usually names it)."""
    if err.filename is not None and err.strerror:
        return f"{err.strerror}: {err.filename}"
    return str(err)


if __name__ == "__main__":
    sys.exit(main())
