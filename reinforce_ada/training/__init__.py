"""The standalone trainer, split by concern.

* :mod:`.loop` -- :class:`Trainer`: builds the run, then ``train`` / ``train_step`` / ``evaluate``;
* :mod:`.setup` -- building the pieces from the config: device, seeds, data and verifier, model (warm start, LoRA),
  reference model, generation backend (the sampler comes from :func:`reinforce_ada.sampling.factory.build_sampler`);
* :mod:`.update` -- padded sequences, token log-probabilities, the PPO-clip update;
* :mod:`.checkpoint` -- checkpoint folders and RNG state (:func:`latest_checkpoint`);
* :mod:`.metrics` -- :class:`MetricsWriter` (``metrics.jsonl``, tensorboard, wandb);
* the run's safety checks: :mod:`.preflight` (what the config names, before anything loads), :mod:`.run_folder`
  (the run folder, intact checkpoints, atomic writes) and :mod:`.guards` (verifier failures, non-finite numbers,
  prompt lengths, during the run).

The prompt stream lives in :mod:`reinforce_ada.data.stream`. The names below are imported on first use, so
importing one of the safety-check modules does not load the trainer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Trainer": "loop", "MetricsWriter": "metrics", "latest_checkpoint": "checkpoint"}

__all__ = ["MetricsWriter", "Trainer", "latest_checkpoint"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
