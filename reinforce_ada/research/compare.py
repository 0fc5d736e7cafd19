"""``reinforce-ada compare``: strategies side by side on your model, data and reward, at equal steps, at the baseline's
generated tokens and at its wall-clock.

Trains every strategy x learning rate x seed of the grid as a normal ``train`` run folder under --out (any other
``train`` option applies to every run: --model, --data, --eval-data, --verifier, --task, --max-steps, --eval-steps,
...), up to --parallel at a time, and reports each strategy at its own best learning rate against the baseline
(the first strategy): paired by seed, with 95% intervals, at the baseline's last step, at its mean generated tokens
and at its mean step seconds (generation + scoring + update + weight sync), and the steps each needs to reach the
baseline's final accuracy. A rerun of the same command skips the finished runs and continues the others; the grid,
the baseline and the best-lr rule are fixed in --out's compare.json by the first run and cannot change afterwards.

Writes into --out: report.md (the tables), report.json (everything in them, per run histories included; schema in
docs/compare.md), report.png (accuracy against steps, tokens and seconds), runs.jsonl (when each run ran and how it
ended). Everything a run is given is checked, and the model loaded once, before any run starts.

Example: reinforce-ada compare --strategies grpo ada-balanced stream-mixed --lrs 5e-4 1e-3 --seeds 0 1 2 \\
    --max-steps 40 --eval-steps 4 --out runs/compare
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinforce_ada.errors import UsageError, UserError
from reinforce_ada.research.compare_report import BEST_LR_RULES, analyse, format_report, jsonable, plot_report
from reinforce_ada.research.compare_runs import (LEDGER, Job, concurrency, quiet, read_ledger, read_run,
                                                 run_folder_state, run_jobs)
from reinforce_ada.research.compare_strategies import STRATEGIES, parse_strategy

__all__ = ["Grid", "add_arguments", "make_grid", "run", "run_comparison"]

MANIFEST = "compare.json"
OWN_OPTIONS = {"strategy": "--strategies", "learning_rate": "--lrs", "seed": "--seeds", "output_dir": "--out",
               "resume": "(a rerun continues by itself)", "overwrite": "(a rerun continues by itself)",
               "force_resume_changes": "(the grid is fixed)"}
"""Train settings the comparison sets per run, and the option that gives them instead."""
_COMPARE_DESTS = ("strategies", "lrs", "seeds", "baseline", "best_lr", "out", "parallel", "report_only", "config")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from reinforce_ada.cli import train_arguments

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
    from reinforce_ada.cli import train_arguments
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


@dataclass
class Grid:
    """One comparison: ``strategies`` (name -> train settings by dotted name, the baseline among them) x ``lrs`` x
    ``seeds``, every run also given ``train``; its run folders and report in ``out``. :func:`make_grid` checks it."""

    strategies: dict[str, dict[str, Any]]
    lrs: list[float]
    seeds: list[int]
    train: dict[str, Any]
    baseline: str
    best_lr: str
    out: Path

    def manifest(self) -> dict[str, Any]:
        """What compare.json records: everything that decides the runs and the report."""
        return {"format": 1, "baseline": self.baseline, "best_lr": self.best_lr, "strategies": self.strategies,
                "lrs": list(self.lrs), "seeds": list(self.seeds), "train": self.train}

    def check_out(self) -> None:
        """``out`` is new, empty, or this grid's comparison folder (a rerun); anything else is refused, naming the
        first difference."""
        _check_manifest(self.out, self.manifest())

    def jobs(self) -> list[Job]:
        """The runs, seed by seed, lr by lr, cycling through the strategies (an even mix in flight); every run's
        config is built and checked here, before any run."""
        from reinforce_ada.config import TrainConfig, load_config

        jobs = []
        for seed in self.seeds:
            for lr in self.lrs:
                for name, settings in self.strategies.items():
                    run_name = f"{name}-lr{lr:g}-seed{seed}"
                    values = {**self.train, **settings, "learning_rate": lr, "seed": seed,
                              "output_dir": str(self.out / run_name)}
                    try:
                        load_config(TrainConfig, None, values)
                    except UserError as err:
                        raise type(err)(f"strategy {name} (lr {lr:g}, seed {seed}): {err}") from None
                    jobs.append(Job(run_name, name, lr, seed, values))
        return jobs


def make_grid(strategies: dict[str, dict[str, Any]], lrs: list[float], seeds: list[int], train: dict[str, Any],
              out: Path | str, baseline: str | None = None, best_lr: str = "tokens") -> Grid:
    """A checked :class:`Grid` (an error is a one-line :class:`~reinforce_ada.errors.UsageError` naming the option):
    distinct positive lrs, distinct seeds, no strategy setting what compare sets per run or contradicting ``train``."""
    if not lrs or len(set(lrs)) != len(lrs) or any(not (math.isfinite(lr) and lr > 0) for lr in lrs):
        raise UsageError(f"--lrs must be distinct positive numbers (got {' '.join(map(str, lrs))})")
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise UsageError(f"--seeds must be distinct non-negative integers (got {' '.join(map(str, seeds))})")
    if best_lr not in BEST_LR_RULES:
        raise UsageError(f"--best-lr must be one of {', '.join(BEST_LR_RULES)} (got {best_lr!r})")
    for name, instead in OWN_OPTIONS.items():
        if name in train:
            raise UsageError(f"--{name.replace('_', '-')}: compare sets it for every run; give {instead}")
    for name, settings in strategies.items():
        for own, instead in OWN_OPTIONS.items():
            if own != "strategy" and own in settings:
                raise UsageError(f"--strategies {name}: compare sets {own} for every run; give {instead}")
        clash = {k: (v, train[k]) for k, v in settings.items() if k in train and train[k] != v}
        if clash:
            key, (theirs, yours) = next(iter(clash.items()))
            raise UsageError(f"strategy {name} sets {key}={theirs!r}, but the train options give {key}={yours!r}; "
                             f"drop the option or define your own strategy with NAME=\"...\"")
    baseline = baseline or next(iter(strategies))
    if baseline not in strategies:
        raise UsageError(f"--baseline {baseline} is not one of --strategies ({', '.join(strategies)})")
    return Grid(dict(strategies), list(lrs), list(seeds), dict(train), baseline, best_lr, Path(out))


def _grid_from_arguments(args: argparse.Namespace) -> Grid:
    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {args.parallel})")
    parse = _option_parser()
    strategies: dict[str, dict[str, Any]] = {}
    for spec in args.strategies:
        name, settings = parse_strategy(spec, STRATEGIES, parse)
        if name in strategies:
            raise UsageError(f"--strategies: {name} is given twice")
        strategies[name] = settings
    return make_grid(strategies, args.lrs, args.seeds, _train_settings(args), args.out, args.baseline, args.best_lr)


def _check_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """A comparison folder holds one grid: a rerun with other settings is refused, naming the first difference."""
    path = out / MANIFEST
    if not path.exists():
        if out.is_dir() and any(out.iterdir()):
            raise UsageError(f"--out {out} holds files but no {MANIFEST}: it is not a comparison folder; give an "
                             f"empty or new folder")
        return
    saved = json.loads(path.read_text())
    for key in ("baseline", "best_lr", "strategies", "lrs", "seeds", "train"):
        if saved.get(key) != json.loads(json.dumps(manifest[key])):
            raise UsageError(f"--out {out} holds a comparison with other settings ({key}: {saved.get(key)} there, "
                             f"{manifest[key]} now); rerun it with its own options ({path}) or give another --out")


def _check_can_run(first: Job) -> None:
    """What the runs name exists and the model loads, once, before any run (a missing package, file or model is a
    one-line error here rather than a failed run per grid point)."""
    from reinforce_ada.config import TrainConfig, load_config
    from reinforce_ada.training.preflight import check_train_inputs
    from reinforce_ada.training.setup import load_data, load_model

    config = load_config(TrainConfig, None, first.settings)
    check_train_inputs(config)
    train, held_out, _, task = load_data(config)
    if not held_out:
        raise UsageError("compare reads held-out accuracy, and these runs have no held-out prompts: give --eval-data "
                         "(or a --task, whose test split is the default)")
    try:
        model, _, _ = load_model(config, train, task)
    except (UserError, ImportError):
        raise
    except Exception as err:  # noqa: BLE001 -- whatever the loader raises, the grid does not start
        raise UsageError(f"--model {config.model} cannot be loaded: {type(err).__name__}: {err}") from None
    del model


def run(args: argparse.Namespace) -> int:
    with quiet():
        grid = _grid_from_arguments(args)
        return run_comparison(grid, args.parallel, args.report_only)[0]


def run_comparison(grid: Grid, parallel: int = 1, report_only: bool = False) -> tuple[int, dict[str, Any]]:
    """Train the grid's runs that are not finished (``parallel`` at a time), then write and print the report:
    ``(exit status, report)``; the status is 3 when a run stopped or failed (the report leaves it out)."""
    jobs, out, manifest = grid.jobs(), grid.out, grid.manifest()
    grid.check_out()
    states = {job.name: run_folder_state(out / job.name) for job in jobs}
    todo = [job for job in jobs if states[job.name] != "finished"]
    if report_only:
        if not (out / MANIFEST).exists():
            raise UsageError(f"--report-only: {out} holds no comparison ({MANIFEST})")
    elif todo:
        _check_can_run(todo[0])
        out.mkdir(parents=True, exist_ok=True)
        if not (out / MANIFEST).exists():
            (out / MANIFEST).write_text(json.dumps({**manifest, "command": sys.argv}, indent=2) + "\n")
        for job in todo:  # a run that was interrupted continues from its checkpoint, or starts over
            job.settings.update({"resume": True} if states[job.name] == "checkpointed" else
                                {"overwrite": True} if states[job.name] == "started" else {})
        _run(out, jobs, todo, parallel)
    return _report(out, manifest, jobs)


def _run(out: Path, jobs: list[Job], todo: list[Job], parallel: int) -> None:
    done = len(jobs) - len(todo)
    print(f"compare: {len(manifest_strategies(jobs))} strategies x {len({j.lr for j in jobs})} lrs x "
          f"{len({j.seed for j in jobs})} seeds = {len(jobs)} runs in {out} ({done} finished earlier), {parallel} at "
          f"a time", file=sys.stderr, flush=True)
    started, count = time.perf_counter(), [done]

    def progress(job: Job, record: dict[str, Any], running: int, queued: int) -> None:
        count[0] += 1
        head = f"[{count[0]:>{len(str(len(jobs)))}}/{len(jobs)} {time.perf_counter() - started:6.0f} s] " \
               f"{job.strategy} lr {job.lr:g} seed {job.seed}"
        if not record["ok"]:
            print(f"{head}: {'STOPPED' if record['stopped'] else 'FAILED'}: {record['error']}", file=sys.stderr,
                  flush=True)
            return
        result = read_run(out / job.name)
        h, t = result["history"], result["timing"]
        split = ", ".join(f"{p} {t[p] * h[-1][0]:.1f}" for p in ("generation", "scoring", "update", "sync")
                          if t.get(p) is not None)
        print(f"{head}: held-out {h[0][3]:.3f} -> {h[-1][3]:.3f} in {h[-1][0]} steps, {h[-1][1]:,} tokens, "
              f"{h[-1][2]:.1f} s of steps ({split}); {running} running, {queued} queued", file=sys.stderr, flush=True)

    run_jobs(todo, parallel, out / LEDGER, progress)


def manifest_strategies(jobs: list[Job]) -> list[str]:
    return list(dict.fromkeys(job.strategy for job in jobs))


def _report(out: Path, manifest: dict[str, Any], jobs: list[Job]) -> tuple[int, dict[str, Any]]:
    ledger = read_ledger(out / LEDGER)
    runs, missing = {}, []
    for job in jobs:
        if run_folder_state(out / job.name) == "finished":
            runs[(job.strategy, job.lr, job.seed)] = read_run(out / job.name)
        else:
            missing.append(job.name)
    failed = {r["run"]: r["error"] for r in ledger if not r.get("ok")}
    failed = {name: error for name, error in failed.items() if name in missing}
    if not any(s == manifest["baseline"] for s, _, _ in runs):
        raise UsageError(f"no finished run of the baseline {manifest['baseline']} in {out}: nothing to report yet")
    report = analyse(runs, manifest_strategies(jobs), manifest["lrs"], manifest["baseline"], manifest["best_lr"])
    in_flight = concurrency(ledger)
    report["timing"] = {
        "seconds": "time/step_seconds summed over a run's steps: generation + scoring + update + weight sync; "
                   "held-out evaluations and checkpoints excluded",
        "order": "runs queued seed by seed, lr by lr, cycling through the strategies, so the runs in flight are an "
                 "even mix of them",
        "parallel": sorted({r["parallel"] for r in ledger if "parallel" in r}),
        "runs_in_flight": {s: _mean_of([in_flight[j.name] for j in jobs if j.strategy == s and j.name in in_flight])
                           for s in manifest_strategies(jobs)},
        "load_average": _mean_of([r[k] for r in ledger if r.get("ok") for k in ("load_start", "load_end")
                                  if r.get(k) is not None])}
    report["missing"], report["failed"] = missing, failed
    report["grid"] = {key: manifest[key] for key in ("strategies", "train")}  # what each run was given
    notes = [f"\nSeconds: {report['timing']['seconds']}; {report['timing']['order']}; "
             f"{'/'.join(map(str, report['timing']['parallel'])) or '?'} at a time, on average "
             + ", ".join(f"{s} {v:.2f}" for s, v in report["timing"]["runs_in_flight"].items() if v is not None)
             + " of this comparison's runs in flight while each strategy's ran; machine load average "
             + (f"{report['timing']['load_average']:.1f}" if report["timing"]["load_average"] is not None else "?")
             + " at the runs' starts and ends."]
    if missing:
        notes.append(f"Not finished ({len(missing)}, left out of the report): {', '.join(missing)}"
                     + "".join(f"\n  {name}: {error}" for name, error in failed.items()))
    text = format_report(report, notes)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(json.dumps(jsonable(report), allow_nan=False) + "\n")
    plot_report(report, out / "report.png")
    print(text)
    print(f"wrote {out / 'report.md'}, {out / 'report.json'} and {out / 'report.png'}")
    return (3 if failed else 0), report


def _mean_of(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
