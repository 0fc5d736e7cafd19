"""The run folder: nothing a user made is overwritten or mixed, and every file in it describes one run.

- :func:`check_run_folder` runs before anything loads. A folder that already holds a run (``config.json``,
  ``metrics.jsonl``, ``summary.json``, ``checkpoint-*``, ...) is refused unless ``resume`` (continue it) or
  ``overwrite`` (delete that run's files, then start afresh) is given. ``resume`` validates the latest checkpoint (its
  ``trainer_state.json``, the step in it, the safetensors headers, agreement with ``metrics.jsonl``), names the bad
  file and the previous intact checkpoint when it is corrupt, and refuses settings that differ from the checkpoint's
  (seed, strategy, learning rate, batch size, ... -- every field outside :data:`RESUMABLE_CHANGES`) unless
  ``force_resume_changes`` is given.
- :func:`prepare_run_folder` runs when training starts (so a failed start leaves no empty folder): it deletes the old
  run for ``overwrite``, removes stale ``.tmp-checkpoint-*`` folders of killed runs, and appends the start (or the
  resume and its changed settings) to ``config_history.jsonl``; a run that stops adds why (:func:`record_event`).
- :class:`RunLock` makes one process the only writer of a run folder for the run's life (``fcntl.flock`` on
  ``.lock`` in the folder); a second one is refused with the holder's PID. :func:`recover_checkpoints` puts back a
  checkpoint a kill left renamed aside while it was being replaced.
- :func:`check_manifest` checks every file a checkpoint's ``manifest.json`` lists (size and SHA-256): a bit flip or a
  file from another checkpoint is refused by name.
- :func:`truncate_metrics` cuts ``metrics.jsonl`` back to a checkpoint's step atomically (temporary file + rename).
- :func:`write_atomic` writes a file through a temporary file and names the file in any error (disk full, ...).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from reinforce_ada.errors import UserError

logger = logging.getLogger(__name__)

RUN_FILES = ("config.json", "config_history.jsonl", "metrics.jsonl", "summary.json", "plots", "tensorboard", "wandb")
"""Files and folders a training run writes into its folder (besides ``checkpoint-*``)."""

RESUMABLE_CHANGES = frozenset({
    "max_steps", "report_to", "save_steps",
    "eval_steps", "device", "num_threads", "verifier_timeout", "max_verifier_failure_rate", "micro_batch_size",
    "generation_batch_size", "base_url", "served_model", "server_dead_after"})
"""Fields a resumed run may change without ``force_resume_changes``: they change how long it runs, where it reports,
how work is chunked or where its server runs, not what it learns. Changes are still recorded in
``config_history.jsonl``."""


_RUN_CONTROL = frozenset({"resume", "overwrite", "force_resume_changes", "output_dir"})
"""How a run was started, not a setting of the run: never compared or recorded as a change."""


MANIFEST = "manifest.json"
"""In each checkpoint: the size and SHA-256 of every other file, written last (see :func:`check_manifest`)."""

FINAL_EVALUATION = "final_evaluation.pt"
"""In a finished run's last checkpoint: its final evaluation and the RNG state after it (see
:func:`reinforce_ada.training.checkpoint.add_final_evaluation`)."""

LOCK = ".lock"
"""The run folder's lock file (see :class:`RunLock`); never deleted, so that its lock is always on one file."""


class RunFolderError(UserError, ValueError):
    """The run folder cannot be used as asked (it holds a run, or a resume would mix two runs)."""


class CheckpointError(UserError, ValueError):
    """A checkpoint is missing, corrupt or inconsistent; the message names the file."""


def _checkpoint_step(path: Path) -> int | None:
    suffix = path.name[len("checkpoint-"):]
    return int(suffix) if path.name.startswith("checkpoint-") and suffix.isdigit() else None


def checkpoints(folder: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of a run, oldest first."""
    found = [p for p in Path(folder).glob("checkpoint-*") if p.is_dir() and _checkpoint_step(p) is not None]
    return sorted(found, key=_checkpoint_step)


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


def run_entries(folder: Path) -> list[Path]:
    """What in ``folder`` belongs to a training run (empty for a folder that holds none)."""
    if not folder.is_dir():
        return []
    named = [folder / name for name in RUN_FILES if (folder / name).exists() and _written_by_a_run(folder / name)]
    return (named + sorted(folder.glob("checkpoint-*")) + sorted(folder.glob(".tmp-checkpoint-*"))
            + sorted(folder.glob(".old-checkpoint-*")))


class RunLock:
    """An exclusive ``fcntl.flock`` on ``folder/.lock``, held while a run uses the folder (released by
    :meth:`release` or when the process ends, however it ends). A folder another process (or another trainer of
    this one) holds is refused with the holder's PID; nothing is written into the lock file, so taking it changes
    no file of a run."""

    def __init__(self, folder: Path):
        import fcntl

        if folder.exists() and not folder.is_dir():
            raise RunFolderError(f"output_dir {folder} is a file, not a folder")
        self.folder = folder
        self.created_folder = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / LOCK
        self.created_lock = not path.exists()
        self._fh = path.open("a")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            self._fh.close()
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = lock_holder(path)
            raise RunFolderError(f"{folder} is in use by another training run ({holder} holds {path}); wait for it to "
                                 f"finish or choose another --output-dir") from None

    def release(self, remove_if_unused: bool = False) -> None:
        """Unlock; with ``remove_if_unused`` (a failed start) the lock file this lock created goes when the folder
        holds no run, and the folder too when this lock created it and nothing else is in it."""
        if self._fh.closed:
            return
        if remove_if_unused and self.created_lock and not run_entries(self.folder):
            (self.folder / LOCK).unlink(missing_ok=True)
            if self.created_folder and not any(self.folder.iterdir()):
                self.folder.rmdir()
        self._fh.close()  # closing the file releases the flock


def lock_holder(path: Path) -> str:
    """``process PID`` for the process holding a flock on ``path`` (from ``/proc/locks``, Linux), else ``another
    process``."""
    try:
        inode = path.stat().st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                return f"process {fields[4]}"
    except OSError:
        pass
    return "another process"


def recover_checkpoints(folder: Path) -> None:
    """Put back ``checkpoint-N`` from ``.old-checkpoint-N-*``, left by a kill while it was being replaced (the new
    copy never reached its name); an aside copy whose checkpoint is in place is deleted."""
    for aside in sorted(folder.glob(".old-checkpoint-*")):
        step = aside.name[len(".old-checkpoint-"):].split("-")[0]
        final = folder / f"checkpoint-{step}"
        if final.exists():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(aside, final)
            logger.warning("put back %s (a run was killed while replacing it)", final)


# -- checkpoints ---------------------------------------------------------------------------------------------------
def read_trainer_state(checkpoint: Path) -> dict[str, Any]:
    """``trainer_state.json`` with its fields checked (step >= 0 and equal to the folder's number, totals >= 0)."""
    path = checkpoint / "trainer_state.json"
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is not readable JSON: {err}") from None
    step = state.get("step") if isinstance(state, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: step must be an integer >= 0 (got {step!r})")
    if step != _checkpoint_step(checkpoint):
        raise CheckpointError(f"{path}: step {step} does not match the folder name {checkpoint.name}")
    totals = state.get("totals")
    if not isinstance(totals, dict) or any(not isinstance(v, (int, float)) or v < 0 for v in totals.values()):
        raise CheckpointError(f"{path}: totals must be non-negative numbers (got {totals!r})")
    for key in ("stream", "sampler", "config"):
        if not isinstance(state.get(key), dict):
            raise CheckpointError(f"{path}: field {key!r} is missing or not an object")
    stream = state["stream"]
    if any(not isinstance(stream.get(k), int) or stream[k] < 0 for k in ("epoch", "position")):
        raise CheckpointError(f"{path}: stream must hold an epoch and a position >= 0 (got {stream!r})")
    return state


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def listed_files(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The files ``manifest.json`` lists (``{}`` for a checkpoint written before manifests)."""
    path = checkpoint / MANIFEST
    if not path.exists():
        return {}
    try:
        files = json.loads(path.read_text())["files"]
        if not isinstance(files, dict):
            raise ValueError("files is not an object")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is not a checkpoint manifest: {err}") from None
    return files


def check_manifest(checkpoint: Path) -> None:
    """Every file the manifest lists is present with its size and SHA-256: a bit-flipped file, or one copied from
    another checkpoint, is named. A checkpoint written before manifests is accepted with a warning."""
    files = listed_files(checkpoint)
    if not files:
        logger.warning("%s has no %s (written by an earlier version): its files cannot be checked", checkpoint,
                       MANIFEST)
        return
    for name, entry in files.items():
        path = checkpoint / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing (listed in {checkpoint / MANIFEST})")
        if path.stat().st_size != entry.get("bytes") or file_sha256(path) != entry.get("sha256"):
            raise CheckpointError(f"{path} is not the file this checkpoint wrote (its size or SHA-256 differs "
                                  f"from {checkpoint / MANIFEST}): damaged, or copied from another checkpoint")


def check_checkpoint_files(checkpoint: Path) -> dict[str, Any]:
    """The checks that need no model: every file as the manifest lists it, trainer state, the other files present,
    safetensors headers readable."""
    check_manifest(checkpoint)
    state = read_trainer_state(checkpoint)
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pt"):
        if not (checkpoint / name).is_file():
            raise CheckpointError(f"{checkpoint / name} is missing")
    weights = sorted((checkpoint / "model").glob("*.safetensors"))
    if not weights:
        raise CheckpointError(f"{checkpoint / 'model'} holds no .safetensors weights")
    from safetensors import safe_open

    for path in weights:
        try:
            with safe_open(str(path), framework="pt") as fh:
                fh.keys()
        except Exception as err:  # noqa: BLE001 -- safetensors raises its own error types for bad headers
            raise CheckpointError(f"{path} is not a readable safetensors file: {err}") from None
    return state


def previous_intact(checkpoint: Path) -> Path | None:
    """The newest checkpoint older than ``checkpoint`` whose files pass :func:`check_checkpoint_files`."""
    step = _checkpoint_step(checkpoint)
    for older in reversed([c for c in checkpoints(checkpoint.parent) if _checkpoint_step(c) < step]):
        try:
            check_checkpoint_files(older)
        except CheckpointError:
            continue
        return older
    return None


def unusable(checkpoint: Path, problem: str) -> CheckpointError:
    """The error for a checkpoint that cannot be resumed, suggesting the previous intact one."""
    previous = previous_intact(checkpoint)
    if previous is not None:
        hint = (f"the previous intact checkpoint is {previous}: move {checkpoint.name} out of {checkpoint.parent} "
                f"and --resume again to continue from step {_checkpoint_step(previous)}")
    else:
        hint = "there is no earlier intact checkpoint; --overwrite starts the run over"
    return CheckpointError(f"cannot resume from {checkpoint}: {problem}; {hint}")


def load_checkpoint_file(checkpoint: Path, path: Path, load: Callable[[Path], Any]) -> Any:
    """``load(path)``, with any failure reported as :func:`unusable` naming ``path``."""
    try:
        return load(path)
    except Exception as err:  # noqa: BLE001 -- torch / safetensors raise many types for a corrupt file
        raise unusable(checkpoint, f"{path} could not be loaded ({type(err).__name__}: {err})") from err


# -- metrics -------------------------------------------------------------------------------------------------------
def read_metrics_lines(path: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a torn last line (a kill mid-write) is dropped, any other bad line named."""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not an object with an integer step")
        except ValueError as err:
            if number == len(lines):
                logger.warning("%s: dropping a torn last line (%s)", path, err)
                break
            raise CheckpointError(f"{path} line {number} is not a metrics record: {err}") from None
        records.append(record)
    return records


def is_step_record(record: dict[str, Any]) -> bool:
    """A training step's line (the other lines are evaluations)."""
    return "sampling/total_samples" in record


def check_metrics_agree(folder: Path, checkpoint: Path, state: dict[str, Any]) -> None:
    """``metrics.jsonl`` must hold the checkpoint's step with the same total samples (no gap, no other run)."""
    path = folder / "metrics.jsonl"
    step = state["step"]
    if step == 0 or not path.exists():
        return
    records = [r for r in read_metrics_lines(path) if is_step_record(r)]
    at_step = [r for r in records if r["step"] == step]
    if not at_step:
        last = max((r["step"] for r in records), default=0)
        raise CheckpointError(f"{path} has no line for step {step} of {checkpoint} (its last step is {last}): the "
                              f"metrics and the checkpoint are not from the same run")
    samples = state["totals"].get("samples")
    if samples is not None and at_step[-1].get("total_samples") != samples:
        raise CheckpointError(f"{checkpoint / 'trainer_state.json'} says {samples} samples at step {step} but {path} "
                              f"says {at_step[-1].get('total_samples')}: they are not from the same run")


def truncate_metrics(path: Path, step: int, keep_final_evaluation: bool = False) -> None:
    """Keep the lines of steps before ``step`` and ``step``'s own training line; atomically.

    A standalone evaluation line at ``step`` (the final evaluation of a run killed after it) is dropped -- the
    resumed run evaluates again from the same RNG state and writes it once -- unless the checkpoint recorded that
    evaluation (``keep_final_evaluation``: a finished run being extended keeps it).
    """
    if not path.exists():
        return
    kept = [r for r in read_metrics_lines(path)
            if r["step"] < step or (r["step"] == step and (is_step_record(r) or keep_final_evaluation))]
    write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))


# -- the folder ----------------------------------------------------------------------------------------------------
def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename; errors name ``path``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OSError(err.errno, f"could not write {path}: {err.strerror or err}") from err


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


def check_config_format(latest: Path, saved: dict[str, Any]) -> None:
    """A checkpoint written before the sampler settings moved into the ``sampler`` section (flat ``group_size``,
    ``streaming_target``, ``sampler: rounds``, ...) cannot be compared setting by setting: refused, saying so."""
    if not isinstance(saved.get("sampler"), dict):
        raise RunFolderError(f"--resume: {latest} was written by an earlier version of reinforce-ada, whose config "
                             f"holds the sampler's settings flat (no `sampler` section); this version cannot resume "
                             f"it. Finish that run with the version that started it, or start a new run here "
                             f"(--overwrite) or in another --output-dir")


def check_run_folder(config: Any) -> tuple[Path | None, dict[str, tuple[Any, Any]]]:
    """Validate the run folder before anything loads; return the checkpoint to resume from and the changed fields.

    Creates nothing (see :func:`prepare_run_folder`).
    """
    folder = Path(config.output_dir)
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"output_dir {folder} is a file, not a folder")
    entries = run_entries(folder)
    foreign = [folder / name for name in ("config.json", "summary.json")
               if (folder / name).is_file() and folder / name not in entries]
    if foreign:
        raise RunFolderError(f"{foreign[0]} was not written by a training run, and a run would overwrite it; choose "
                             f"another --output-dir")
    names = ", ".join(e.name for e in entries[:6]) + (", ..." if len(entries) > 6 else "")
    if not config.resume:
        if entries and not config.overwrite:
            raise RunFolderError(f"{folder} already holds a run ({names}); pass --resume to continue it, --overwrite "
                                 f"to delete it and start over, or choose another --output-dir")
        return None, {}
    found = checkpoints(folder)
    if not found:
        if any(not e.name.startswith(".tmp-checkpoint-") for e in entries):
            raise RunFolderError(f"--resume: {folder} holds a run ({names}) but no checkpoint to resume from; pass "
                                 f"--overwrite instead of --resume to start it over")
        logger.warning("--resume given but %s holds no run; starting fresh", folder)
        return None, {}
    latest = found[-1]
    try:
        state = check_checkpoint_files(latest)
        check_metrics_agree(folder, latest, state)
    except CheckpointError as err:
        raise unusable(latest, str(err)) from None
    check_config_format(latest, state["config"])
    changes = resume_changes(state["config"], config)
    guarded = {k: v for k, v in changes.items() if k not in RESUMABLE_CHANGES}
    if guarded and not config.force_resume_changes:
        listed = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in guarded.items())
        raise RunFolderError(f"--resume would continue {latest} with changed settings ({listed}), mixing two runs in "
                             f"{folder}; keep the checkpoint's values, pass --force-resume-changes to continue anyway "
                             f"(recorded in config_history.jsonl), or use another --output-dir")
    return latest, changes


def prepare_run_folder(config: Any, step: int, changes: dict[str, tuple[Any, Any]], resuming: bool) -> None:
    """Create the folder (deleting the old run first for ``overwrite``), remove stale temporary checkpoints, write
    ``config.json`` and append this start to ``config_history.jsonl``."""
    folder = Path(config.output_dir)
    if not config.resume and not config.overwrite and run_entries(folder):  # another run started here meanwhile
        raise RunFolderError(f"{folder} now holds a run ({', '.join(e.name for e in run_entries(folder)[:6])}) that "
                             f"appeared while this one was starting; nothing was written")
    if config.overwrite and not config.resume:
        for entry in run_entries(folder):
            if entry.name == "plots":  # only the trainer's plot; the folder goes if nothing else is in it
                (entry / "training.png").unlink()
                if not any(entry.iterdir()):
                    entry.rmdir()
            elif entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        logger.info("--overwrite: deleted the previous run in %s", folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob(".tmp-checkpoint-*"), *folder.glob(".old-checkpoint-*")]:
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
