"""``reinforce-ada compare``: strategies side by side on your model, data and reward, at equal steps, at the baseline's
generated tokens and at its wall-clock.

Trains every strategy x learning rate x seed of the grid as a normal ``train`` run folder under --out (any other
``train`` option applies to every run: --model, --data, --eval-data, --verifier, --task, --max-steps, --eval-steps,
...), up to --parallel at a time, and reports each strategy at its own best learning rate against the baseline
(the first strategy): paired by seed, with 95% intervals, at the baseline's last step, at its mean generated tokens
and at its mean step seconds (generation + scoring + update + weight sync), and the steps each needs to reach the
baseline's final accuracy. A rerun of the same command skips the finished runs and continues the others; the grid,
the baseline and the best-lr rule are fixed in --out's compare.json by the first run and cannot change afterwards.

Writes into --out: report.md (the verdict in words first -- each strategy ahead, behind or inconclusive at equal
tokens, steps and seconds, and the seeds an inconclusive one would need -- then the tables, by difficulty stratum and
pass@k too), report.json (everything in them, per run histories included; schema in docs/compare.md), report.png
(accuracy against steps, tokens and seconds; per stratum, pass@k, accuracy against entropy; sampling dynamics),
runs.jsonl (when each run ran and how it ended). Everything a run is given is checked, and the model loaded once, before any run starts.

Example: reinforce-ada compare --strategies grpo ada-balanced stream-mixed --lrs 5e-4 1e-3 --seeds 0 1 2 \\
    --max-steps 40 --eval-steps 4 --out runs/compare
"""

from __future__ import annotations

import argparse
from typing import Any

from reinforce_ada.errors import UsageError

_COMPARE_DESTS = ("strategies", "lrs", "seeds", "baseline", "best_lr", "lr_selection", "out", "parallel",
                  "report_only", "config")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from reinforce_ada.commands.train import add_arguments as train_arguments
    from reinforce_ada.research.compare.report import BEST_LR_RULES
    from reinforce_ada.research.compare.selection import SELECTION_RULES
    from reinforce_ada.research.compare.strategies import STRATEGIES

    group = p.add_argument_group("the comparison")
    group.add_argument("--strategies", nargs="+", required=True, metavar="STRATEGY",
                       help=f"the strategies to compare, the baseline first: any of {', '.join(STRATEGIES)}, or "
                            f"NAME=\"[STRATEGY] --train-option VALUE ...\" for one of your own")
    group.add_argument("--lrs", nargs="+", type=float, required=True, metavar="LR",
                       help="learning-rate grid; each strategy is reported at its own best")
    group.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], metavar="SEED",
                       help="seeds (the seed also orders the prompts: for a seed every strategy sees the same "
                            "prompts) (default: 0 1 2)")
    group.add_argument("--baseline", default=None, help="the strategy the others are compared with (default: the "
                                                        "first of --strategies)")
    group.add_argument("--best-lr", default="tokens", choices=BEST_LR_RULES,
                       help="how each strategy's best lr is chosen: highest mean accuracy at the baseline's token "
                            "budget (tokens), at its seconds (seconds), or highest mean final accuracy (final); "
                            "the baseline's is always by final accuracy (default: tokens)")
    group.add_argument("--lr-selection", default=None, choices=SELECTION_RULES,
                       help="which held-out prompts choose the best lrs: split (one half of each seed's, fixed by "
                            "the seed; every reported number comes from the other half) or same (all of them choose "
                            "and report: the chosen lr's luck on those prompts is in the report) (default: split for "
                            "a grid of several lrs, same for one lr, where nothing is chosen; a rerun keeps its "
                            "folder's)")
    group.add_argument("--out", default="runs/compare", metavar="DIR", help="folder for the run folders and the "
                                                                            "report (default: runs/compare)")
    group.add_argument("--parallel", type=int, default=1, metavar="K",
                       help="runs at a time, each in its own process (default: 1, in this process)")
    group.add_argument("--report-only", action="store_true",
                       help="write the report from the finished runs without training any")
    train_arguments(p.add_argument_group("train options, applied to every run (see `reinforce-ada train --help`)"))


def _train_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The train settings given on the command line and in --config (the command line wins), by dotted name."""
    from reinforce_ada.config import TrainConfig, config_settings, read_config_file

    given = {k: v for k, v in vars(args).items() if k not in _COMPARE_DESTS + ("command", "func", "verbose")}
    settings = config_settings(TrainConfig, read_config_file(args.config), args.config) if args.config else {}
    settings.update(config_settings(TrainConfig, given))
    return settings


def _option_parser():
    """``train`` options as ``{dotted name: value}`` (for ``NAME=OPTIONS`` strategies); a bad one is a UsageError."""
    from reinforce_ada.commands.train import add_arguments as train_arguments
    from reinforce_ada.config import TrainConfig, config_settings

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):
            raise UsageError(message)

    parser = Parser(add_help=False, allow_abbrev=False)
    train_arguments(parser)

    def parse(words: list[str]) -> dict[str, Any]:
        values = vars(parser.parse_args(words))
        if values.pop("config", None):
            raise UsageError("--config cannot be given inside a strategy; give its options instead")
        return config_settings(TrainConfig, values)

    return parse


def _grid_from_arguments(args: argparse.Namespace):
    from reinforce_ada.research.compare import make_grid
    from reinforce_ada.research.compare.strategies import STRATEGIES, parse_strategy

    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {args.parallel})")
    parse = _option_parser()
    strategies: dict[str, dict[str, Any]] = {}
    for spec in args.strategies:
        name, settings = parse_strategy(spec, STRATEGIES, parse)
        if name in strategies:
            raise UsageError(f"--strategies: {name} is given twice")
        strategies[name] = settings
    return make_grid(strategies, args.lrs, args.seeds, _train_settings(args), args.out, args.baseline, args.best_lr,
                     args.lr_selection)


def run(args: argparse.Namespace) -> int:
    from reinforce_ada.cpu_numerics import pin_portable_numerics, runs_portable
    from reinforce_ada.research.compare import run_comparison

    grid = _grid_from_arguments(args)
    if all(runs_portable({**grid.train, **settings}) for settings in grid.strategies.values()):
        pin_portable_numerics()  # before torch loads, as `train` does: every run's numbers the same on any x86 CPU
    return run_comparison(grid, args.parallel, args.report_only)[0]
