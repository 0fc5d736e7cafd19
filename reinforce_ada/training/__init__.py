"""The standalone trainer, split by concern.

* :mod:`.loop` -- :class:`Trainer`: builds the run, then ``train`` / ``train_step`` / ``evaluate``;
* :mod:`.setup` -- building the pieces from the config: device, seeds, data and verifier, model (warm start, LoRA),
  reference model, generation backend (the sampler comes from :func:`reinforce_ada.sampling.factory.build_sampler`);
* :mod:`.update` -- padded sequences, token log-probabilities, the PPO-clip update;
* :mod:`.checkpoint` -- checkpoint folders and RNG state (:func:`latest_checkpoint`);
* :mod:`.metrics` -- :class:`MetricsWriter` (``metrics.jsonl``, tensorboard, wandb).

The prompt stream lives in :mod:`reinforce_ada.data.stream`; the run's safety checks in :mod:`reinforce_ada.guards`,
:mod:`reinforce_ada.run_folder` and :mod:`reinforce_ada.preflight`.
"""

from reinforce_ada.training.checkpoint import latest_checkpoint
from reinforce_ada.training.loop import Trainer
from reinforce_ada.training.metrics import MetricsWriter

__all__ = ["MetricsWriter", "Trainer", "latest_checkpoint"]
