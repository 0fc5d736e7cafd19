"""Each checkpoint's ``manifest.json``: the size and SHA-256 of every other file in it, written last, so that a
bit-flipped file or one copied from another checkpoint is refused by name, and a file it does not list (an extra
``*.safetensors`` dropped into ``model/``) is never loaded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from reinforce_ada.errors import CheckpointError
from reinforce_ada.runs.files import file_sha256, fsync_dir

MANIFEST = "manifest.json"
"""In each checkpoint: the size and SHA-256 of every other file, written last (see :func:`check_manifest`)."""


FINAL_EVALUATION = "final_evaluation.pt"
"""In a finished run's last checkpoint: its final evaluation and the RNG state after it, written after the manifest
and listed in it once written (see :func:`reinforce_ada.runs.checkpoint.add_final_evaluation`)."""


REQUIRED = ("trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state.pt")
"""Files every checkpoint's manifest lists (besides its weights, ``model/*.safetensors``)."""


def listed_files(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The files ``manifest.json`` lists (``{}`` when there is none, or it lists none)."""
    path = checkpoint / MANIFEST
    if not path.exists():
        return {}
    try:
        files = json.loads(path.read_text())["files"]
        if not isinstance(files, dict):
            raise ValueError("files is not an object")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is not a checkpoint manifest: {err}") from None
    return files


def listed_weights(checkpoint: Path) -> list[Path]:
    """The weight files of ``checkpoint``: the ``model/*.safetensors`` its manifest lists (a file it does not list
    is never loaded), or, for a checkpoint without a manifest, every one in ``model/``."""
    files = listed_files(checkpoint)
    if not files:
        return sorted((checkpoint / "model").glob("*.safetensors"))
    return [checkpoint / name for name in sorted(files) if name.startswith("model/") and name.endswith(".safetensors")
            and "/" not in name.removeprefix("model/")]


def check_manifest(checkpoint: Path, files: dict[str, dict[str, Any]]) -> None:
    """Every file the manifest lists (``files``) is present with its size and SHA-256, and it lists every file a
    checkpoint needs: a bit-flipped file, one copied from another checkpoint, or a manifest cut down is named."""
    for name, entry in files.items():
        path = checkpoint / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing (listed in {checkpoint / MANIFEST})")
        if path.stat().st_size != entry.get("bytes") or file_sha256(path) != entry.get("sha256"):
            raise CheckpointError(f"{path} is not the file this checkpoint wrote (its size or SHA-256 differs "
                                  f"from {checkpoint / MANIFEST}): damaged, or copied from another checkpoint")
    unlisted = [name for name in REQUIRED if name not in files]
    if not listed_weights(checkpoint):
        unlisted.append("model/*.safetensors")
    if unlisted:
        raise CheckpointError(f"{checkpoint / MANIFEST} does not list {', '.join(unlisted)}: the checkpoint's files "
                              f"cannot be checked")


def unlisted_files(checkpoint: Path) -> list[Path]:
    """Files in ``checkpoint`` that the run did not write: not listed in its manifest, and neither the manifest nor
    the final evaluation (or its temporary file) that a kill left unlisted. Empty for a checkpoint without a
    manifest (an earlier version's: every file taken as the run's)."""
    files = listed_files(checkpoint)
    if not files:
        return []
    own = {MANIFEST, FINAL_EVALUATION, *files}
    return [p for p in sorted(checkpoint.rglob("*")) if p.is_file() and p.relative_to(checkpoint).as_posix() not in own
            and not p.name.startswith(f".{FINAL_EVALUATION}.tmp-")]


def write_manifest(folder: Path) -> None:
    """fsync every file of the checkpoint in ``folder`` and write ``manifest.json`` listing their sizes and SHA-256
    (read back by :func:`check_manifest`)."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        with path.open("rb") as fh:
            os.fsync(fh.fileno())
        files[path.relative_to(folder).as_posix()] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    with (folder / MANIFEST).open("w") as fh:
        fh.write(json.dumps({"files": files}, indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    for sub in {p.parent for p in folder.rglob("*")} | {folder}:
        fsync_dir(sub)
