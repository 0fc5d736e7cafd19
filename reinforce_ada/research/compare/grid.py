"""The library of ``reinforce-ada compare`` (the command: :mod:`reinforce_ada.commands.compare`; docs/compare.md):
a :class:`Grid` of strategies x learning rates x seeds, each run a normal ``train`` run folder in ``out``, trained
by :func:`run_comparison` (the unfinished ones, ``parallel`` at a time) and reported against the baseline at equal
steps, at the baseline's generated tokens and at its step seconds (:mod:`.report`).

The grid, the baseline, the best-lr rule and which held-out prompts choose the lrs (``lr_selection``) are fixed
in ``out/compare.json`` by the first run and cannot change
afterwards; a rerun skips the finished runs. Everything a run is given is checked, and the model loaded once, before
any run starts. ``out`` receives report.md, report.json, report.png and runs.jsonl.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinforce_ada.errors import UsageError, UserError
from reinforce_ada.research.compare.figure import plot_report
from reinforce_ada.research.compare.markdown import format_report
from reinforce_ada.research.compare.report import BEST_LR_RULES, analyse, jsonable
from reinforce_ada.research.compare.runs import (LEDGER, Job, concurrency, read_ledger, read_run, run_folder_state,
                                                 run_jobs)
from reinforce_ada.research.compare.selection import SELECTION_RULES

__all__ = ["MANIFEST", "OWN_OPTIONS", "Grid", "make_grid", "run_comparison"]

MANIFEST = "compare.json"
OWN_OPTIONS = {"strategy": "--strategies", "learning_rate": "--lrs", "seed": "--seeds", "output_dir": "--out",
               "resume": "(a rerun continues by itself)", "overwrite": "(a rerun continues by itself)",
               "force_resume_changes": "(the grid is fixed)", "accept_unverified_checkpoint": "(the grid is fixed)"}
"""Train settings the comparison sets per run, and the option that gives them instead."""


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
    selection: str = "same"
    """Which held-out prompts choose the best lrs (:mod:`.selection`): ``split`` or ``same``."""

    def manifest(self) -> dict[str, Any]:
        """What compare.json records: everything that decides the runs and the report."""
        return {"format": 1, "baseline": self.baseline, "best_lr": self.best_lr, "lr_selection": self.selection,
                "strategies": self.strategies, "lrs": list(self.lrs), "seeds": list(self.seeds), "train": self.train}

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
              out: Path | str, baseline: str | None = None, best_lr: str = "tokens",
              selection: str | None = None) -> Grid:
    """A checked :class:`Grid` (an error is a one-line :class:`~reinforce_ada.errors.UsageError` naming the option):
    distinct positive lrs, distinct seeds, no strategy setting what compare sets per run or contradicting ``train``.
    ``selection`` None: the folder's own when ``out`` holds a comparison (``same`` for one from before the option),
    else ``split`` for several lrs and ``same`` for one."""
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
    if selection is None:
        saved = Path(out) / MANIFEST
        selection = json.loads(saved.read_text()).get("lr_selection", "same") if saved.is_file() else \
            ("split" if len(lrs) > 1 else "same")
    if selection not in SELECTION_RULES:
        raise UsageError(f"--lr-selection must be one of {', '.join(SELECTION_RULES)} (got {selection!r})")
    return Grid(dict(strategies), list(lrs), list(seeds), dict(train), baseline, best_lr, Path(out), selection)


def _check_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """A comparison folder holds one grid: a rerun with other settings is refused, naming the first difference."""
    path = out / MANIFEST
    if not path.exists():
        if out.is_dir() and any(out.iterdir()):
            raise UsageError(f"--out {out} holds files but no {MANIFEST}: it is not a comparison folder; give an "
                             f"empty or new folder")
        return
    saved = json.loads(path.read_text())
    saved.setdefault("lr_selection", "same")  # one from before --lr-selection chose on the prompts it reported
    for key in ("baseline", "best_lr", "lr_selection", "strategies", "lrs", "seeds", "train"):
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
    task = check_train_inputs(config)  # the built-in task, built (None for prompt files)
    train, held_out, _ = load_data(config, task)
    if not held_out:
        raise UsageError("compare reads held-out accuracy, and these runs have no held-out prompts: give --eval-data "
                         "(or a --task, whose test split is the default)")
    try:
        model, _, _ = load_model(config, train, task, held_out)
    except (UserError, ImportError):
        raise
    except Exception as err:  # noqa: BLE001 -- whatever the loader raises, the grid does not start
        raise UsageError(f"--model {config.model} cannot be loaded: {type(err).__name__}: {err}") from None
    del model


def run_comparison(grid: Grid, parallel: int = 1, report_only: bool = False) -> tuple[int, dict[str, Any]]:
    """Train the grid's runs that are not finished (``parallel`` at a time), then write and print the report:
    ``(exit status, report)``; the status is 3 when a run stopped or failed (the report leaves it out)."""
    from reinforce_ada.outputs import refuse_unsafe_outputs

    jobs, out, manifest = grid.jobs(), grid.out, grid.manifest()
    inputs = [(f"--{key.replace('_', '-')}", grid.train.get(key)) for key in ("model", "data", "eval_data", "config")]
    refuse_unsafe_outputs({"--out": out / "report.json"}, inputs)  # not into the model folder or onto a run's files
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
        baseline_failed = {job.name: failed[job.name] for job in jobs
                           if job.strategy == manifest["baseline"] and job.name in failed}
        if not baseline_failed:
            raise UsageError(f"no finished run of the baseline {manifest['baseline']} in {out}: nothing to report yet")
        # runs that stopped or failed: exit 3 (docs/compare.md), as when the baseline finished and another did not
        name, error = next(iter(baseline_failed.items()))
        print(f"error: no run of the baseline {manifest['baseline']} finished ({len(baseline_failed)} failed, "
              f"recorded in {out / LEDGER}), so there is nothing to report; {name}: {error}", file=sys.stderr)
        return 3, {}
    try:
        report = analyse(runs, manifest_strategies(jobs), manifest["lrs"], manifest["baseline"], manifest["best_lr"],
                         manifest["lr_selection"])
    except ValueError as err:
        raise UsageError(f"--lr-selection {manifest['lr_selection']}: {err}; report them with --lr-selection same "
                         f"in a folder of their own") from None
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
