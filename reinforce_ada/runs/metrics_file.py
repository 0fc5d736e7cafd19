"""A run's ``metrics.jsonl`` as the run folder reads it: its records (a torn last line dropped), whether it agrees
with a checkpoint, and cutting it back to a checkpoint's step when a run resumes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from reinforce_ada.errors import CheckpointError
from reinforce_ada.runs.files import write_atomic

logger = logging.getLogger(__name__)


def read_metrics_lines(path: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a torn last line (a kill mid-write) is dropped, any other bad line named."""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not an object with an integer step")
        except ValueError as err:
            if number == len(lines):
                logger.warning("%s: dropping a torn last line (%s)", path, err)
                break
            raise CheckpointError(f"{path} line {number} is not a metrics record: {err}") from None
        records.append(record)
    return records


def is_step_record(record: dict[str, Any]) -> bool:
    """A training step's line (the other lines are evaluations)."""
    return "sampling/total_samples" in record


def check_metrics_agree(folder: Path, checkpoint: Path, state: dict[str, Any]) -> None:
    """``metrics.jsonl`` must hold the checkpoint's step with the same total samples (no gap, no other run)."""
    path = folder / "metrics.jsonl"
    step = state["step"]
    if step == 0 or not path.exists():
        return
    records = [r for r in read_metrics_lines(path) if is_step_record(r)]
    at_step = [r for r in records if r["step"] == step]
    if not at_step:
        last = max((r["step"] for r in records), default=0)
        raise CheckpointError(f"{path} has no line for step {step} of {checkpoint} (its last step is {last}): the "
                              f"metrics and the checkpoint are not from the same run")
    samples = state["totals"].get("samples")
    if samples is not None and at_step[-1].get("total_samples") != samples:
        raise CheckpointError(f"{checkpoint / 'trainer_state.json'} says {samples} samples at step {step} but {path} "
                              f"says {at_step[-1].get('total_samples')}: they are not from the same run")


def truncate_metrics(path: Path, step: int, keep_final_evaluation: bool = False) -> None:
    """Keep the lines of steps before ``step`` and ``step``'s own training line; atomically.

    A standalone evaluation line at ``step`` (the final evaluation of a run killed after it) is dropped -- the
    resumed run evaluates again from the same RNG state and writes it once -- unless the checkpoint recorded that
    evaluation (``keep_final_evaluation``: a finished run being extended keeps it).
    """
    if not path.exists():
        return
    kept = [r for r in read_metrics_lines(path)
            if r["step"] < step or (r["step"] == step and (is_step_record(r) or keep_final_evaluation))]
    write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
