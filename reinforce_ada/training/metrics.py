"""The run's metrics: one JSON line per step in ``metrics.jsonl``, and tensorboard or wandb on request."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from reinforce_ada.training.run_folder import truncate_metrics


class MetricsWriter:
    """metrics.jsonl always; tensorboard or wandb on request."""

    def __init__(self, folder: Path, report_to: str, config: dict[str, Any], resume_step: int | None = None,
                 keep_final_evaluation: bool = False):
        self.path = folder / "metrics.jsonl"
        if resume_step is not None:  # drop lines written after the checkpoint (atomically)
            truncate_metrics(self.path, resume_step, keep_final_evaluation)
        elif self.path.exists():
            self.path.unlink()
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
        try:
            with self.path.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        except OSError as err:
            raise OSError(err.errno, f"could not write {self.path}: {err.strerror or err}") from err
        numeric = {k: v for k, v in record.items() if isinstance(v, (int, float))}
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, record["step"])
        if self._wandb is not None:
            self._wandb.log(numeric, step=record["step"])

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
