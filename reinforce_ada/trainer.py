"""Kept for existing imports: the standalone trainer now lives in :mod:`reinforce_ada.training` (the loop, the
update, checkpoints, metrics) and the prompt stream in :mod:`reinforce_ada.data.stream`."""

from reinforce_ada.data.stream import PromptStream
from reinforce_ada.training.checkpoint import latest_checkpoint
from reinforce_ada.training.loop import Trainer
from reinforce_ada.training.metrics import MetricsWriter
from reinforce_ada.training.setup import task_options as _task_options

__all__ = ["MetricsWriter", "PromptStream", "Trainer", "latest_checkpoint"]
