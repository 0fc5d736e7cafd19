"""The GPU evidence run's Python side (scripts/gpu_compare.sh drives it): the carried wheel's parts, and the pass-rate
probe that picks the prompt set.

``parts split WHEEL DIR1 DIR2 [EXTRA.whl ...]`` cuts a wheel into two checksummed halves, one per folder (the small
extra wheels go whole into both; each folder's ``SHA256SUMS`` lists every piece and the whole wheel); ``parts stash
DIR STASH`` copies a folder's pieces into the stash, checking each; ``parts assemble STASH OUT`` joins the halves into
OUT when every piece is there and every checksum matches, printing the wheels' paths, else says what is missing or
wrong and exits 1.

``probe --model M --work DIR`` (the model on the GPU when there is one): builds each candidate prompt set (below),
samples ``--probe-samples`` completions of ``--probe-prompts`` of its prompts, scores them with the ``last-integer``
reward, and picks one set by :func:`pick` -- the rule, written here before any run:

    per candidate, p = each probe prompt's pass rate; signal = mean(1 - p^4 - (1-p)^4), the expected share of GRPO
    groups of 4 with any signal; solvable = the share of prompts with p > 0. Eligible: solvable >= 0.25 (some
    prompts can be learned) and signal <= 0.5 (most GRPO groups lack signal: the paper's regime). The eligible
    candidate with the highest signal is chosen; when none is eligible, the candidate with the highest signal. A tie
    goes to the candidate listed first.

It writes DIR/train.jsonl and DIR/eval.jsonl of the chosen set (disjoint prompts), DIR/probe.json (every candidate's
figures and the choice), and for ``smollm2-135m`` the de-quantized model as a safetensors folder DIR/model that the
runs load quickly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from pathlib import Path

CANDIDATES = {  # name -> (prompt template, operand pairs, answer)
    "add-upto-30": ("What is {a} + {b}? Reply with just the number.", lambda: [(a, b) for a in range(31)
                                                                              for b in range(31)], lambda a, b: a + b),
    "subtract-upto-30": ("What is {a} - {b}? Reply with just the number.",
                         lambda: [(a, b) for a in range(31) for b in range(a + 1)], lambda a, b: a - b),
    "add-2digit": ("What is {a} + {b}? Reply with just the number.",
                   lambda: [(a, b) for a in range(10, 100) for b in range(10, 100)], lambda a, b: a + b),
    "larger": ("Which number is larger, {a} or {b}? Reply with just the number.",
               lambda: [(a, b) for a in range(100) for b in range(100) if a != b], max),
}
"""SmolLM2-135M-Instruct's candidates: it answers verbosely, so the reward reads the last integer. Measured on the CPU
while preparing this script: 2-digit + 2-digit 0/16, sums up to 30 about 1/16 per prompt, "which is larger" ~4/16."""

DRY_RUN_CANDIDATES = {  # the tiny char-level model's own format, for the CPU dry run
    "add-1digit": ("{a}+{b}=", lambda: [(a, b) for a in range(10) for b in range(10)], lambda a, b: a + b),
    "add-2digit": ("{a}+{b}=", lambda: [(a, b) for a in range(10, 100) for b in range(10, 100)], lambda a, b: a + b),
    "mul-1digit": ("{a}*{b}=", lambda: [(a, b) for a in range(10) for b in range(10)], lambda a, b: a * b),
}


# -- parts ----------------------------------------------------------------------------------------------------------
def sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()  # Python 3.11+ (the GPU machine's is 3.12)


def split(wheel: Path, first: Path, second: Path, *extras: Path) -> None:
    """``wheel`` cut in two halves, one per folder; ``extras`` (small wheels) go whole into both; each folder's
    SHA256SUMS lists both halves, the whole wheel and the extras."""
    half = (wheel.stat().st_size + 1) // 2
    names = [f"{wheel.name}.part1", f"{wheel.name}.part2"]
    with wheel.open("rb") as fh:
        chunks = [fh.read(half), fh.read()]
    sums = [f"{hashlib.sha256(chunk).hexdigest()}  {name}" for chunk, name in zip(chunks, names)]
    sums += [f"{sha256(path)}  {path.name}" for path in (wheel, *extras)]
    for folder, chunk, name in zip((first, second), chunks, names):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(chunk)
        for extra in extras:
            shutil.copyfile(extra, folder / extra.name)
        (folder / "SHA256SUMS").write_text("\n".join(sums) + "\n")
        print(f"{folder}: {name} {len(chunk) / 2**20:.1f} MiB" + "".join(f", {e.name}" for e in extras))


def _sums(folder: Path) -> dict[str, str]:
    path = folder / "SHA256SUMS"
    if not path.exists():
        return {}
    return {name: digest for digest, name in (line.split("  ", 1) for line in path.read_text().splitlines() if line)}


def stash(folder: Path, store: Path) -> int:
    """Copy ``folder``'s part(s) and SHA256SUMS into ``store``, each part checked; 1 when one does not match."""
    sums = _sums(folder)
    if not sums:
        print(f"PARTS: {folder} holds no SHA256SUMS", file=sys.stderr)
        return 1
    store.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / "SHA256SUMS", store / "SHA256SUMS")
    status = 0
    for name, digest in sums.items():
        if not (folder / name).exists():
            continue
        if sha256(folder / name) != digest:
            print(f"PARTS: {folder / name} does not match its SHA-256; not stashed", file=sys.stderr)
            status = 1
            continue
        shutil.copyfile(folder / name, store / name)
        print(f"stashed {name} ({(folder / name).stat().st_size / 2**20:.1f} MiB) in {store}")
    return status


def assemble(store: Path, out_dir: Path) -> int:
    """Join the stashed halves into the wheel in ``out_dir`` and copy the extras beside it, when every piece is there
    and every checksum matches (printing the wheels' paths); else say what is missing or wrong and return 1."""
    sums = _sums(store)
    parts = sorted(name for name in sums if ".whl.part" in name)
    joined = {name.rsplit(".part", 1)[0] for name in parts}
    if len(parts) != 2 or len(joined) != 1 or not joined <= set(sums):
        print(f"PARTS: no complete SHA256SUMS in {store} (was a part stashed?)", file=sys.stderr)
        return 1
    wheel_name = joined.pop()
    pieces = [name for name in sums if name != wheel_name]
    missing = [name for name in pieces if not (store / name).exists() or sha256(store / name) != sums[name]]
    if missing:
        print(f"PARTS: {', '.join(missing)} missing or damaged in {store}", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / wheel_name
    with wheel.open("wb") as fh:
        for name in parts:
            fh.write((store / name).read_bytes())
    if sha256(wheel) != sums[wheel_name]:
        wheel.unlink()
        print(f"PARTS: the joined {wheel_name} does not match its SHA-256", file=sys.stderr)
        return 1
    print(wheel)
    for name in pieces:
        if ".part" not in name:
            shutil.copyfile(store / name, out_dir / name)
            print(out_dir / name)
    return 0


# -- the probe -------------------------------------------------------------------------------------------------------
def pick(figures: dict[str, dict]) -> str:
    """The rule (module docstring): among candidates with solvable >= 0.25 and signal <= 0.5, the highest signal;
    with none eligible, the highest signal overall; a tie goes to the candidate listed first."""
    eligible = {name: f for name, f in figures.items() if f["solvable"] >= 0.25 and f["signal"] <= 0.5}
    pool = eligible or figures
    order = list(figures)
    return max(pool, key=lambda name: (pool[name]["signal"], -order.index(name)))  # a tie: the first listed


def prompt_sets(candidates: dict, num_train: int, num_eval: int, seed: int = 0) -> dict[str, tuple[list, list]]:
    """Per candidate: (train rows, eval rows), disjoint, drawn with ``seed``."""
    out = {}
    for name, (template, pairs, answer) in candidates.items():
        chosen = random.Random(seed).sample(pairs(), num_train + num_eval)
        rows = [{"prompt": template.format(a=a, b=b), "answer": str(answer(a, b))} for a, b in chosen]
        out[name] = (rows[num_eval:], rows[:num_eval])
    return out


def probe(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.models.loading import load_pretrained
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.scoring import score
    from reinforce_ada.types import Prompt
    from reinforce_ada.verifiers import get_verifier

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model, tokenizer = load_pretrained(args.model)
    model_dir = args.model
    if args.model == "smollm2-135m":  # de-quantized once; every run then loads plain safetensors
        model_dir = str(work / "model")
        model.save_pretrained(model_dir, safe_serialization=True)
        tokenizer.save_pretrained(model_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    print(f"probe: {args.model} loaded on {device} in {time.perf_counter() - started:.0f} s", flush=True)
    verifier = get_verifier("last-integer")
    candidates = DRY_RUN_CANDIDATES if args.dry_run else CANDIDATES
    sets = prompt_sets(candidates, args.train_prompts, args.eval_prompts)
    figures = {}
    for name, (train, _) in sets.items():
        prompts = [Prompt(f"{name}-{i}", row["prompt"], answer=row["answer"])
                   for i, row in enumerate(train[:args.probe_prompts])]
        generator = HFGenerator(model, tokenizer, max_new_tokens=args.max_new_tokens, use_chat_template=True, seed=0)
        outputs = generator.generate([GenerationRequest(p, args.probe_samples) for p in prompts])
        rates = np.array([np.mean([r is not None and r > 0.5 for r in score(verifier, [p] * len(c), c)])
                          for p, c in zip(prompts, outputs)])
        figures[name] = {"mean_pass_rate": float(rates.mean()), "solvable": float(np.mean(rates > 0)),
                         "signal": float(np.mean(1 - rates ** 4 - (1 - rates) ** 4)), "pass_rates": rates.tolist(),
                         "example": outputs[0][0].text[:200] if outputs[0] else ""}
        print(f"probe: {name}: mean pass rate {rates.mean():.3f}, solvable {np.mean(rates > 0):.2f}, GRPO-4 signal "
              f"{figures[name]['signal']:.3f}", flush=True)
    chosen = pick(figures)
    train, held_out = sets[chosen]
    for file, rows in (("train.jsonl", train), ("eval.jsonl", held_out)):
        (work / file).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (work / "probe.json").write_text(json.dumps({"model": args.model, "device": device, "chosen": chosen,
                                                 "rule": pick.__doc__, "candidates": figures,
                                                 "probe_prompts": args.probe_prompts,
                                                 "probe_samples": args.probe_samples,
                                                 "max_new_tokens": args.max_new_tokens}, indent=1) + "\n")
    print(f"probe: chose {chosen} ({time.perf_counter() - started:.0f} s); model for the runs: {model_dir}")
    (work / "model_path").write_text(model_dir)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    parts = sub.add_parser("parts")
    parts.add_argument("action", choices=("split", "stash", "assemble"))
    parts.add_argument("paths", nargs="+")
    p = sub.add_parser("probe")
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--dry-run", action="store_true", help="the tiny model's candidates")
    p.add_argument("--probe-prompts", type=int, default=32)
    p.add_argument("--probe-samples", type=int, default=8)
    p.add_argument("--train-prompts", type=int, default=128)
    p.add_argument("--eval-prompts", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    if args.command == "probe":
        return probe(args)
    paths = [Path(p) for p in args.paths]
    if args.action == "split":
        split(*paths)
        return 0
    return stash(*paths) if args.action == "stash" else assemble(*paths)


if __name__ == "__main__":
    raise SystemExit(main())
