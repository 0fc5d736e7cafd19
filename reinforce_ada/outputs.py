"""Where a command may write: never onto one of its inputs, and never onto a file a training run wrote.

One rule for every output option of every command (``eval --out``, ``select-prompts --out`` / ``--pass-rates``,
``plot --out``, ``simulate --plot``, ``simulate-multistep --plot`` / ``--json``), checked by
:func:`refuse_unsafe_outputs` before any work. After following symlinks, an output path is refused (a one-line
:class:`~reinforce_ada.errors.UsageError`, exit 2) when it

- is one of the command's input files, or lies inside one of its input folders (the model folder it reads);
- is, or lies inside, what a training run wrote into its folder (:func:`run_file`): ``config.json``,
  ``metrics.jsonl``, ``summary.json``, ``config_history.jsonl``, ``plots/`` and every ``checkpoint-N/`` -- of any
  run, not only the one the command reads;
- is another output of the same command.

A new file in a run folder (``RUN/selected_prompts.jsonl``, ``RUN/eval.jsonl``) is the command's own, not the
run's, and passes. ``replaces`` names the few run files a command exists to rewrite (``plot RUN`` redraws
``RUN/plots/training.png``).

:func:`refuse_existing_outputs` is the second rule, for commands with an ``--overwrite`` option
(``select-prompts``, ``eval --out``): an output that already exists is replaced only when the user says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping

from reinforce_ada.errors import UsageError

__all__ = ["refuse_existing_outputs", "refuse_unsafe_outputs", "run_file", "source_inputs"]


def _real(path: object) -> Path:
    """The path a write would land on: ``~`` expanded, every symlink followed (also a dangling last one)."""
    return Path(os.path.realpath(Path(str(path)).expanduser()))


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)  # hard links too
    return a == b


def _inside(path: Path, folder: Path) -> bool:
    return folder in path.parents


def run_file(path: object, replaces: Iterable[object] = ()) -> tuple[Path, Path] | None:
    """``(entry, run folder)`` when ``path`` is, or lies inside, something a training run wrote (``entry``: the
    file or folder of the run it hits); ``None`` otherwise, and for the paths in ``replaces``."""
    from reinforce_ada.runs.folder import run_entries

    target = _real(path)
    if any(target == _real(r) for r in replaces):
        return None
    for folder in target.parents:
        entries = run_entries(folder)
        if not entries:
            continue
        for entry in entries:
            if target == entry or _inside(target, entry):
                return entry, folder
    return None


def refuse_unsafe_outputs(outputs: Mapping[str, object], inputs: Iterable[tuple[str, object]], *,
                          replaces: Iterable[object] = ()) -> None:
    """Raise :class:`UsageError` for the first output (``{option: path}``; empty or ``None``: none) that the module
    docstring's rule refuses. ``inputs`` are ``(what, path)``: a file, or a folder whose whole content is read;
    paths that do not exist (``task:NAME``, a dataset name) are skipped."""
    replaces = list(replaces)
    known: list[tuple[str, object, Path, bool]] = []
    for name, given in inputs:
        if given and Path(str(given)).expanduser().exists():
            path = _real(given)
            known.append((name, given, path, path.is_dir()))
    for name, given in outputs.items():
        if not given:
            continue
        out = _real(given)
        for other, shown, path, is_dir in known:
            if not is_dir and _same(out, path):
                raise UsageError(f"{name} {given} is the same file as {other} {shown}: an input is never "
                                 f"overwritten; give {name} a new path")
            if is_dir and (out == path or _inside(out, path)):
                raise UsageError(f"{name} {given} lies inside {other} {shown}: an input is never overwritten; give "
                                 f"{name} a path outside it")
        hit = run_file(out, replaces)
        if hit is not None:
            entry, folder = hit
            what = (f"is {entry.name}" if entry == out else
                    f"lies inside {entry.name}/") + f" of the training run in {folder}"
            raise UsageError(f"{name} {given} {what}: a run's own files are never overwritten; give {name} a path "
                             f"outside them")
        known.append((name, given, out, False))


def refuse_existing_outputs(outputs: Mapping[str, object], overwrite: bool, flag: str = "--overwrite") -> None:
    """Raise :class:`UsageError` when an output (``{option: path}``) already exists and ``overwrite`` is false."""
    if overwrite:
        return
    existing = [(name, given) for name, given in outputs.items() if given and Path(str(given)).expanduser().exists()]
    if existing:
        listed = " and ".join(f"{name} {given}" for name, given in existing)
        raise UsageError(f"{listed} already exist{'s' if len(existing) == 1 else ''} (an earlier output?): pass "
                         f"{flag} to replace {'it' if len(existing) == 1 else 'them'}, or give another path")


def source_inputs(source: object) -> list[tuple[str, object]]:
    """What a command reading a located model (:class:`~reinforce_ada.runs.source.ModelSource`) takes in:
    its model folder, and for a run the files the run was trained and evaluated on."""
    if source is None:
        return []
    found: list[tuple[str, object]] = [("the model folder", getattr(source, "model_dir", None))]
    config = getattr(source, "config", None)
    if config is not None:
        found += [("the run's --data", config.data), ("the run's --eval-data", config.eval_data),
                  ("the run's --sampler.memory.seed", config.sampler.memory.seed)]
    return found
