"""kill -9 at a random moment of a training run, then check that a resumable checkpoint always exists and that
resuming it ends exactly where an uninterrupted run ends.

    python scripts/kill_resume.py --tries 50 --seed 0 --work /tmp/kill-resume
    python scripts/kill_resume.py --target final-evaluation --tries 50 --seed 0 --work /tmp/kill-final

Two targets, each on the tiny model and ``task:arithmetic`` (a checkpoint every step, an evaluation every 2 steps on
8 held-out prompts, 200 for the final-evaluation target):

* ``--target training`` (the default): a base run of ``--base-steps`` steps; from a copy of it, an uninterrupted
  ``train --resume --max-steps BASE+EXTRA`` is the reference, and its time from the start of training (the resume event
  appended to ``config_history.jsonl``) to ``summary.json`` sets the kill window. Each try: a fresh copy of the base
  run, ``train --resume --max-steps BASE+EXTRA`` in a child process, SIGKILL after a delay drawn uniformly from
  [0, window * 1.2] (seeded) after training starts -- kills fall in training, checkpointing and the final evaluation.
* ``--target final-evaluation``: a finished run killed during its final evaluation, then **extended**. The reference
  is an uninterrupted ``train --max-steps BASE+EXTRA``; a timed ``train --max-steps BASE`` sets the window, from its
  last checkpoint (``checkpoint-BASE``, written before the final evaluation) appearing to ``summary.json``. Each try:
  ``train --max-steps BASE`` in a child process, SIGKILL after a delay drawn uniformly from [0, window * 1.2] after
  ``checkpoint-BASE`` appears -- kills fall in the final evaluation, in recording it (``final_evaluation.pt`` and the
  manifest) and in the summary and plots. With the default BASE 4 the longer run evaluates at step 4 too, so the
  extended run must do again the evaluation the kill cut short.

Each try then classifies the folder by what the kill left (the window it hit), validates it as ``--resume`` does (a
resumable checkpoint must exist), resumes it to step BASE+EXTRA in this process, and compares with the reference: the
final checkpoint's weights (SHA-256), ``total_samples``, every step's metrics (its training and evaluation lines merged,
``time/*`` left out) and the accuracy history. Prints one line per try and a summary (tries, windows hit, failures);
exits 1 if any try failed. Standard output only: every file is written under ``--work``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


EVAL_PROMPTS = {"training": 8, "final-evaluation": 200}
"""Held-out prompts per target: the final-evaluation target's are many, so its evaluation lasts long enough (about a
second) for the kills to land inside it rather than only around it."""

TARGET = "training"


def train_args(folder: Path, steps: int) -> list[str]:
    return ["train", "--task", "arithmetic", "--output-dir", str(folder), "--max-steps", str(steps),
            "--save-steps", "1", "--eval-steps", "2", "--batch-size", "4", "--eval-prompts",
            str(EVAL_PROMPTS[TARGET]), "--seed", "0"]


def child(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "reinforce_ada.cli", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_for(proc: subprocess.Popen, ready) -> bool:
    """Poll until ``ready()``; False if the child ended first."""
    while proc.poll() is None:
        if ready():
            return True
        time.sleep(0.005)
    return ready()


def training_started(folder: Path):
    """True once the child has started training (its resume event appended to ``config_history.jsonl``)."""
    history = folder / "config_history.jsonl"
    lines = len(history.read_text().splitlines()) if history.exists() else 0
    return lambda: history.exists() and len(history.read_text().splitlines()) > lines


def window_hit(folder: Path, base_steps: int, steps: int, target: str) -> str:
    """What the kill interrupted, read from what it left in the run folder."""
    from reinforce_ada.runs.intact import checkpoints
    from reinforce_ada.runs.manifest import FINAL_EVALUATION, listed_files

    if list(folder.glob(".tmp-checkpoint-*")):
        return "writing a checkpoint"
    if list(folder.glob(".old-checkpoint-*")):
        return "replacing a checkpoint"
    found = checkpoints(folder)
    last = steps if target == "training" else base_steps
    if not found or found[-1].name != f"checkpoint-{last}":
        return "first step" if found and found[-1].name == f"checkpoint-{base_steps}" else "between checkpoints"
    if (folder / "summary.json").exists() and (folder / "summary.json").stat().st_mtime > START[folder]:
        return "after the summary (plots, teardown)"
    if FINAL_EVALUATION in listed_files(found[-1]):
        return "after recording the final evaluation"
    metrics = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines() if x.strip()]
    if any(r["step"] == last and "sampling/total_samples" not in r for r in metrics[-1:]):
        return "recording the final evaluation"
    return "final evaluation"


START: dict[Path, float] = {}


def final_state(folder: Path, steps: int) -> dict[str, object]:
    """What must equal the uninterrupted run's: the final weights, the sample count, every step's metrics (training
    and evaluation lines merged, times left out) and the accuracy history."""
    from reinforce_ada.runs.files import file_sha256

    summary = json.loads((folder / "summary.json").read_text())
    merged: dict[int, dict] = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        merged.setdefault(record["step"], {}).update({k: v for k, v in record.items() if not k.startswith("time/")})
    return {"weights": file_sha256(folder / f"checkpoint-{steps}" / "model" / "model.safetensors"),
            "total_samples": summary["total_samples"], "metrics": merged,
            "accuracy_history": summary["accuracy_history"]}


def differences(got: dict[str, object], expected: dict[str, object]) -> str:
    parts = [name for name in expected if got[name] != expected[name]]
    if "metrics" in parts:
        steps = sorted(set(got["metrics"]) | set(expected["metrics"]))
        first = next(s for s in steps if got["metrics"].get(s) != expected["metrics"].get(s))
        parts[parts.index("metrics")] = f"metrics (first at step {first})"
    return ", ".join(parts)


def resume_in_process(folder: Path, steps: int) -> None:
    from reinforce_ada import cli

    with contextlib.redirect_stdout(io.StringIO()):  # the command's own report: one line per try is printed
        code = cli.main([*train_args(folder, steps), "--resume"])
    if code != 0:
        raise RuntimeError(f"train --resume exited {code}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("training", "final-evaluation"), default="training",
                        help="kill a resumed run anywhere in its training (default), or a finished run during its "
                             "final evaluation, then extend it")
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-steps", type=int, default=None, help="default: 2 (training), 4 (final-evaluation)")
    parser.add_argument("--extra-steps", type=int, default=None, help="default: 3 (training), 2 (final-evaluation)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kill-resume"))
    args = parser.parse_args()
    global TARGET
    TARGET = args.target
    final = args.target == "final-evaluation"
    base_steps = args.base_steps or (4 if final else 2)
    steps = base_steps + (args.extra_steps or (2 if final else 3))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import logging

    import torch

    torch.set_num_threads(1)
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.runs.folder import check_run_folder
    from reinforce_ada.runs.intact import recover_checkpoints

    logging.disable(logging.WARNING)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    base, reference = args.work / "base", args.work / "reference"
    if final:  # the reference: the longer run, uninterrupted; the window: a finished run's final evaluation
        if child(train_args(reference, steps)).wait() != 0:
            raise SystemExit("the uninterrupted run failed")
        proc = child(train_args(base, base_steps))
        wait_for(proc, (base / f"checkpoint-{base_steps}").is_dir)
        started = time.time()
        wait_for(proc, (base / "summary.json").exists)
        window = time.time() - started
        if proc.wait() != 0:
            raise SystemExit("the timed run failed")
        what = f"train --max-steps {base_steps}: {window:.2f} s from checkpoint-{base_steps} to summary.json"
        when = f"after checkpoint-{base_steps} appears"
    else:
        if child(train_args(base, base_steps)).wait() != 0:
            raise SystemExit("the base run failed")
        shutil.copytree(base, reference)
        proc = child([*train_args(reference, steps), "--resume"])
        wait_for(proc, training_started(reference))
        started = time.time()
        if proc.wait() != 0:
            raise SystemExit("the uninterrupted resume failed")
        window = (reference / "summary.json").stat().st_mtime - started  # to the run's last write, not the exit
        what = f"uninterrupted train --resume: {window:.2f} s from the start of training to summary.json"
        when = "after training starts"
    expected = final_state(reference, steps)
    print(f"{what}; kill delays drawn from [0, {1.2 * window:.2f}] s {when}", flush=True)

    rng = random.Random(args.seed)
    hits: collections.Counter[str] = collections.Counter()
    failures = []
    for i in range(args.tries):
        folder = args.work / f"try-{i}"
        START[folder] = time.time()
        delay = rng.uniform(0, 1.2 * window)
        if final:
            proc = child(train_args(folder, base_steps))
            wait_for(proc, (folder / f"checkpoint-{base_steps}").is_dir)
        else:
            shutil.copytree(base, folder)
            proc = child([*train_args(folder, steps), "--resume"])
            wait_for(proc, training_started(folder))
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        hit = window_hit(folder, base_steps, steps, args.target)
        hits[hit] += 1
        try:
            recover_checkpoints(folder)
            config = TrainConfig(**{**json.loads((folder / "config.json").read_text()), "resume": True,
                                    "max_steps": steps})
            latest, _ = check_run_folder(config)  # the validation --resume does: a checkpoint must exist
            if latest is None:
                raise RuntimeError("no resumable checkpoint")
            resume_in_process(folder, steps)
            got = final_state(folder, steps)
            if got != expected:
                raise RuntimeError(f"the resumed run differs from the uninterrupted one in "
                                   f"{differences(got, expected)}")
            outcome = f"ok (resumed from {latest.name})"
        except Exception as err:  # noqa: BLE001 -- every failure is counted and reported
            failures.append((i, hit, f"{type(err).__name__}: {err}"))
            outcome = f"FAILED: {type(err).__name__}: {err}"
        print(f"try {i:2d}: kill after {delay:5.2f} s ({hit}): {outcome}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"tries {args.tries}, failures {len(failures)}; windows hit: "
          + ", ".join(f"{name} {count}" for name, count in sorted(hits.items())))
    for failure in failures:
        print("failure:", *failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
