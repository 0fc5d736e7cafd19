"""The run folder: nothing a user made is overwritten or mixed, and every file in it describes one run.

- :func:`check_run_folder` runs before anything loads. A folder that already holds a run (``config.json``,
  ``metrics.jsonl``, ``summary.json``, ``checkpoint-*``, ...) is refused unless ``resume`` (continue it) or
  ``overwrite`` (delete that run's files, then start afresh) is given -- except a run that stopped before its first
  training step (:func:`stopped_before_first_step`), which blocks nothing: a new start replaces it. ``resume`` validates the latest checkpoint (its
  ``trainer_state.json``, the step in it, the safetensors headers, agreement with ``metrics.jsonl``), names the bad
  file and the previous intact checkpoint when it is corrupt, and refuses settings that differ from the checkpoint's
  (seed, strategy, learning rate, batch size, ... -- every field outside :data:`RESUMABLE_CHANGES`) unless
  ``force_resume_changes`` is given -- and even then those a resume could not apply (:data:`NOT_FORCEABLE`).
- :func:`prepare_run_folder` runs when training starts (so a failed start leaves no empty folder): it deletes the old
  run for ``overwrite``, removes stale ``.tmp-checkpoint-*`` folders of killed runs, and appends the start (or the
  resume and its changed settings) to ``config_history.jsonl``; a run that stops adds why (:func:`record_event`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reinforce_ada.errors import CheckpointError, RunFolderError
from reinforce_ada.runs.files import write_atomic
from reinforce_ada.runs.intact import check_checkpoint_files, checkpoints, unusable
from reinforce_ada.runs.manifest import MANIFEST, listed_files, unlisted_files
from reinforce_ada.runs.metrics_file import check_metrics_agree

logger = logging.getLogger(__name__)

RUN_FILES = ("config.json", "config_history.jsonl", "metrics.jsonl", "summary.json", "strata.json", "held_out.jsonl",
             "plots", "tensorboard", "wandb")
"""Files and folders a training run writes into its folder (besides ``checkpoint-*``)."""


RESUMABLE_CHANGES = frozenset({
    "max_steps", "report_to", "save_steps",
    "eval_steps", "device", "num_threads", "verifier_timeout", "max_verifier_failure_rate", "micro_batch_size",
    "generation_batch_size", "base_url", "served_model", "server_dead_after"})
"""Fields a resumed run may change without ``force_resume_changes``: they change how long it runs, where it reports,
how work is chunked or where its server runs, not what it learns. Changes are still recorded in
``config_history.jsonl``."""


NOT_FORCEABLE = {
    "seed": "the random generators and the order of the prompts continue from the checkpoint's state, which a new "
            "seed would not reach",
    "sampler.memory.seed": "the file seeded the pass-rate memory at step 0, and the checkpoint holds what the memory "
                           "has learned since",
    "sft_max_steps": "the warm start ran before step 0; the checkpoint's weights replace its result",
    "sft_target_accuracy": "the warm start ran before step 0; the checkpoint's weights replace its result",
    "sft_seed": "the warm start ran before step 0; the checkpoint's weights replace its result",
    "eval_strata_samples": "the held-out prompts' difficulty strata were fixed before step 0 and the checkpoint keeps "
                           "them",
    "eval_strata_hard_max": "the held-out prompts' difficulty strata were fixed before step 0 and the checkpoint "
                            "keeps them",
    "eval_strata_medium_max": "the held-out prompts' difficulty strata were fixed before step 0 and the checkpoint "
                              "keeps them",
}
"""Settings whose value lives only in what a checkpoint restores, so that a resume cannot apply a new one: refused by
name even with ``force_resume_changes``, with why. Every other setting a forced resume changes is applied: the
checkpoint brings back counts (weights, the optimizer's moments, the schedule's step, the memory's evidence), the
config the parameters (the learning rate and weight decay: ``training.setup.apply_optimizer_settings``; a memory's
decay, prior and cap: ``PassRateMemory.load_state_dict``)."""


_RUN_CONTROL = frozenset({"resume", "overwrite", "force_resume_changes", "accept_unverified_checkpoint",
                          "output_dir"})
"""How a run was started, not a setting of the run: never compared or recorded as a change."""


def _json_keys(path: Path) -> set[str]:
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return set()
    return set(value) if isinstance(value, dict) else set()


def _written_by_a_run(path: Path) -> bool:
    """``config.json`` / ``summary.json`` / ``plots`` count only when the trainer wrote them (a user's own
    ``config.json`` is never deleted by ``overwrite``; see :func:`check_run_folder`)."""
    if path.name == "config.json":
        keys = _json_keys(path)  # this version's nested sampler section, or an earlier version's flat fields
        return {"strategy", "output_dir"} <= keys and bool({"sampler", "samples_per_round"} & keys)
    if path.name == "summary.json":
        return {"total_samples", "steps", "accuracy_after"} <= _json_keys(path)
    if path.name == "plots":
        return (path / "training.png").is_file()
    return True


_PARTIAL_CHECKPOINT = re.compile(r"\.(tmp|old)-checkpoint-\d+-\d+")
"""A checkpoint being written (``.tmp-checkpoint-STEP-PID``) or replaced (``.old-checkpoint-STEP-PID``)."""


def _run_checkpoint(path: Path) -> bool:
    """A ``checkpoint-N`` folder the trainer wrote: it holds the trainer's state or a manifest (a checkpoint gets its
    name only once complete)."""
    return (path / "trainer_state.json").is_file() or (path / MANIFEST).is_file()


def run_entries(folder: Path) -> list[Path]:
    """What in ``folder`` a training run wrote (empty for a folder that holds none): its files (:data:`RUN_FILES`,
    ``config.json`` and ``summary.json`` only when a run wrote them), its ``checkpoint-N`` folders and those a kill
    left half-written or aside -- never a user's ``checkpoint-best/`` or ``checkpoint-notes.txt``."""
    if not folder.is_dir():
        return []
    named = [folder / name for name in RUN_FILES if (folder / name).exists() and _written_by_a_run(folder / name)]
    partial = sorted(p for p in folder.iterdir() if p.is_dir() and _PARTIAL_CHECKPOINT.fullmatch(p.name))
    return named + [c for c in checkpoints(folder) if _run_checkpoint(c)] + partial


def _trained_steps(metrics: Path) -> int | None:
    """The highest step ``metrics.jsonl`` records (0 when absent or empty: an evaluation before training is step 0);
    ``None`` when it cannot be read (then the run is taken to have trained)."""
    if not metrics.exists():
        return 0
    try:
        steps = [json.loads(line).get("step", 0) for line in metrics.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return max([int(s) for s in steps if isinstance(s, (int, float))], default=0)


def stopped_before_first_step(folder: Path) -> bool:
    """Whether the run in ``folder`` stopped before its first training step: it wrote its start (``config.json``,
    ``config_history.jsonl``, perhaps step 0's evaluation) but no training step, no checkpoint and no summary. Such a
    run blocks nothing: a new start replaces it (there is nothing to resume)."""
    entries = run_entries(folder)
    names = {e.name for e in entries}
    return (bool(entries) and not any(e.name.startswith(("checkpoint-", ".tmp-checkpoint-", ".old-checkpoint-"))
                                      for e in entries)
            and "summary.json" not in names and _trained_steps(folder / "metrics.jsonl") == 0)


def _not_the_runs(folder: Path, overwrite: bool) -> list[tuple[Path, str]]:
    """What a start in ``folder`` would replace or delete although no run wrote it, with why: a user's
    ``config.json`` or ``summary.json`` (a run writes its own), a ``checkpoint-N`` folder no run wrote (a run
    replaces the checkpoint of its step), and with ``overwrite`` a file inside a run's checkpoint that its manifest
    does not list."""
    found = [(folder / name, "a run would overwrite it") for name in ("config.json", "summary.json")
             if (folder / name).is_file() and not _written_by_a_run(folder / name)]
    found += [(c, "a run would replace it") for c in checkpoints(folder) if not _run_checkpoint(c)]
    if overwrite:
        found += [(path, f"--overwrite would delete it: it is not in {path.parent.name}'s {MANIFEST}")
                  for c in checkpoints(folder) if _run_checkpoint(c) for path in unlisted_files(c)]
    return found


def _run_inputs(config: Any) -> list[tuple[str, str]]:
    """The paths a run reads, by option (``--model`` may be a run folder or a checkpoint)."""
    given = [("--model", config.model), ("--data", config.data), ("--eval-data", config.eval_data),
             ("--sampler.memory.seed", config.sampler.memory.seed)]
    return [(flag, value) for flag, value in given if value and Path(value).expanduser().exists()]


def _refuse_overwriting_inputs(config: Any, folder: Path, entries: list[Path]) -> None:
    """``overwrite`` never deletes what the new run reads: a start model, data or seed file inside the old run
    (``train --model RUN --output-dir RUN --overwrite``) is refused in one line."""
    real = [Path(os.path.realpath(e)) for e in entries]
    for flag, given in _run_inputs(config):
        path = Path(os.path.realpath(Path(given).expanduser()))
        if path == Path(os.path.realpath(folder)) or any(path == e or e in path.parents for e in real):
            raise RunFolderError(f"--overwrite would delete the run in {folder}, which {flag} {given} reads (the new "
                                 f"run would start from what it deletes); copy it out of {folder} first, or choose "
                                 f"another --output-dir")


_DERIVED = frozenset({"sampler.seed"})
"""Set from another field (the trainer's ``seed``), which is compared itself."""


def _dotted(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config's nested sections flattened to dotted names (``sampler.streaming.target``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def resume_changes(saved: dict[str, Any], config: Any) -> dict[str, tuple[Any, Any]]:
    """Fields whose value differs from the checkpoint's config: ``{name: (saved, now)}``, sections' fields by
    dotted name."""
    now, before = _dotted(asdict(config)), _dotted(saved)
    return {k: (before[k], now[k]) for k in now
            if k in before and before[k] != now[k] and k not in _RUN_CONTROL and k not in _DERIVED}


def run_settings(folder: Path) -> dict[str, Any]:
    """The settings the run in ``folder`` trained with, as its newest checkpoint holds them (dotted names), less how
    it was started (:data:`_RUN_CONTROL`) and what is derived (:data:`_DERIVED`); empty when there is none to read (no
    checkpoint, an unreadable state, an earlier version's flat config: :func:`check_run_folder` names each)."""
    found = checkpoints(folder)
    if not found:
        return {}
    try:
        saved = json.loads((found[-1] / "trainer_state.json").read_text())["config"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(saved, dict) or not isinstance(saved.get("sampler"), dict):
        return {}
    return {k: v for k, v in _dotted(saved).items() if k not in _RUN_CONTROL and k not in _DERIVED}


def resume_settings(given: dict[str, Any]) -> dict[str, Any]:
    """What ``train --resume`` builds its config from: the run's own settings (:func:`run_settings` of
    ``output_dir``), with what was given (``given``: the ``--config`` file's and the options' settings, nested) on
    top, so a resume continues the run as it was configured and changes only what is given -- each change then
    checked by :func:`check_run_folder` as before. A strategy given in place of the run's brings its own sampler
    settings: none of the run's ``sampler`` section is kept then (a strategy is a preset of it)."""
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.config.loading import settings_over

    saved = run_settings(Path(given.get("output_dir", TrainConfig.output_dir)).expanduser())
    if "strategy" in given and given["strategy"] != saved.get("strategy"):
        saved = {k: v for k, v in saved.items() if not k.startswith("sampler.")}
    return settings_over(TrainConfig, saved, given)


def check_config_format(latest: Path, saved: dict[str, Any]) -> None:
    """A checkpoint written before the sampler settings moved into the ``sampler`` section (flat ``group_size``,
    ``streaming_target``, ``sampler: rounds``, ...) cannot be compared setting by setting: refused, saying so."""
    if not isinstance(saved.get("sampler"), dict):
        raise RunFolderError(f"--resume: {latest} was written by an earlier version of reinforce-ada, whose config "
                             f"holds the sampler's settings flat (no `sampler` section); this version cannot resume "
                             f"it. Finish that run with the version that started it, or start a new run here "
                             f"(--overwrite) or in another --output-dir")


def no_run_to_resume(folder: Path) -> RunFolderError:
    """The error for ``--resume`` of a folder that holds no run (a mistyped name would otherwise train a whole new
    run): it names the folder and, when there is one, the run folder beside it whose name is closest."""
    import difflib

    parent = folder.parent if str(folder.parent) else Path(".")
    runs = [child.name for child in (sorted(parent.iterdir()) if parent.is_dir() else [])
            if child.is_dir() and child != folder and checkpoints(child)]
    close = difflib.get_close_matches(folder.name, runs, n=1, cutoff=0.6)
    if close:
        hint = f"; did you mean --output-dir {parent / close[0]}?"
    else:
        hint = (f"; the run folders beside it: {', '.join(str(parent / name) for name in runs[:3])}"
                + (", ..." if len(runs) > 3 else "")) if runs else ""
    return RunFolderError(f"--resume: {folder} holds no run to resume{hint} (to start a new run there, leave out "
                          f"--resume)")


def check_run_folder(config: Any) -> tuple[Path | None, dict[str, tuple[Any, Any]]]:
    """Validate the run folder before anything loads; return the checkpoint to resume from and the changed fields.

    Creates nothing (see :func:`prepare_run_folder`).
    """
    folder = Path(config.output_dir)
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"output_dir {folder} is a file, not a folder")
    entries = run_entries(folder)
    foreign = _not_the_runs(folder, overwrite=config.overwrite and not config.resume)
    if foreign:
        path, why = foreign[0]
        raise RunFolderError(f"{path} was not written by a training run, and {why}; move it out of {folder} first, "
                             f"or choose another --output-dir")
    names = ", ".join(e.name for e in entries[:6]) + (", ..." if len(entries) > 6 else "")
    if not config.resume:
        if entries and not config.overwrite and not stopped_before_first_step(folder):
            raise RunFolderError(f"{folder} already holds a run ({names}); pass --resume to continue it, --overwrite "
                                 f"to delete it and start over, or choose another --output-dir")
        _refuse_overwriting_inputs(config, folder, entries)
        return None, {}
    found = checkpoints(folder)
    if not found:
        if any(not e.name.startswith(".tmp-checkpoint-") for e in entries):
            raise RunFolderError(f"--resume: {folder} holds a run ({names}) but no checkpoint to resume from; pass "
                                 f"--overwrite instead of --resume to start it over")
        raise no_run_to_resume(folder)
    latest = found[-1]
    try:
        state = check_checkpoint_files(latest, config.accept_unverified_checkpoint)
        check_metrics_agree(folder, latest, state)
    except CheckpointError as err:
        raise unusable(latest, str(err)) from None
    check_config_format(latest, state["config"])
    if config.max_steps < state["step"]:  # the loop would not run, and the summary and config.json would disagree
        raise RunFolderError(f"--resume: {latest} is at step {state['step']}, past --max-steps {config.max_steps}; a "
                             f"run cannot go back: give --max-steps {state['step']} or more (the same number finishes "
                             f"a run a kill cut short), or --overwrite to start over")
    changes = resume_changes(state["config"], config)
    guarded = {k: v for k, v in changes.items() if k not in RESUMABLE_CHANGES}
    fixed = [k for k in guarded if k in NOT_FORCEABLE]
    if fixed and config.force_resume_changes:
        name = fixed[0]
        old, new = guarded[name]
        raise RunFolderError(f"--resume cannot change {name} ({old!r} -> {new!r}), not even with "
                             f"--force-resume-changes: {NOT_FORCEABLE[name]}; keep {old!r}, or start a new run with "
                             f"it in another --output-dir")
    if guarded and not config.force_resume_changes:
        listed = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in guarded.items())
        raise RunFolderError(f"--resume would continue {latest} with changed settings ({listed}), mixing two runs in "
                             f"{folder}; keep the checkpoint's values, pass --force-resume-changes to continue anyway "
                             f"(recorded in config_history.jsonl), or use another --output-dir")
    if config.accept_unverified_checkpoint and not listed_files(latest):
        changes["checkpoint_manifest"] = (f"{latest / MANIFEST} missing or empty", "resumed unverified "
                                          "(--accept-unverified-checkpoint)")
    return latest, changes


def prepare_run_folder(config: Any, step: int, changes: dict[str, tuple[Any, Any]], resuming: bool) -> None:
    """Create the folder (deleting the old run first for ``overwrite``), remove stale temporary checkpoints, write
    ``config.json`` and append this start to ``config_history.jsonl``."""
    folder = Path(config.output_dir)
    unstarted = not config.resume and stopped_before_first_step(folder)
    if not config.resume and not config.overwrite and run_entries(folder) and not unstarted:  # started meanwhile
        raise RunFolderError(f"{folder} now holds a run ({', '.join(e.name for e in run_entries(folder)[:6])}) that "
                             f"appeared while this one was starting; nothing was written")
    if (config.overwrite or unstarted) and not config.resume:
        for entry in run_entries(folder):
            if entry.name == "plots":  # only the trainer's plot; the folder goes if nothing else is in it
                (entry / "training.png").unlink()
                if not any(entry.iterdir()):
                    entry.rmdir()
            elif entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if config.overwrite:
            logger.info("--overwrite: deleted the previous run in %s", folder)
        else:
            logger.info("replaced the run in %s that stopped before its first step (no training step, no "
                        "checkpoint)", folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [p for p in folder.iterdir() if p.is_dir() and _PARTIAL_CHECKPOINT.fullmatch(p.name)]:
        shutil.rmtree(stale, ignore_errors=True)
        logger.info("removed %s, left by a run that was killed while saving", stale)
    values = asdict(config)
    if resuming:
        event = {"event": "resume", "step": step, "changed": {k: list(v) for k, v in changes.items()},
                 "forced": bool(config.force_resume_changes)}
        for name, (old, new) in changes.items():
            logger.warning("resuming with %s changed: %r -> %r (recorded in config_history.jsonl)", name, old, new)
    else:
        event = {"event": "start", "step": step, "config": values}
    record_event(config, event)
    write_atomic(folder / "config.json", json.dumps(values, indent=2))


def record_event(config: Any, event: dict[str, Any]) -> None:
    """Append ``event`` (with the time) to the run's ``config_history.jsonl``: starts, resumes and stops."""
    history = Path(config.output_dir) / "config_history.jsonl"
    previous = history.read_text() if history.exists() else ""
    event = {**event, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_atomic(history, previous + json.dumps(event) + "\n")


def last_change(folder: Path, name: str) -> int | None:
    """The step at which a resume last changed the run's setting or input ``name`` (``held_out``, ``data``,
    ``learning_rate``, ...), from ``config_history.jsonl``; ``None`` when none did."""
    history = folder / "config_history.jsonl"
    events = [json.loads(line) for line in history.read_text().splitlines()] if history.exists() else []
    steps = [e.get("step") for e in events if e.get("event") == "resume" and name in e.get("changed", {})]
    return steps[-1] if steps else None

