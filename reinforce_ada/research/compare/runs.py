"""Running the runs of a comparison and reading them back: each run is a normal ``train`` run folder, trained in this
process (``parallel=1``) or in one of ``parallel`` worker processes, and read back from its ``metrics.jsonl``.

The runs are queued seed by seed, and within a seed lr by lr, cycling through the strategies, so that at any time
the runs in flight are an even mix of the strategies: every strategy's seconds are measured under the same
concurrency (the report names how many runs were in flight on average while each strategy's ran). Every finished
(or failed) run adds a line to ``runs.jsonl`` in the comparison's folder: its start and end time, the machine's load
average then, and how it ended.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["Job", "concurrency", "read_ledger", "read_run", "run_folder_state", "run_jobs"]

LEDGER = "runs.jsonl"


@dataclass
class Job:
    """One run of the grid: its name (the run folder's), its place and the ``train`` settings (dotted names)."""

    name: str
    strategy: str
    lr: float
    seed: int
    settings: dict[str, Any] = field(default_factory=dict)


def run_folder_state(folder: Path) -> str:
    """``"finished"`` (it has ``summary.json``), ``"checkpointed"`` (a checkpoint to resume from, no summary),
    ``"started"`` (anything else in it) or ``"new"``."""
    if (folder / "summary.json").exists():
        return "finished"
    if any(folder.glob("checkpoint-*")):
        return "checkpointed"
    return "started" if folder.exists() and any(folder.iterdir()) else "new"


def train_one(settings: dict[str, Any]) -> dict[str, Any]:
    """Train one run from its settings; ``{"ok": True}`` or ``{"ok": False, "stopped": bool, "error": str}``, with
    the wall-clock start and end and the load average at both (a worker's exceptions come back as text)."""
    from reinforce_ada.config import TrainConfig, load_config
    from reinforce_ada.training import Trainer
    from reinforce_ada.training.guards import RunStopped

    record: dict[str, Any] = {"started": time.time(), "load_start": _load()}
    try:
        trainer = Trainer(load_config(TrainConfig, None, settings))
        try:
            trainer.train()
        finally:
            trainer.close()
        record["ok"] = True
    except Exception as err:  # noqa: BLE001 -- one run's failure is recorded; the others go on
        record.update(ok=False, stopped=isinstance(err, RunStopped), error=f"{type(err).__name__}: "
                                                                           f"{' '.join(str(err).split())}")
    record.update(ended=time.time(), load_end=_load())
    return record


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not on this platform
        return None


def run_jobs(jobs: list[Job], parallel: int, ledger: Path,
             on_done: Callable[[Job, dict[str, Any], int, int], None]) -> list[dict[str, Any]]:
    """Train ``jobs`` in order, at most ``parallel`` at a time; after each, append its record to ``ledger`` and call
    ``on_done(job, record, running, queued)``. Returns the records, in the order the runs ended."""
    records = []

    def done(job: Job, record: dict[str, Any], running: int, queued: int) -> None:
        record = {"run": job.name, "strategy": job.strategy, "lr": job.lr, "seed": job.seed, "parallel": parallel,
                  **record}
        with ledger.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        records.append(record)
        on_done(job, record, running, queued)

    if parallel == 1:
        for i, job in enumerate(jobs):
            done(job, train_one(job.settings), 0, len(jobs) - i - 1)
        return records
    import multiprocessing

    queue = list(jobs)
    pool = ProcessPoolExecutor(max_workers=parallel, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_leave_interrupts_to_the_parent)
    running = {}
    try:
        while queue or running:
            while queue and len(running) < parallel:  # submit only what can start now: the order is kept
                job = queue.pop(0)
                running[pool.submit(train_one, job.settings)] = job
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                done(job, future.result(), len(running), len(queue))
    except BaseException:  # Ctrl-C or a time limit: the runs in flight stop too (a rerun starts them over)
        import signal

        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        try:
            processes = list((getattr(pool, "_processes", None) or {}).values())
            for process in processes:
                process.terminate()
            for process in processes:
                process.join(timeout=30)
            pool.shutdown(wait=True, cancel_futures=True)
        finally:
            signal.signal(signal.SIGINT, previous)
        raise
    pool.shutdown()
    return records


def _leave_interrupts_to_the_parent() -> None:
    """In a worker: ignore SIGINT. Ctrl-C (or ``timeout --signal=INT``) reaches the whole process group; the parent
    stops the runs in flight itself, so an idle worker must not print a KeyboardInterrupt traceback of its own."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


EXTRA_EVALUATION = re.compile(r"eval/(accuracy/.+|num_prompts/.+|pass@\d+|entropy)$")
"""The evaluation metrics a run's history carries beside its accuracy (strata, pass@k, entropy), when it has them."""


def read_run(folder: Path) -> dict[str, Any]:
    """A finished run's history ``[[step, tokens, seconds, accuracy], ...]`` (step 0 included; tokens and step seconds
    cumulative), its mean seconds per step by part (``step``, ``generation``, ``scoring``, ``update``, ``sync``; None
    for a part its metrics do not have) and its mean zero-variance fraction of the kept groups; then what the paper's
    analyses read (:mod:`reinforce_ada.analyses`): ``evals`` (each further evaluation metric -- accuracy and prompts
    per stratum, pass@k, entropy -- aligned with ``history``, None where an evaluation lacks it), ``strata`` (the
    run's ``strata.json`` in brief: counts and a digest of the assignment, None without one), ``dynamics``
    (``samples_per_step``, ``active_by_round``, ``budget_by_pass_rate``) and ``per_prompt`` (each evaluation's
    per-prompt results from ``held_out.jsonl``, which :mod:`.selection` splits; None for a run without them)."""
    from reinforce_ada import analyses

    tokens, seconds = {0: 0}, {0: 0.0}
    total_seconds, parts, zero_variance, evaluations, records = 0.0, {}, [], [], []
    with (folder / "metrics.jsonl").open() as fh:
        for line in fh:
            record = json.loads(line)
            records.append(record)
            step = int(record["step"])
            if "time/step_seconds" in record:
                total_seconds += float(record["time/step_seconds"])
                seconds[step] = total_seconds
                for part in ("step", "generation", "scoring", "update", "sync"):
                    if f"time/{part}_seconds" in record:
                        parts.setdefault(part, []).append(float(record[f"time/{part}_seconds"]))
            if "total_tokens" in record:
                tokens[step] = int(record["total_tokens"])
            if record.get("sampling/zero_variance_fraction") is not None:
                zero_variance.append(float(record["sampling/zero_variance_fraction"]))
            if "eval/accuracy" in record:
                evaluations.append(record)
    history = [[int(r["step"]), tokens[int(r["step"])], seconds[int(r["step"])], float(r["eval/accuracy"])]
               for r in evaluations]
    names = list(dict.fromkeys(k for r in evaluations for k in r if EXTRA_EVALUATION.match(k)))
    timing = {part: (sum(v) / len(v) if (v := parts.get(part)) else None)
              for part in ("step", "generation", "scoring", "update", "sync")}
    return {"history": history, "timing": timing,
            "zero_variance": sum(zero_variance) / len(zero_variance) if zero_variance else None,
            "evals": {name: [r.get(name) for r in evaluations] for name in names},
            "strata": _strata_brief(folder),
            "per_prompt": _per_prompt(folder, [row[0] for row in history]),
            "dynamics": {"samples_per_step": analyses.samples_per_step(records)[1],
                         "active_by_round": analyses.active_by_round(records),
                         "budget_by_pass_rate": analyses.budget_by_pass_rate(records)}}


def _strata_brief(folder: Path) -> dict[str, Any] | None:
    """The run's difficulty strata: their counts, k and a digest of which prompt is in which (runs of one seed share
    their strata when their start model and held-out prompts are the same)."""
    path = folder / "strata.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    assignment = sorted((row["key"], row["stratum"]) for row in data["prompts"])
    return {"counts": data["counts"], "num_samples": data["num_samples"], "bounds": data["bounds"],
            "digest": hashlib.sha256(json.dumps(assignment).encode()).hexdigest()[:16]}


def _per_prompt(folder: Path, steps: list[int]) -> dict[str, Any] | None:
    """``{"keys", "strata", "counts"}``: the held-out prompts' content hashes, each one's stratum (None without
    ``strata.json``) and, per history row (``steps``), each prompt's ``[samples, correct]`` -- from the last line
    of each step in ``held_out.jsonl`` (a resumed run writes its steps again); None when the file is missing, or
    when an evaluation lacks its line or evaluated other prompts."""
    from reinforce_ada.training.held_out import HELD_OUT_FILE

    path = folder / HELD_OUT_FILE
    if not path.is_file():
        return None
    by_step = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            by_step[int(record["step"])] = record
    if any(step not in by_step for step in steps) or not steps:
        return None
    keys = by_step[steps[0]]["keys"]
    if any(by_step[step]["keys"] != keys for step in steps):
        return None
    strata = None
    if (folder / "strata.json").is_file():
        by_key = {row["key"]: row["stratum"] for row in json.loads((folder / "strata.json").read_text())["prompts"]}
        strata = [by_key.get(key) for key in keys]
    return {"keys": keys, "strata": strata,
            "counts": [[list(pair) for pair in zip(by_step[step]["samples"], by_step[step]["correct"])]
                       for step in steps]}


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    """Every record of ``runs.jsonl`` (all invocations), oldest first."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def concurrency(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per run (the newest record of each finished run): the time-averaged number of this comparison's runs in flight
    while it ran, itself included (1.0: it ran alone)."""
    latest = {r["run"]: r for r in records if r.get("ok")}
    spans = [(r["started"], r["ended"]) for r in records if "started" in r]
    out = {}
    for name, r in latest.items():
        start, end = r["started"], r["ended"]
        if end <= start:
            continue
        overlap = sum(max(0.0, min(end, e) - max(start, s)) for s, e in spans)
        out[name] = overlap / (end - start)
    return out
