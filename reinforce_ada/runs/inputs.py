"""Every input of a run, fingerprinted: what a checkpoint records of what the run read, and the check on resume.

A run reads, besides its settings:

============================  ==========================================================  ===========================
input                         fingerprint                                                 changed on ``--resume``
============================  ==========================================================  ===========================
the training prompts          row count and SHA-256 of every prompt's id, text and answer  refused [#]_
the held-out prompts          the same, of the prompts the run reports accuracy on         refused [#]_
                              (``--eval-data``, or the task's test split)
the start model's weights     SHA-256 of every tensor (name, dtype, shape, bytes) as the   refused [#]_; with
                              model loaded, whatever it was loaded from                     ``kl_coef`` always [#]_
the memory seed file          size and SHA-256 of ``--sampler.memory.seed``                refused, always [#]_
the reward module's source    SHA-256 of the ``module:function`` module's file, when it    a warning, recorded
                              is a local file (not an installed package)
============================  ==========================================================  ===========================

.. [#] unless ``--force-resume-changes``, which records the change in ``config_history.jsonl``.
.. [#] the KL term's reference is the start model: a resume never continues against another one.
.. [#] the file seeds the memory at step 0 only; a resumed memory is the checkpoint's, so a forced change could not
       apply (:data:`reinforce_ada.runs.folder.NOT_FORCEABLE`).

A command that reads a run without resuming it (``eval RUN``) compares what it reads through
:func:`changed_since` and says what changed, one line each.

The prompts are fingerprinted as read (so a task, a file or another format holding the same rows is the same input);
files by their bytes. The trainer records them in every checkpoint (``trainer_state.json``: ``data`` and ``inputs``)
and compares them on resume through :meth:`reinforce_ada.runs.resume.StartState.check_inputs`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sysconfig
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.errors import RunFolderError
from reinforce_ada.runs.files import file_sha256
from reinforce_ada.types import Prompt

__all__ = ["changed_since", "check_inputs", "file_fingerprint", "input_files", "prompts_fingerprint", "recorded_inputs",
           "reward_source_file", "weights_fingerprint"]

WARN_ONLY = frozenset({"reward_source"})
"""Inputs whose change is warned about and recorded, never refused (a reward module edited between a run and its
resume is often a fix; the warning says the rewards may differ)."""


def prompts_fingerprint(prompts: Sequence[Prompt]) -> dict[str, Any]:
    """The row count and a SHA-256 of every prompt's id, text and answer (in order)."""
    digest = hashlib.sha256()
    for p in prompts:
        digest.update(json.dumps([p.prompt_id, p.prompt, p.answer], sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return {"rows": len(prompts), "sha256": digest.hexdigest()}


def weights_fingerprint(model: Any) -> dict[str, Any]:
    """A SHA-256 of every tensor of ``model``'s state dict: its name, dtype, shape and bytes (as loaded, so a hub
    model, a local folder, a run's checkpoint and the built-in tiny model are fingerprinted alike)."""
    import torch

    digest = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        tensor = state[name].detach()
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return {"tensors": len(state), "sha256": digest.hexdigest()}


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """A file's path, size and SHA-256 (``sha256: None`` when it is missing)."""
    path = Path(path)
    if not path.is_file():
        return {"path": str(path), "bytes": None, "sha256": None}
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def reward_source_file(verifier: str | None) -> Path | None:
    """The source file of a ``module:function`` reward function's module when it is a local file -- not part of
    the standard library or an installed package -- else ``None``."""
    if not verifier or ":" not in verifier:
        return None
    module = verifier.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return None
    origin = Path(spec.origin).resolve()
    installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    if any(folder == origin.parent or folder in origin.parents for folder in installed):
        return None
    return origin


def input_files(config: Any) -> dict[str, dict[str, Any]]:
    """The fingerprints of the files a run reads by path (the memory seed; a local reward module's source)."""
    found = {}
    if config.sampler.memory.seed:
        found["memory_seed"] = file_fingerprint(config.sampler.memory.seed)
    source = reward_source_file(config.verifier)
    if source is not None:
        found["reward_source"] = file_fingerprint(source)
    return found


_WHAT = {
    "data": "the training data ({data})",
    "held_out": "the held-out prompts ({held_out})",
    "model": "the start model's weights (--model {model})",
    "memory_seed": "the memory seed file (--sampler.memory.seed {memory_seed})",
    "reward_source": "the reward function's source file ({reward_source})",
}


def _describe(name: str, config: Any, saved: dict[str, Any]) -> str:
    sources = {"data": config.data or f"task {config.task}",
               "held_out": f"--eval-data {config.eval_data}" if config.eval_data else f"task {config.task}, test split",
               "model": config.model, "memory_seed": config.sampler.memory.seed,
               "reward_source": saved.get("path")}
    return _WHAT[name].format(**sources)


def _summary(fingerprint: dict[str, Any]) -> str:
    if "rows" in fingerprint:
        rows = fingerprint["rows"]
        return f"{rows} row{'' if rows == 1 else 's'} with SHA-256 {fingerprint['sha256'][:12]}..."
    if fingerprint.get("sha256") is None:
        return "missing"
    if "tensors" in fingerprint:
        return f"{fingerprint['tensors']} tensors with SHA-256 {fingerprint['sha256'][:12]}..."
    return f"{fingerprint['bytes']} bytes with SHA-256 {fingerprint['sha256'][:12]}..."


def _same(saved: dict[str, Any], now: dict[str, Any]) -> bool:
    return {k: v for k, v in saved.items() if k != "path"} == {k: v for k, v in now.items() if k != "path"}


def recorded_inputs(state: dict[str, Any]) -> dict[str, Any]:
    """The fingerprints a checkpoint's ``trainer_state.json`` (``state``) recorded, by input name."""
    return {"data": state.get("data"), **(state.get("inputs") or {})}


def _changes(checkpoint: Path, saved: dict[str, Any], now: dict[str, Any], config: Any) -> dict[str, str]:
    """A line for each input of ``now`` whose fingerprint differs from ``saved`` (what ``checkpoint`` recorded; an
    input it did not record is not compared), by input name."""
    lines = {}
    for name, fingerprint in now.items():
        before = saved.get(name)
        if before is not None and not _same(before, fingerprint):
            lines[name] = (f"{_describe(name, config, before)} changed since {checkpoint} was written: "
                           f"{_summary(before)} then, {_summary(fingerprint)} now")
    return lines


def check_inputs(checkpoint: Path, saved: dict[str, Any], now: dict[str, Any], config: Any
                 ) -> tuple[dict[str, tuple[Any, Any]], list[str]]:
    """Compare the fingerprints ``now`` with those ``checkpoint`` recorded (``saved``; an input it did not record
    is not checked). Returns the changes to record (``{name: (then, now)}``) and the warnings to print; a change
    that is refused raises :class:`RunFolderError` naming the input, its fingerprints then and now, and the way out."""
    changes, warnings = {}, []
    for name, change in _changes(checkpoint, saved, now, config).items():
        if name in WARN_ONLY:
            warnings.append(f"{change}; its rewards may differ from the run's so far (recorded in "
                            f"config_history.jsonl)")
        elif name == "model" and config.kl_coef > 0:
            raise RunFolderError(f"--resume: {change}; with kl_coef {config.kl_coef:g} the KL term's reference is "
                                 f"the start model, so the run cannot continue on other weights: put the original "
                                 f"weights back, or start a new run in another --output-dir")
        elif name == "memory_seed":
            raise RunFolderError(f"--resume: {change}; the file seeded the pass-rate memory at step 0 and the "
                                 f"checkpoint holds what the memory learned since, so a resume cannot apply it (not "
                                 f"even with --force-resume-changes): put the original back, or start a new run in "
                                 f"another --output-dir")
        elif not config.force_resume_changes:
            raise RunFolderError(f"--resume: {change}; put the original back, pass --force-resume-changes to continue "
                                 f"with it as it is now (recorded in config_history.jsonl), or use another "
                                 f"--output-dir")
        else:
            warnings.append(f"--force-resume-changes: {change}")
        changes[name] = (saved[name], now[name])
    return changes, warnings


def changed_since(checkpoint: Path, now: dict[str, dict[str, Any]], config: Any) -> dict[str, str]:
    """A line for each input of ``now`` whose fingerprint differs from the one ``checkpoint`` recorded, by input
    name (an input it did not record, or a checkpoint whose state cannot be read, is not compared): for a command
    that reads a run's inputs again without resuming it, so that it can say it is not reading what the run read."""
    from reinforce_ada.errors import CheckpointError
    from reinforce_ada.runs.intact import read_trainer_state

    try:
        state = read_trainer_state(checkpoint)
    except CheckpointError:
        return {}
    saved = {name: value for name, value in recorded_inputs(state).items() if isinstance(value, dict)}
    return _changes(checkpoint, saved, now, config)
