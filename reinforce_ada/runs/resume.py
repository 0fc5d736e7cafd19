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
hands the state its pieces as it builds them -- :meth:`StartState.check_inputs` (every input's fingerprint:
:mod:`.inputs`), :meth:`StartState.load_weights` (after the KL reference copied the start model),
:meth:`StartState.restore` (once the optimizer and sampler exist) -- and :meth:`StartState.open_folder` when training
begins, when it also asks :meth:`StartState.owes_evaluation` (step 0's evaluation, or one a kill cut short). On a
fresh start each of these does what a fresh start needs, usually nothing. What a resume cannot redo (a log another
sink keeps, a plot a kill left undrawn at a resume with nothing to do) it says in one line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    strata: dict[str, Any] | None = None
    """The held-out prompts' difficulty strata the run fixed before training (``None``: none, or a fresh start)."""

    # -- before the model loads, and once it has -----------------------------------------------------------------
    def check_inputs(self, config: Any, fingerprints: dict[str, dict[str, Any]]) -> None:
        """Compare the run's inputs (``fingerprints``: :mod:`~reinforce_ada.runs.inputs`' names -> fingerprints)
        with those the checkpoint recorded: a changed one is refused unless ``force_resume_changes`` (a changed
        start model with ``kl_coef`` always), a changed reward module only warned about; what is accepted is recorded
        as a change. Called before anything in the folder is rewritten (the training data, the held-out prompts and
        the files before the model loads, the start model's weights once it has, before the checkpoint's replace
        them); a checkpoint that recorded no fingerprint of an input does not have it checked."""
        if self.checkpoint is None:
            return
        from reinforce_ada.runs.inputs import check_inputs, recorded_inputs

        changes, warnings = check_inputs(self.checkpoint, recorded_inputs(read_trainer_state(self.checkpoint)),
                                         fingerprints, config)
        for warning in warnings:
            logger.warning("%s", warning)
        self.changes = {**self.changes, **changes}
        self.data_changed = self.data_changed or "data" in changes

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
        self.strata = state.get("strata")
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
        folder = Path(config.output_dir)
        if self.step >= config.max_steps and (folder / "summary.json").exists():
            self.nothing_to_do = (f"nothing to do: {folder} is already at step {self.step} (max_steps "
                                  f"{config.max_steps}) and finished; give a larger --max-steps to extend it")
            if not (folder / "plots" / "training.png").exists():  # killed (or failed) while drawing it
                self.nothing_to_do += (f" (its plot was not drawn, and a resume does not draw it: reinforce-ada "
                                       f"plot {folder} does)")
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
            dropped = truncate_metrics(metrics, self.step, keep_final_evaluation=self.final_evaluation is not None)
            if dropped and config.report_to != "none":  # what a resume cannot take back: said in one line
                logger.warning("%d metrics lines the interrupted run wrote after step %d are gone from metrics.jsonl "
                               "and will be written again, but its %s log keeps them (it cannot be rewritten)",
                               dropped, self.step, config.report_to)
        elif metrics.exists():
            metrics.unlink()

    def owes_evaluation(self, config: Any) -> bool:
        """Whether the held-out evaluation at this start's step is due and not in the record: step 0's, before
        training, or one a kill cut short -- a finished run's last checkpoint is written before its final
        evaluation, so a run killed during that evaluation (or while recording it) and extended owes the
        evaluation the longer run makes at that step. (A checkpoint written mid-run at an evaluation step holds that
        evaluation already: the run checkpoints after it.)"""
        if any(step == self.step for step, _ in self.accuracy_history):
            return False
        return self.step == 0 or bool(config.eval_steps and self.step % config.eval_steps == 0
                                      and self.step < config.max_steps)

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
