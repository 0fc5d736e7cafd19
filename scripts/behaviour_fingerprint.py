"""Behaviour fingerprint of the standalone trainer: 20-step runs of every strategy, hashed.

A change that should not change behaviour (a refactor, a move, a new protocol) must leave these hashes as they were:
each case runs ``reinforce-ada train`` on the built-in tiny model (seed 0, one CPU thread) in a fresh process, then
hashes

* ``metrics``: every record of ``metrics.jsonl`` with the ``time/*`` keys left out (wall-clock times differ from run to
  run), as canonical JSON, in order -- so a changed value, a missing or added key, or a reordered key all show;
* ``weights``: every tensor of the final checkpoint's ``model.safetensors``, by name, dtype, shape and bytes;
* ``optimizer``: the final checkpoint's AdamW state (every moment tensor's bytes, the step counts) and the
  learning-rate scheduler's state.

The cases: the rounds sampler (``ada-balanced``), GRPO, streaming (with the cross-step memory), budget mode, DAPO,
Reinforce-Ada-Est (on 64 training prompts, so its memory sees each every other step), the KL term, a finished run extended (10 steps with the KL term and a checkpoint every 5, then ``--resume
--max-steps 20``) and a killed run resumed (budget mode, killed after its step-10 checkpoint, then ``--resume``).

Record the reference once, on the commit the change starts from, then check every later tree against it::

    python scripts/behaviour_fingerprint.py --write benchmarks/results/behaviour_fingerprint.json
    python scripts/behaviour_fingerprint.py --check benchmarks/results/behaviour_fingerprint.json

The hashes are of floating-point results. The tiny model's runs compute with torch's portable CPU kernels and MKL's
reproducible path (:mod:`reinforce_ada.cpu_numerics`), so they should not depend on the CPU's vector instructions;
they still depend on the torch, MKL and transformers builds (the committed reference: torch 2.13.0 CPU, transformers
5.25.0). Where a check fails on an untouched tree, record a reference from the starting commit there first.
``--check`` exits 1 naming every case that differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = ["--max-steps", "20", "--num-threads", "1", "--eval-prompts", "32", "--eval-steps", "10", "--seed", "0"]

CASES: dict[str, list[list[str] | str]] = {
    "rounds": [[]],
    "grpo": [["--strategy", "grpo"]],
    "streaming": [["--sampler.mode", "streaming", "--sampler.memory.enabled"]],
    "budget": [["--strategy", "ada-budget"]],
    "dapo": [["--strategy", "dapo"]],
    "est": [["--strategy", "ada-est", "--task-train-prompts", "64"]],
    "kl": [["--kl-coef", "0.05"]],
    "resume": [["--kl-coef", "0.05", "--save-steps", "5", "--max-steps", "10"],
               ["--kl-coef", "0.05", "--save-steps", "5", "--resume"]],
    "resume-killed": [["--strategy", "ada-budget", "--save-steps", "10"], "kill-after:10",
                      ["--strategy", "ada-budget", "--save-steps", "10", "--resume"]],
}
"""Each case: the extra options of each ``train`` command it runs, in order, in one run folder; ``kill-after:N``
cuts the folder back to what a kill during step N + 1 leaves behind (the later checkpoints and the summary gone, the
later steps' metrics still there)."""


PARTS = ("metrics", "weights", "optimizer")


def metrics_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        record = {k: v for k, v in json.loads(line).items() if not k.startswith("time/")}
        digest.update(json.dumps(list(record.items())).encode() + b"\n")
    return digest.hexdigest()


def latest(folder: Path) -> Path:
    return max(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))


def weights_hash(folder: Path) -> str:
    from safetensors.numpy import load_file

    checkpoint = latest(folder)
    tensors = load_file(str(checkpoint / "model" / "model.safetensors"))
    digest = hashlib.sha256(checkpoint.name.encode())
    for name in sorted(tensors):
        array = tensors[name]
        digest.update(f"{name} {array.dtype} {array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def optimizer_hash(folder: Path) -> str:
    import torch

    checkpoint = latest(folder)
    digest = hashlib.sha256()

    def add(value: object) -> None:
        if isinstance(value, torch.Tensor):
            digest.update(f"{value.dtype} {tuple(value.shape)}\n".encode())
            digest.update(value.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                digest.update(f"{key}:".encode())
                add(value[key])
        elif isinstance(value, (list, tuple)):
            for item in value:
                add(item)
        else:
            digest.update(repr(value).encode())

    for name in ("optimizer.pt", "scheduler.pt"):
        add(torch.load(checkpoint / name, weights_only=True))
    return digest.hexdigest()


def run_case(name: str, folder: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    for options in CASES[name]:
        if isinstance(options, str):
            kept = int(options.removeprefix("kill-after:"))
            for checkpoint in folder.glob("checkpoint-*"):
                if int(checkpoint.name.split("-")[1]) > kept:
                    shutil.rmtree(checkpoint)
            (folder / "summary.json").unlink()
            continue
        command = [sys.executable, "-m", "reinforce_ada.cli", "train", *COMMON, *options,
                   "--output-dir", str(folder)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"case {name}: {' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return {"metrics": metrics_hash(folder), "weights": weights_hash(folder), "optimizer": optimizer_hash(folder)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", metavar="JSON", help="record the fingerprints into this file")
    what.add_argument("--check", metavar="JSON", help="compare with the fingerprints recorded in this file")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = parser.parse_args(argv)
    results: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="fingerprint-") as tmp:
        for name in args.cases:
            results[name] = run_case(name, Path(tmp) / name)
            print(f"{name:10s} " + "  ".join(f"{part} {results[name][part][:16]}" for part in PARTS), flush=True)
    if args.write:
        command = "python scripts/behaviour_fingerprint.py --write " + args.write
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
        Path(args.write).write_text(json.dumps({"command": command, "tree": commit, "common_options": COMMON,
                                                "cases": {k: CASES[k] for k in results}, "fingerprints": results},
                                               indent=2) + "\n")
        print(f"wrote {args.write}")
        return 0
    reference = json.loads(Path(args.check).read_text())["fingerprints"]
    differ = [f"{name}: {part}" for name in results for part in PARTS
              if reference.get(name, {}).get(part) != results[name][part]]
    if differ:
        print("differs from the reference: " + "; ".join(differ))
        return 1
    print(f"all {len(results)} cases bit-identical to {args.check}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
