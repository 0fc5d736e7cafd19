"""Finding a run's checkpoints and checking that one is intact before anything loads: its manifest, its
``trainer_state.json``, its files present and its safetensors headers readable; a damaged checkpoint is named with the
previous intact one. :func:`recover_checkpoints` puts back a checkpoint a kill left aside while replacing it."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from reinforce_ada.errors import CheckpointError
from reinforce_ada.runs.manifest import MANIFEST, check_manifest, listed_files, listed_weights

logger = logging.getLogger(__name__)


def _checkpoint_step(path: Path) -> int | None:
    suffix = path.name[len("checkpoint-"):]
    return int(suffix) if path.name.startswith("checkpoint-") and suffix.isdigit() else None


def checkpoints(folder: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of a run, oldest first."""
    found = [p for p in Path(folder).glob("checkpoint-*") if p.is_dir() and _checkpoint_step(p) is not None]
    return sorted(found, key=_checkpoint_step)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


def recover_checkpoints(folder: Path) -> None:
    """Put back ``checkpoint-N`` from ``.old-checkpoint-N-*``, left by a kill while it was being replaced (the new
    copy never reached its name); an aside copy whose checkpoint is in place is deleted."""
    for aside in sorted(folder.glob(".old-checkpoint-*")):
        step = aside.name[len(".old-checkpoint-"):].split("-")[0]
        final = folder / f"checkpoint-{step}"
        if final.exists():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(aside, final)
            logger.warning("put back %s (a run was killed while replacing it)", final)


def read_trainer_state(checkpoint: Path) -> dict[str, Any]:
    """``trainer_state.json`` with its fields checked (step >= 0 and equal to the folder's number, totals >= 0)."""
    path = checkpoint / "trainer_state.json"
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is not readable JSON: {err}") from None
    step = state.get("step") if isinstance(state, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: step must be an integer >= 0 (got {step!r})")
    if step != _checkpoint_step(checkpoint):
        raise CheckpointError(f"{path}: step {step} does not match the folder name {checkpoint.name}")
    totals = state.get("totals")
    if not isinstance(totals, dict) or any(not isinstance(v, (int, float)) or v < 0 for v in totals.values()):
        raise CheckpointError(f"{path}: totals must be non-negative numbers (got {totals!r})")
    for key in ("stream", "sampler", "config"):
        if not isinstance(state.get(key), dict):
            raise CheckpointError(f"{path}: field {key!r} is missing or not an object")
    stream = state["stream"]
    if any(not isinstance(stream.get(k), int) or stream[k] < 0 for k in ("epoch", "position")):
        raise CheckpointError(f"{path}: stream must hold an epoch and a position >= 0 (got {stream!r})")
    return state


def check_checkpoint_files(checkpoint: Path, accept_unverified: bool = False) -> dict[str, Any]:
    """The checks that need no model: every file as the manifest lists it (:func:`check_manifest`), trainer state,
    the other files present, the listed safetensors headers readable. A checkpoint without a manifest (or with one
    that lists no file) is refused when its ``trainer_state.json`` is of a version that writes manifests -- its files
    cannot be checked -- unless ``accept_unverified``; one of an earlier version is accepted with a warning."""
    files = listed_files(checkpoint)
    if files:
        check_manifest(checkpoint, files)
    state = read_trainer_state(checkpoint)
    if not files:
        unchecked = (f"{checkpoint / MANIFEST} is missing or lists no files, so the checkpoint's files cannot be "
                     f"checked")
        if "data" in state and not accept_unverified:  # written by a version that writes manifests
            raise CheckpointError(f"{unchecked}, though its trainer_state.json was written by a version that writes "
                                  f"one; pass --accept-unverified-checkpoint to resume from it as it is (recorded in "
                                  f"config_history.jsonl)")
        logger.warning("%s: %s", checkpoint, unchecked + (" (--accept-unverified-checkpoint)" if "data" in state
                                                         else " (written by an earlier version)"))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pt"):
        if not (checkpoint / name).is_file():
            raise CheckpointError(f"{checkpoint / name} is missing")
    weights = listed_weights(checkpoint)
    if not weights:
        raise CheckpointError(f"{checkpoint / 'model'} holds no .safetensors weights")
    from safetensors import safe_open

    for path in weights:
        try:
            with safe_open(str(path), framework="numpy") as fh:  # the header only: torch need not load yet
                fh.keys()
        except Exception as err:  # noqa: BLE001 -- safetensors raises its own error types for bad headers
            raise CheckpointError(f"{path} is not a readable safetensors file: {err}") from None
    return state


def previous_intact(checkpoint: Path) -> Path | None:
    """The newest checkpoint older than ``checkpoint`` whose files pass :func:`check_checkpoint_files`."""
    step = _checkpoint_step(checkpoint)
    for older in reversed([c for c in checkpoints(checkpoint.parent) if _checkpoint_step(c) < step]):
        try:
            check_checkpoint_files(older)
        except CheckpointError:
            continue
        return older
    return None


def unusable(checkpoint: Path, problem: str) -> CheckpointError:
    """The error for a checkpoint that cannot be resumed, suggesting the previous intact one."""
    previous = previous_intact(checkpoint)
    if previous is not None:
        hint = (f"the previous intact checkpoint is {previous}: move {checkpoint.name} out of {checkpoint.parent} "
                f"and --resume again to continue from step {_checkpoint_step(previous)}")
    else:
        hint = "there is no earlier intact checkpoint; --overwrite starts the run over"
    return CheckpointError(f"cannot resume from {checkpoint}: {problem}; {hint}")


def load_checkpoint_file(checkpoint: Path, path: Path, load: Callable[[Path], Any]) -> Any:
    """``load(path)``, with any failure reported as :func:`unusable` naming ``path``."""
    try:
        return load(path)
    except Exception as err:  # noqa: BLE001 -- torch / safetensors raise many types for a corrupt file
        raise unusable(checkpoint, f"{path} could not be loaded ({type(err).__name__}: {err})") from err
