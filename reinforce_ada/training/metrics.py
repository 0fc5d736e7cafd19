"""The run's metrics: one JSON line per step in ``metrics.jsonl``, and tensorboard or wandb on request."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


class MetricsWriteError(OSError):
    """A metrics line could not be written (e.g. the disk is full); the file was rolled back to its last whole line.
    The command line prints it as one line and exits 2, like a checkpoint that could not be written."""


class MetricsWriter:
    """metrics.jsonl always (appended to: the run's start cut it back to where the run continues,
    :meth:`reinforce_ada.runs.resume.StartState.open_folder`); tensorboard or wandb on request."""

    def __init__(self, folder: Path, report_to: str, config: dict[str, Any]):
        self.path = folder / "metrics.jsonl"
        self._tb = self._wandb = None
        if report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(folder / "tensorboard"))
        elif report_to == "wandb":
            import wandb

            self._wandb = wandb.init(project="reinforce-ada", config=config, dir=str(folder))

    def write(self, record: dict[str, Any]) -> None:
        # Non-finite numbers (e.g. samples per signal-prompt with no signal) are written as null: strict JSON.
        record = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        self._append_line((json.dumps(record) + "\n").encode())
        numeric = {k: v for k, v in record.items() if isinstance(v, (int, float))}
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, record["step"])
        if self._wandb is not None:
            self._wandb.log(numeric, step=record["step"])

    def _append_line(self, data: bytes) -> None:
        """Append one whole line or nothing: one unbuffered write (looped over short writes), and on any OSError
        (e.g. a full disk) the file is truncated back to its previous length, so no torn last line is left."""
        previous = self.path.stat().st_size if self.path.exists() else 0
        try:
            with self.path.open("ab", buffering=0) as fh:
                view = memoryview(data)
                while view:
                    view = view[fh.write(view):]
        except OSError as err:
            try:
                os.truncate(self.path, previous)
            except OSError:
                pass
            raise MetricsWriteError(err.errno, f"could not write {self.path}: {err.strerror or err} (the partial "
                                               f"line was removed; the file holds the steps before)") from err

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
