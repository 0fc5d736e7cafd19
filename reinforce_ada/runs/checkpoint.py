"""Checkpoints and RNG state: everything needed to continue a run bit-for-bit on CPU.

A ``checkpoint-{step}`` folder holds the weights (safetensors) and tokenizer under ``model/``, ``optimizer.pt``,
``scheduler.pt``, ``rng_state.pt`` (Python, numpy, torch and CUDA generators) and ``trainer_state.json`` (step, totals,
accuracy history, the prompt stream's and the sampler's state, verifier counters, the training data's fingerprint,
the config) and ``manifest.json`` (the size and SHA-256 of every other file, written last). :func:`save_checkpoint`
writes it into a temporary folder, makes it durable (fsync), and only then moves it into place; a checkpoint it
replaces is renamed aside first and deleted last, so a kill at any moment leaves a complete checkpoint under its final
name (or aside, where the next start puts it back: :func:`reinforce_ada.runs.intact.recover_checkpoints`).
A finished run's final evaluation is added afterwards as ``final_evaluation.pt`` (its accuracy and the RNG state
after it), listed in the manifest once written: a finished run that is extended keeps that evaluation and continues
exactly as an uninterrupted longer run would. Which checkpoint a run may resume from, and whether its files are intact,
is checked in :mod:`reinforce_ada.runs.folder` (``check_run_folder``) and :mod:`reinforce_ada.runs.intact`
(``check_checkpoint_files``, ``load_checkpoint_file``, ``read_trainer_state``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np

from reinforce_ada.runs.files import file_sha256, fsync_dir, write_atomic
from reinforce_ada.runs.intact import load_checkpoint_file, read_trainer_state, unusable
from reinforce_ada.runs.manifest import MANIFEST, listed_files, write_manifest

logger = logging.getLogger(__name__)

FINAL_EVALUATION = "final_evaluation.pt"
"""In a finished run's last checkpoint: its final evaluation and the RNG state after it (see
:func:`add_final_evaluation`)."""


def save_checkpoint(output_dir: Path, step: int, write: Callable[[Path, list[Path]], None]) -> Path:
    """Write ``checkpoint-{step}`` so that a kill at any moment leaves a complete checkpoint: ``write(folder,
    written)`` fills a temporary folder, its manifest is written and everything fsynced, then it is renamed into
    place (a checkpoint of the same step is renamed aside first and deleted after). A failed write (e.g. disk full)
    removes the temporary folder and names the file it was writing (the last path ``write`` appended to
    ``written``)."""
    final = output_dir / f"checkpoint-{step}"
    tmp = output_dir / f".tmp-checkpoint-{step}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written: list[Path] = [tmp / "model"]
    try:
        write(tmp, written)
        written.append(tmp / MANIFEST)
        write_manifest(tmp)
    except (OSError, RuntimeError) as err:  # a full disk surfaces as RuntimeError from torch.save
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(f"could not write {final.name} in {output_dir}: writing {written[-1].name} failed: "
                      f"{err}") from err
    aside = output_dir / f".old-checkpoint-{step}-{os.getpid()}"
    if final.exists():
        os.replace(final, aside)  # never delete the only complete copy before the new one is in place
    os.replace(tmp, final)
    fsync_dir(output_dir)
    shutil.rmtree(aside, ignore_errors=True)
    logger.info("saved %s", final)
    return final


def add_final_evaluation(checkpoint: Path, accuracy: float, verifier_stats: dict[str, int]) -> None:
    """Record a finished run's final evaluation in its last checkpoint: ``final_evaluation.pt`` (the accuracy, the
    RNG state after the evaluation and the verifier's counters), then the manifest rewritten to list it (atomically:
    a kill in between leaves a file the manifest does not list, which is ignored and the evaluation done again)."""
    import torch

    path = checkpoint / FINAL_EVALUATION
    tmp = checkpoint / f".{FINAL_EVALUATION}.tmp-{os.getpid()}"
    try:
        torch.save({"accuracy": float(accuracy), "rng": rng_state(), "verifier_stats": dict(verifier_stats)}, tmp)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
    except (OSError, RuntimeError) as err:  # a full disk surfaces as RuntimeError from torch.save
        tmp.unlink(missing_ok=True)
        raise OSError(f"could not write {path}: {' '.join(str(err).split())[:300]} (the checkpoint is intact; "
                      f"--resume redoes the final evaluation)") from err
    os.replace(tmp, path)
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    manifest["files"][FINAL_EVALUATION] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    write_atomic(checkpoint / MANIFEST, json.dumps(manifest, indent=1))
    fsync_dir(checkpoint)


def load_final_evaluation(checkpoint: Path) -> dict[str, Any] | None:
    """The final evaluation :func:`add_final_evaluation` recorded in ``checkpoint``, or ``None`` (a checkpoint
    written mid-run, or one whose run was killed before its final evaluation was recorded)."""
    import torch

    if FINAL_EVALUATION not in listed_files(checkpoint):
        return None
    return load_checkpoint_file(checkpoint, checkpoint / FINAL_EVALUATION,
                                lambda p: torch.load(p, weights_only=True))


def write_checkpoint(folder: Path, written: list[Path], model: Any, tokenizer: Any, optimizer: Any, scheduler: Any,
                     trainer_state: dict[str, Any]) -> None:
    """The files of a checkpoint; ``written`` gets each path before it is written (for error messages)."""
    import torch
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside our own progress bar
    try:
        model.save_pretrained(folder / "model", safe_serialization=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(folder / "model")
    for name, obj in (("optimizer.pt", optimizer.state_dict()), ("scheduler.pt", scheduler.state_dict())):
        written.append(folder / name)
        torch.save(obj, folder / name)
    written.append(folder / "rng_state.pt")
    torch.save(rng_state(), folder / "rng_state.pt")
    written.append(folder / "trainer_state.json")
    (folder / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2))


def rng_state() -> dict[str, Any]:
    """The Python, numpy, torch and CUDA generators' states, in a form ``torch.load(weights_only=True)`` reads."""
    import torch

    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, list(internal), gauss],
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(rng: dict[str, Any]) -> None:
    """Restore the generators from :func:`rng_state`'s dict (CUDA's only when both runs have a GPU)."""
    import torch

    version, internal, gauss = rng["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def load_weights(model: Any, checkpoint: Path, lora: bool) -> None:
    """Load ``checkpoint/model/*.safetensors`` into ``model`` (the adapters only, with LoRA); a checkpoint of
    another model is refused with the mismatching keys."""
    from safetensors.torch import load_file

    files = sorted((checkpoint / "model").glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{checkpoint / 'model'} holds no .safetensors weights")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_checkpoint_file(checkpoint, f, lambda path: load_file(str(path))))
    check_tensors(checkpoint, state, model.state_dict(), lora)
    if lora:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, state)
    else:
        missing, unexpected = model.load_state_dict(state, strict=False)
        tied = set(getattr(model, "_tied_weights_keys", None) or [])
        missing = [k for k in missing if k not in tied and "lm_head" not in k]
        if missing or unexpected:
            raise RuntimeError(f"checkpoint {checkpoint} does not match the model: missing {missing[:5]}, "
                               f"unexpected {unexpected[:5]}")
    logger.info("resumed weights from %s", checkpoint)


def check_tensors(checkpoint: Path, state: dict[str, Any], expected: dict[str, Any], lora: bool) -> None:
    """Every tensor of a checkpoint finite and shaped as the model's own (a wrong shape or a NaN is named, with the
    checkpoint that holds it, instead of a traceback or a run that trains on NaN)."""
    import torch

    for name, tensor in state.items():
        target = expected.get(name)
        if lora and target is None:  # peft names adapters without the adapter's name; shapes checked by peft
            target = next((v for k, v in expected.items() if k.replace(".default", "") == name), None)
        if target is not None and tuple(tensor.shape) != tuple(target.shape):
            raise unusable(checkpoint, f"tensor {name} has shape {tuple(tensor.shape)} but the model's is "
                                       f"{tuple(target.shape)}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise unusable(checkpoint, f"tensor {name} holds NaN or infinite values")


def load_training_state(checkpoint: Path, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore the optimizer, the scheduler and the RNG state from ``checkpoint``; returns its
    ``trainer_state.json`` (the caller restores the rest). A file that is missing, does not load or does not fit
    is named."""
    import torch

    def load(name: str) -> Any:
        return load_checkpoint_file(checkpoint, checkpoint / name, lambda p: torch.load(p, weights_only=True))

    optimizer_state, scheduler_state, rng = load("optimizer.pt"), load("scheduler.pt"), load("rng_state.pt")
    # A file that loads but does not fit (another model, a tampered state) is named too.
    load_checkpoint_file(checkpoint, checkpoint / "optimizer.pt", lambda _: optimizer.load_state_dict(optimizer_state))
    load_checkpoint_file(checkpoint, checkpoint / "scheduler.pt", lambda _: scheduler.load_state_dict(scheduler_state))
    set_rng_state(rng)
    return read_trainer_state(checkpoint)


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy integers made Python ints (recursively through dicts, lists and tuples)."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
