"""Each checkpoint's ``manifest.json``: the size and SHA-256 of every other file in it, written last, so that a
bit-flipped file or one copied from another checkpoint is refused by name."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from reinforce_ada.errors import CheckpointError
from reinforce_ada.runs.files import file_sha256, fsync_dir

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
"""In each checkpoint: the size and SHA-256 of every other file, written last (see :func:`check_manifest`)."""


def listed_files(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The files ``manifest.json`` lists (``{}`` for a checkpoint written before manifests)."""
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


def check_manifest(checkpoint: Path) -> None:
    """Every file the manifest lists is present with its size and SHA-256: a bit-flipped file, or one copied from
    another checkpoint, is named. A checkpoint written before manifests is accepted with a warning."""
    files = listed_files(checkpoint)
    if not files:
        logger.warning("%s has no %s (written by an earlier version): its files cannot be checked", checkpoint,
                       MANIFEST)
        return
    for name, entry in files.items():
        path = checkpoint / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing (listed in {checkpoint / MANIFEST})")
        if path.stat().st_size != entry.get("bytes") or file_sha256(path) != entry.get("sha256"):
            raise CheckpointError(f"{path} is not the file this checkpoint wrote (its size or SHA-256 differs "
                                  f"from {checkpoint / MANIFEST}): damaged, or copied from another checkpoint")


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
