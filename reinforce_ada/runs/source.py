"""What a command that takes a model was pointed at: a model folder, a checkpoint, or a whole run.

``eval``, ``select-prompts`` and ``train --model`` accept any of the three and find the model the same way
(:func:`locate_model`):

- a **model folder** (``config.json`` and the weights, e.g. ``runs/default/checkpoint-100/model``): itself;
- a **checkpoint** (``checkpoint-N/`` with ``model/`` inside): its ``model/``;
- a **run folder** (``checkpoint-*/`` inside): the newest checkpoint whose files are intact
  (:func:`~reinforce_ada.runs.intact.check_checkpoint_files`); a newer, damaged one is skipped with a warning
  that names it.

A folder that is none of these but holds one a level down (``runs/`` holding runs, a checkpoint's parent's parent,
...) is refused with the path to give instead; so is a file inside a model folder. When the model belongs to a run
(a checkpoint or the model folder of one), :attr:`ModelSource.config` is the run's :class:`TrainConfig`, read from
the checkpoint's ``trainer_state.json`` (what that checkpoint was trained with), so a command can default to the
run's own task, ``max_new_tokens``, chat template, verifier and held-out prompts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinforce_ada.errors import UsageError

logger = logging.getLogger(__name__)

__all__ = ["ModelSource", "add_model_arguments", "is_model_folder", "locate_model", "model_from_arguments",
           "run_defaults"]


@dataclass(frozen=True)
class ModelSource:
    """Where :func:`locate_model` found the model, and the run it belongs to (``None`` for a bare model folder)."""

    given: str
    model_dir: Path
    checkpoint: Path | None = None
    run_dir: Path | None = None
    config: Any = None  # the run's TrainConfig

    def describe(self) -> str:
        """``runs/default/checkpoint-100/model (step 100 of run runs/default)``, or the model folder alone."""
        if self.checkpoint is None:
            return str(self.model_dir)
        return f"{self.model_dir} (step {self.checkpoint.name.removeprefix('checkpoint-')} of run {self.run_dir})"


def is_model_folder(path: Path) -> bool:
    """A folder holding a transformers model: its ``config.json`` (and not a training run's ``config.json``)."""
    from reinforce_ada.runs.folder import run_entries

    config = path / "config.json"
    return config.is_file() and config not in run_entries(path)


def _is_checkpoint(path: Path) -> bool:
    from reinforce_ada.runs.intact import checkpoints

    return path in checkpoints(path.parent) and is_model_folder(path / "model")


def locate_model(name: str, flag: str = "--model") -> ModelSource | None:
    """The model that ``name`` points at (see the module docstring); ``None`` when ``name`` is no local folder or file
    (a hub id, a built-in name or a missing path: the caller decides). Anything else that is not a model is a
    :class:`UsageError` naming ``flag`` and the path to give instead."""
    path = Path(name).expanduser()
    if path.is_file():
        hint = f"; give the folder that holds it: {flag} {path.parent}" if is_model_folder(path.parent) else ""
        raise UsageError(f"{flag} {name} is a file, not a model folder{hint}")
    if not path.is_dir():
        return None
    from reinforce_ada.runs.intact import checkpoints

    if checkpoints(path):
        return _from_checkpoint(name, _latest_intact(path, flag))
    if _is_checkpoint(path):
        return _from_checkpoint(name, path)
    if is_model_folder(path):
        parent = path.parent
        if path.name == "model" and _is_checkpoint(parent):
            return _from_checkpoint(name, parent)
        return ModelSource(name, path)
    from reinforce_ada.runs.folder import run_entries

    if run_entries(path):
        raise UsageError(f"{flag} {name} holds a run but no checkpoint yet (the trainer writes one when it ends, and "
                         f"every --save-steps steps)")
    raise UsageError(_one_level_off(name, path, flag))


def add_model_arguments(parser: Any, required: bool = True) -> None:
    """A command's model, given as ``RUN`` (positional) or ``--model``: a run folder, a checkpoint or a model folder.
    ``required=False``: the command has other sources too (``select-prompts --tiny``, ``--base-url``)."""
    what = "a run folder (its newest complete checkpoint), a checkpoint folder or a model folder"
    parser.add_argument("run", nargs="?", default=None, metavar="RUN",
                        help=f"the model: {what}; a run's own settings and prompts are the defaults")
    parser.add_argument("--model", default=None, metavar="PATH", help=f"the same as RUN: {what}"
                        + ("" if required else " (or a model the command builds otherwise, below)"))


def model_from_arguments(args: Any, required: bool = True) -> ModelSource | None:
    """The model of :func:`add_model_arguments`' options, located; a path that holds no model is a one-line error.
    ``None`` when neither is given and ``required`` is false."""
    given = [value for value in (args.run, args.model) if value is not None]
    if len(given) == 2 and Path(given[0]) != Path(given[1]):
        raise UsageError(f"RUN {args.run} and --model {args.model} name two models; give one")
    if not given:
        if required:
            raise UsageError("give the model to use: a run folder, a checkpoint or a model folder (RUN or --model)")
        return None
    flag = "--model" if args.model is not None else "RUN"
    source = locate_model(given[0], flag)
    if source is None:
        raise UsageError(f"{flag} {given[0]} does not exist (a run folder, a checkpoint or a model folder)")
    return source


def run_defaults(args: Any, source: ModelSource | None, defaults: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Each setting of ``defaults`` (an option's ``dest`` -> its value when neither the option nor a run gives one):
    the option when given (not ``None``), else the run's config field of the same name, else the default. Returns
    the settings and the ``name=value`` texts taken from the run."""
    config = source.config if source is not None else None
    settings, from_run = {}, []
    for name, default in defaults.items():
        value = getattr(args, name, None)
        if value is None and config is not None:
            value = getattr(config, name)
            from_run.append(f"{name}={value}")
        settings[name] = default if value is None else value
    return settings, from_run


def _latest_intact(run_dir: Path, flag: str) -> Path:
    from reinforce_ada.errors import CheckpointError
    from reinforce_ada.runs.intact import check_checkpoint_files, checkpoints

    problems = []
    for checkpoint in reversed(checkpoints(run_dir)):
        try:
            check_checkpoint_files(checkpoint)
            if not is_model_folder(checkpoint / "model"):
                raise CheckpointError(f"{checkpoint / 'model' / 'config.json'} is missing")
        except CheckpointError as err:
            problems.append(f"{checkpoint.name}: {err}")
            continue
        for problem in problems:
            logger.warning("skipping an incomplete checkpoint of %s (%s); using %s", run_dir, problem,
                           checkpoint.name)
        return checkpoint
    raise UsageError(f"{flag} {run_dir}: the run holds no complete checkpoint ({'; '.join(problems)})")


def _from_checkpoint(given: str, checkpoint: Path) -> ModelSource:
    return ModelSource(given, checkpoint / "model", checkpoint, checkpoint.parent, _run_config(checkpoint))


def _run_config(checkpoint: Path) -> Any:
    """The run's TrainConfig from the checkpoint's ``trainer_state.json``; ``None`` (with a warning) when it cannot
    be rebuilt (written by another version), so the command falls back to its own defaults."""
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.errors import UserError
    from reinforce_ada.runs.intact import read_trainer_state

    saved = read_trainer_state(checkpoint).get("config")
    try:
        return TrainConfig(**saved)
    except (UserError, TypeError) as err:
        logger.warning("%s: its run settings cannot be read by this version (%s); using the command's defaults",
                       checkpoint, err)
        return None


def _one_level_off(name: str, path: Path, flag: str) -> str:
    """The message for a folder that holds no model: which folder below it does, if one does."""
    below = sorted(child for child in path.iterdir() if child.is_dir() and (
        is_model_folder(child) or _is_checkpoint(child) or _has_checkpoints(child)))
    if len(below) == 1:
        return f"{flag} {name} holds no model itself, but {below[0]} does: give {flag} {below[0]}"
    if below:
        listed = ", ".join(str(child) for child in below[:4]) + (", ..." if len(below) > 4 else "")
        return f"{flag} {name} holds no model itself, but the folders in it do ({listed}): give one of them"
    return (f"{flag} {name} is not a model folder (no config.json), a checkpoint (checkpoint-N/model/) or a run "
            f"folder (checkpoint-*/ inside)")


def _has_checkpoints(path: Path) -> bool:
    from reinforce_ada.runs.intact import checkpoints

    return bool(checkpoints(path))
