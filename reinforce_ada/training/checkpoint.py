"""Checkpoints and RNG state: everything needed to continue a run bit-for-bit on CPU.

A ``checkpoint-{step}`` folder holds the weights (safetensors) and tokenizer under ``model/``, ``optimizer.pt``,
``scheduler.pt``, ``rng_state.pt`` (Python, numpy, torch and CUDA generators) and ``trainer_state.json`` (step, totals,
accuracy history, the prompt stream's and the sampler's state, verifier counters, the config). :func:`save_checkpoint`
writes it into a temporary folder and renames it into place, so a crash never leaves half a checkpoint under the final
name. Which checkpoint a run may resume from, and whether its files are intact, is checked in
:mod:`reinforce_ada.training.run_folder` (``check_run_folder``, ``load_checkpoint_file``, ``read_trainer_state``).
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

from reinforce_ada.training.run_folder import checkpoints, load_checkpoint_file, read_trainer_state

logger = logging.getLogger(__name__)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


def save_checkpoint(output_dir: Path, step: int, write: Callable[[Path, list[Path]], None]) -> Path:
    """Write ``checkpoint-{step}`` atomically: ``write(folder, written)`` fills a temporary folder, which is then
    renamed into place. A failed write (e.g. disk full) removes the temporary folder and names the file it was
    writing (the last path ``write`` appended to ``written``)."""
    final = output_dir / f"checkpoint-{step}"
    tmp = output_dir / f".tmp-checkpoint-{step}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written: list[Path] = [tmp / "model"]
    try:
        write(tmp, written)
    except (OSError, RuntimeError) as err:  # a full disk surfaces as RuntimeError from torch.save
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(f"could not write {final.name} in {output_dir}: writing {written[-1].name} failed: "
                      f"{err}") from err
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    logger.info("saved %s", final)
    return final


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
