"""kill -9 at a random moment of ``train --resume``, then check that a resumable checkpoint always exists and that
resuming it ends exactly where an uninterrupted run ends.

    python scripts/kill_resume.py --tries 50 --seed 0 --work /tmp/kill-resume

1. A base run of the tiny model on ``task:arithmetic`` (``--base-steps`` steps, a checkpoint every step) and, from a
   copy of it, an uninterrupted ``train --resume --max-steps BASE+EXTRA`` whose wall time sets the kill window and
   whose final weights are the reference. The window is timed from the moment training starts (the resume event
   appended to ``config_history.jsonl``) to ``summary.json`` being written, so the kills fall in training, checkpointing and the
   final evaluation rather than in the interpreter's start-up.
2. Each try: a fresh copy of the base run, ``train --resume --max-steps BASE+EXTRA`` in a child process, SIGKILL after
   a delay drawn uniformly from [0, window * 1.2] (seeded) after training starts; the folder is classified by what the kill left (the
   window it hit); then the run folder is validated as ``--resume`` validates it (a resumable checkpoint must exist)
   and resumed to the end in this process; its final weights and ``total_samples`` must equal the reference's.

Prints one line per try and a summary (tries, windows hit, failures); exits 1 if any try failed. Standard output
only: every file is written under ``--work``.
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


def train_args(folder: Path, steps: int) -> list[str]:
    return ["train", "--task", "arithmetic", "--output-dir", str(folder), "--max-steps", str(steps),
            "--save-steps", "1", "--eval-steps", "2", "--batch-size", "4", "--eval-prompts", "8", "--seed", "0"]


def child(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "reinforce_ada.cli", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_for_training(proc: subprocess.Popen, folder: Path) -> bool:
    """Wait until the child has started training (its resume event is in ``config_history.jsonl``); False if it
    ended first."""
    history = folder / "config_history.jsonl"
    lines = len(history.read_text().splitlines())
    while proc.poll() is None:
        if len(history.read_text().splitlines()) > lines:
            return True
        time.sleep(0.005)
    return False


def window_hit(folder: Path, base_steps: int, steps: int) -> str:
    """What the kill interrupted, read from what it left in the run folder."""
    from reinforce_ada.runs.intact import checkpoints

    if list(folder.glob(".tmp-checkpoint-*")):
        return "writing a checkpoint"
    if list(folder.glob(".old-checkpoint-*")):
        return "replacing a checkpoint"
    latest = checkpoints(folder)[-1].name
    if latest == f"checkpoint-{steps}":
        return "after the run" if (folder / "summary.json").stat().st_mtime > START[folder] else "final evaluation"
    if latest == f"checkpoint-{base_steps}":
        return "first step"
    return "between checkpoints"


START: dict[Path, float] = {}


def final_state(folder: Path, steps: int) -> tuple[str, int]:
    from reinforce_ada.runs.files import file_sha256

    summary = json.loads((folder / "summary.json").read_text())
    return file_sha256(folder / f"checkpoint-{steps}" / "model" / "model.safetensors"), summary["total_samples"]


def resume_in_process(folder: Path, steps: int) -> None:
    from reinforce_ada import cli

    with contextlib.redirect_stdout(io.StringIO()):  # the command's own report: one line per try is printed
        code = cli.main([*train_args(folder, steps), "--resume"])
    if code != 0:
        raise RuntimeError(f"train --resume exited {code}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-steps", type=int, default=2)
    parser.add_argument("--extra-steps", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kill-resume"))
    args = parser.parse_args()
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
    base, steps = args.work / "base", args.base_steps + args.extra_steps
    if child(train_args(base, args.base_steps)).wait() != 0:
        raise SystemExit("the base run failed")
    reference = args.work / "reference"
    shutil.copytree(base, reference)
    proc = child([*train_args(reference, steps), "--resume"])
    wait_for_training(proc, reference)
    started = time.time()
    if proc.wait() != 0:
        raise SystemExit("the uninterrupted resume failed")
    window = (reference / "summary.json").stat().st_mtime - started  # to the run's last write, not the exit
    expected = final_state(reference, steps)
    print(f"uninterrupted train --resume: {window:.2f} s from the start of training to summary.json; kill delays drawn "
          f"from [0, {1.2 * window:.2f}] s after training starts", flush=True)

    rng = random.Random(args.seed)
    hits: collections.Counter[str] = collections.Counter()
    failures = []
    for i in range(args.tries):
        folder = args.work / f"try-{i}"
        shutil.copytree(base, folder)
        START[folder] = time.time()
        delay = rng.uniform(0, 1.2 * window)
        proc = child([*train_args(folder, steps), "--resume"])
        wait_for_training(proc, folder)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        hit = window_hit(folder, args.base_steps, steps)
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
                raise RuntimeError(f"resumed run ended at {got}, the uninterrupted one at {expected}")
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
