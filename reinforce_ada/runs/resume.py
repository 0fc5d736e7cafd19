"""The resume decision: where a run starts, as one :class:`StartState` the trainer applies without asking which.

A run starts

* **fresh** -- step 0, nothing to load (a new folder, or ``--overwrite``);
* **resumed** -- from the newest checkpoint of a run killed mid-way: its weights, optimizer, scheduler, RNG state,
  prompt-stream position, sampler state, totals and accuracy history; ``metrics.jsonl`` is cut back to its step;
* **extended** -- from the last checkpoint of a finished run given a larger ``max_steps``: as resumed, and the final
  evaluation recorded in that checkpoint is kept (when the longer run evaluates at that step too, the RNG state after
  that evaluation is restored, so the run continues exactly as an uninterrupted longer one); a finished run with no
  more steps has :attr:`StartState.nothing_to_do`.

:func:`decide_start` makes the decision before anything loads (the folder checks of :mod:`.folder`); the trainer then
hands the state its pieces as it builds them -- :meth:`StartState.check_data` (the training data's fingerprint),
:meth:`StartState.load_weights` (after the KL reference copied the start model), :meth:`StartState.restore` (once the
optimizer and sampler exist) -- and :meth:`StartState.open_folder` when training begins. On a fresh start each of
these does what a fresh start needs, usually nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reinforce_ada.errors import RunFolderError
from reinforce_ada.runs.folder import check_run_folder, prepare_run_folder
from reinforce_ada.runs.intact import read_trainer_state, recover_checkpoints, unusable
from reinforce_ada.runs.metrics_file import truncate_metrics

logger = logging.getLogger(__name__)

__all__ = ["StartState", "decide_start"]


def _fresh_totals() -> dict[str, Any]:
    return {"samples": 0, "tokens": 0, "optimizer_steps": 0, "wall_seconds": 0.0}


@dataclass
class StartState:
    """Where a run starts and what it carries over (fresh: the defaults)."""

    checkpoint: Path | None = None
    """The checkpoint the run continues from; ``None`` for a fresh start."""
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Settings (and the data, when forced) that differ from the checkpoint's: ``{name: (then, now)}``."""
    step: int = 0
    totals: dict[str, Any] = field(default_factory=_fresh_totals)
    """Samples, tokens, optimizer steps and wall seconds so far."""
    accuracy_before: float | None = None
    """The held-out accuracy before training, when the run measured it already."""
    accuracy_history: list[tuple[int, float]] = field(default_factory=list)
    warm_start: dict[str, Any] | None = None
    """The warm-start record of the run's start model (``None``: the model being loaded now brings its own)."""
    verifier_offset: dict[str, int] = field(default_factory=dict)
    """The verifier's counters before this start (its own count from zero)."""
    final_evaluation: dict[str, Any] | None = None
    """A finished run's final evaluation, recorded in its last checkpoint (accuracy, RNG state, verifier counters)."""
    nothing_to_do: str | None = None
    """Why a resumed run has nothing to do (a finished run without more steps); it then changes nothing."""
    data_changed: bool = False
    """Forced onto other training data (``force_resume_changes``): the stream starts a new epoch's order."""

    # -- before the model loads -----------------------------------------------------------------------------------
    def check_data(self, config: Any, fingerprint: dict[str, Any]) -> None:
        """Refuse training data other than the checkpoint's (its row count and SHA-256), unless
        ``force_resume_changes``, which records the change. Checked before anything in the folder is rewritten; a
        checkpoint from before fingerprints is not checked."""
        if self.checkpoint is None:
            return
        saved = read_trainer_state(self.checkpoint).get("data")
        if saved is None or saved == fingerprint:
            return
        source = config.data or f"task {config.task}"
        change = (f"the training data ({source}) is not what {self.checkpoint} was trained on: {saved['rows']} rows "
                  f"with SHA-256 {saved['sha256'][:12]}... then, {fingerprint['rows']} rows with SHA-256 "
                  f"{fingerprint['sha256'][:12]}... now")
        if not config.force_resume_changes:
            raise RunFolderError(f"--resume: {change}; put the original data back, pass --force-resume-changes to "
                                 f"continue on the new data (recorded in config_history.jsonl), or use another "
                                 f"--output-dir")
        logger.warning("--force-resume-changes: %s", change)
        self.changes = {**self.changes, "data": (saved, fingerprint)}
        self.data_changed = True

    def load_weights(self, model: Any, lora: bool) -> None:
        """The checkpoint's weights into ``model`` (only the adapters, with LoRA)."""
        if self.checkpoint is not None:
            from reinforce_ada.runs.checkpoint import load_weights

            load_weights(model, self.checkpoint, lora)

    # -- once the optimizer and the sampler exist ---------------------------------------------------------------------
    def restore(self, optimizer: Any, scheduler: Any, stream: Any, sampler: Any, config: Any,
                evaluates: bool) -> None:
        """The checkpoint's optimizer, scheduler, RNG state, stream position and sampler state, and this state's
        step, totals, accuracies and counters from its ``trainer_state.json``. ``evaluates``: the run has held-out
        prompts (an extended run then continues from the RNG state after its final evaluation when the longer run
        evaluates at that step too)."""
        if self.checkpoint is None:
            return
        from reinforce_ada.runs.checkpoint import load_final_evaluation, load_training_state, set_rng_state

        checkpoint = self.checkpoint
        state = load_training_state(checkpoint, optimizer, scheduler)
        self.step = state["step"]
        self.totals = state["totals"]
        self.accuracy_before = state["accuracy_before"]
        self.accuracy_history = [tuple(x) for x in state["accuracy_history"]]
        self.warm_start = state.get("warm_start")
        position = dict(state["stream"])
        if self.data_changed:  # forced onto other data: the old order means nothing; a new epoch starts
            position["position"] = min(position["position"], len(stream.prompts))
        try:
            stream.load_state_dict(position)
        except ValueError as err:
            raise unusable(checkpoint, f"{checkpoint / 'trainer_state.json'}: {err}") from None
        sampler.load_state_dict(state["sampler"])
        self.verifier_offset = dict(state.get("verifier_stats", {}))
        self.final_evaluation = load_final_evaluation(checkpoint)
        if self.final_evaluation is None:
            return
        if self.step >= config.max_steps and (Path(config.output_dir) / "summary.json").exists():
            self.nothing_to_do = (f"nothing to do: {config.output_dir} is already at step {self.step} (max_steps "
                                  f"{config.max_steps}) and finished; give a larger --max-steps to extend it")
            return
        self.accuracy_history.append((self.step, self.final_evaluation["accuracy"]))
        if config.eval_steps and self.step % config.eval_steps == 0 and self.step < config.max_steps and evaluates:
            # an uninterrupted longer run evaluates at this step too: continue from the RNG state after it
            set_rng_state(self.final_evaluation["rng"])
            self.verifier_offset = dict(self.final_evaluation["verifier_stats"])

    # -- when training begins -----------------------------------------------------------------------------------------
    def open_folder(self, config: Any) -> None:
        """Record this start (or resume, with its changes) in ``config_history.jsonl`` and write ``config.json``
        (:func:`~reinforce_ada.runs.folder.prepare_run_folder`); cut ``metrics.jsonl`` back to the checkpoint's step
        (a fresh start begins a new one)."""
        prepare_run_folder(config, self.step, self.changes, resuming=self.checkpoint is not None)
        metrics = Path(config.output_dir) / "metrics.jsonl"
        if self.checkpoint is not None:  # drop lines written after the checkpoint (atomically)
            truncate_metrics(metrics, self.step, keep_final_evaluation=self.final_evaluation is not None)
        elif metrics.exists():
            metrics.unlink()

    # -- at the end -------------------------------------------------------------------------------------------------
    def evaluated_at(self, step: int) -> float | None:
        """The final accuracy this start already holds for ``step`` (a run killed after its final evaluation and
        resumed with nothing more to train), else ``None``."""
        if step == self.step and self.final_evaluation is not None:
            return self.final_evaluation["accuracy"]
        return None

    def checkpoint_at(self, step: int) -> Path | None:
        """The checkpoint already on disk for ``step`` (the one this run started from, when it trains no further),
        else ``None``."""
        return self.checkpoint if step == self.step else None


def decide_start(config: Any) -> StartState:
    """Where the run in ``config.output_dir`` starts: a checkpoint a kill left aside is put back, the folder is
    checked (:func:`~reinforce_ada.runs.folder.check_run_folder`: a folder holding another run refused, the resume
    checkpoint intact, its settings compared), and nothing is created."""
    recover_checkpoints(Path(config.output_dir))
    checkpoint, changes = check_run_folder(config)
    return StartState(checkpoint=checkpoint, changes=changes)
