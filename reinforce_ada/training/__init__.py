"""The standalone trainer, split by concern.

* :mod:`.loop` -- :class:`Trainer`: builds the run, then ``train`` / ``train_step`` / ``evaluate``;
* :mod:`.setup` -- building the pieces from the config: device, seeds, data and verifier, model (warm start, LoRA),
  reference model, optimizer and schedule, generation backend (the sampler comes from
  :func:`reinforce_ada.sampling.factory.build_sampler`);
* :mod:`.update` -- the typed :class:`~.update.SequenceBatch`, token log-probabilities, and
  :class:`~.update.PolicyUpdate` (model, optimizer, schedule; one call per step through the policy loss);
* :mod:`.warm_start` -- the tiny model's supervised warm start (cached; the shipped start models);
* :mod:`.metrics` -- :class:`MetricsWriter` (``metrics.jsonl``, tensorboard, wandb);
* the run's safety checks: :mod:`.preflight` (what the config names, before anything loads) and :mod:`.guards`
  (verifier failures, non-finite numbers, prompt lengths, during the run).

The run folder, its checkpoints, the resume decision (:mod:`reinforce_ada.runs.resume`) and what other commands read
of a run live in :mod:`reinforce_ada.runs`; the prompt stream in :mod:`reinforce_ada.data.stream`. The names below are imported on first use, so
importing one of the safety-check modules does not load the trainer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Trainer": "loop", "MetricsWriter": "metrics"}

__all__ = ["MetricsWriter", "Trainer"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
