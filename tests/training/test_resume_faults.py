"""Trust under faults, the resume side (kills while saving, two writers, damaged checkpoints, changed data): a kill
while a checkpoint is replaced loses nothing, a run folder has one writer, a damaged or foreign checkpoint file is
refused by name, and a resume on changed data is refused before anything in the folder is rewritten. Each test names
its fault class in its docstring (for the fault table)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from reinforce_ada.errors import CheckpointError, RunFolderError
from trainer_fixtures import addition_prompts, digit_verifier, small_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def parts(train_prompts=None):
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(),
                train_prompts=train_prompts or addition_prompts(64, 1), eval_prompts=addition_prompts(8, 2),
                verifier=digit_verifier)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- kill while a checkpoint is replaced -------------------------------------------------------------------------
@pytest.mark.fault("kill -9 while a checkpoint is being replaced",
                   "the old checkpoint renamed aside is put back; --resume continues from it")
def test_a_kill_between_the_renames_of_a_replaced_checkpoint_leaves_it_resumable(tmp_path, monkeypatch):
    """kill -9 while replacing checkpoint-N: the old copy is renamed aside, never deleted before the new one is in
    place, and the next start puts it back. (On main the old one was deleted first: only .tmp-checkpoint-N-PID was
    left and --resume said there was no checkpoint.)"""
    from reinforce_ada.runs import checkpoint as ck

    out = tmp_path / "run"
    trainer = Trainer(small_config(out, max_steps=2), **parts())
    trainer.train()
    real = os.replace
    calls = []

    def killed_at_the_second_rename(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:
            raise KeyboardInterrupt("kill -9")  # the process dies between the two renames
        return real(src, dst)

    monkeypatch.setattr(ck.os, "replace", killed_at_the_second_rename)
    with pytest.raises(KeyboardInterrupt):
        ck.save_checkpoint(out, 2, trainer._write_checkpoint)
    monkeypatch.setattr(ck.os, "replace", real)
    assert calls[0][0] == "checkpoint-2" and calls[0][1].startswith(".old-checkpoint-2-")
    assert not (out / "checkpoint-2").exists()  # what a kill in that window leaves
    resumed = Trainer(small_config(out, max_steps=3, resume=True), **parts())
    assert resumed.start.checkpoint == out / "checkpoint-2" and resumed.step == 2
    resumed.train()
    assert (out / "checkpoint-3").is_dir() and not list(out.glob(".old-checkpoint-*"))
    assert not list(out.glob(".tmp-checkpoint-*"))


# -- one writer per run folder -----------------------------------------------------------------------------------
@pytest.mark.fault("a second run on a run folder in use (same process)",
                   "refused: the folder is locked, the holder's PID named")
def test_a_second_trainer_on_a_folder_in_use_is_refused_naming_the_holder(tmp_path):
    """Two runs in one folder (--overwrite or --resume while another trains): the second is refused before it
    touches anything, naming the holder's PID. (On main both ran and metrics.jsonl interleaved two runs.)"""
    out = tmp_path / "run"
    first = Trainer(small_config(out, max_steps=2), **parts())
    for settings in (dict(overwrite=True), dict(resume=True), {}):
        with pytest.raises(RunFolderError, match=rf"{out} is in use by another training run \(process {os.getpid()} "
                                                 rf"holds it\)"):
            Trainer(small_config(out, max_steps=2, **settings), **parts())
    first.train()  # the refused ones changed nothing; the lock goes with the run
    Trainer(small_config(out, max_steps=3, resume=True), **parts()).train()


@pytest.mark.fault("a second process on a run folder in use (--overwrite / --resume / fresh)",
                   "exit 2, one line naming the holder's PID")
def test_a_second_process_on_a_folder_in_use_exits_2_with_one_line(tmp_path):
    """The CLI: a second `train` on a folder another process holds prints one line naming that PID, exit 2."""
    from reinforce_ada.runs.lock import RunLock

    out = tmp_path / "run"
    holder = RunLock(out)  # this process holds the folder, as a running trainer does
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", "train", "--output-dir", str(out),
                               "--overwrite", "--max-steps", "1"], capture_output=True, text=True, env=env,
                              timeout=300)
    finally:
        holder.release()
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {out} is in use by another training run (process "
                                                f"{os.getpid()} holds it); wait for it to finish or choose another "
                                                f"--output-dir"]


# -- damaged or foreign checkpoint files --------------------------------------------------------------------------
@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=3, save_steps=1), **parts()).train()
    return out


@pytest.mark.fault("bit-flipped weights in the latest checkpoint",
                   "refused on resume by name (checksum in manifest.json)")
def test_a_bit_flip_in_the_weights_is_refused_by_name(finished):
    """A bit flipped in checkpoint-3's weights (a readable file, right shapes): refused naming the file and the
    previous intact checkpoint. (On main it resumed silently.)"""
    weights = finished / "checkpoint-3" / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01
    weights.write_bytes(bytes(data))
    before = snapshot(finished)
    with pytest.raises(CheckpointError, match=r"checkpoint-3/model/model.safetensors is not the file this checkpoint "
                                              r"wrote .*previous intact checkpoint is .*checkpoint-2"):
        Trainer(small_config(finished, max_steps=4, resume=True), **parts())
    assert snapshot(finished) == before


@pytest.mark.fault("a checkpoint of this version whose manifest.json was deleted, or lists no files (its weights "
                   "bit-flipped too)",
                   "refused on resume by name; --accept-unverified-checkpoint resumes it knowingly, recorded in "
                   "config_history.jsonl (it was read as an earlier version's: a warning, every file check off)")
@pytest.mark.parametrize("manifest", ["deleted", "empty file map"])
def test_a_checkpoint_without_a_valid_manifest_is_refused_unless_accepted(finished, manifest):
    checkpoint = finished / "checkpoint-3"
    if manifest == "deleted":
        (checkpoint / "manifest.json").unlink()
    else:
        (checkpoint / "manifest.json").write_text(json.dumps({"files": {}}))
    weights = checkpoint / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01
    weights.write_bytes(bytes(data))
    before = snapshot(finished)
    with pytest.raises(CheckpointError, match=r"cannot resume from .*checkpoint-3: .*checkpoint-3/manifest.json is "
                                              r"missing or lists no files, so the checkpoint's files cannot be "
                                              r"checked, though its trainer_state.json was written by a version that "
                                              r"writes one; pass --accept-unverified-checkpoint"):
        Trainer(small_config(finished, max_steps=4, resume=True), **parts())
    assert snapshot(finished) == before
    Trainer(small_config(finished, max_steps=4, resume=True, accept_unverified_checkpoint=True), **parts()).train()
    event = [json.loads(x) for x in (finished / "config_history.jsonl").read_text().splitlines()][-1]
    assert event["event"] == "resume" and "checkpoint_manifest" in event["changed"]


@pytest.mark.fault("an extra *.safetensors (another run's weights) dropped into a checkpoint's model/",
                   "never loaded: the resumed weights are the checkpoint's own (it overrode them)")
def test_weights_the_manifest_does_not_list_are_never_loaded(finished, tmp_path):
    from safetensors.torch import load_file

    other = tmp_path / "other"
    Trainer(small_config(other, max_steps=1, seed=7), **parts()).train()
    checkpoint = finished / "checkpoint-3"
    (checkpoint / "model" / "zz-extra.safetensors").write_bytes(
        (other / "checkpoint-1" / "model" / "model.safetensors").read_bytes())
    resumed = Trainer(small_config(finished, max_steps=4, resume=True), **parts())
    own = load_file(str(checkpoint / "model" / "model.safetensors"))
    state = resumed.model.state_dict()
    assert all(torch.equal(state[name], tensor) for name, tensor in own.items())


@pytest.mark.fault("an optimizer file from another checkpoint",
                   "refused on resume by name (checksum in manifest.json)")
def test_an_older_optimizer_file_is_refused_by_name(finished):
    """checkpoint-1's optimizer.pt copied into checkpoint-3 (a valid optimizer state of the same model): refused.
    (On main it resumed silently with the wrong moments.)"""
    (finished / "checkpoint-3" / "optimizer.pt").write_bytes((finished / "checkpoint-1" / "optimizer.pt").read_bytes())
    with pytest.raises(CheckpointError, match=r"checkpoint-3/optimizer.pt is not the file this checkpoint wrote \(its "
                                              r"size or SHA-256 differs .*\): damaged, or copied from another"):
        Trainer(small_config(finished, max_steps=4, resume=True), **parts())


@pytest.mark.fault("a checkpoint with a wrong-shaped or NaN tensor",
                   "refused on resume, the tensor named")
@pytest.mark.parametrize("fault", ["wrong shape", "nan"])
def test_a_wrong_shaped_or_nan_tensor_is_refused_by_name(finished, fault):
    """A checkpoint whose manifest agrees (written so by a faulty writer) but holding a tensor of the wrong shape or
    a NaN: refused naming the tensor, no traceback, no run training on NaN."""
    from safetensors.torch import load_file, save_file

    from reinforce_ada.runs.manifest import write_manifest

    weights = finished / "checkpoint-3" / "model" / "model.safetensors"
    state = load_file(str(weights))
    name = "model.embed_tokens.weight"
    state[name] = state[name][:-1].clone() if fault == "wrong shape" else state[name].clone().fill_(float("nan"))
    save_file(state, str(weights), metadata={"format": "pt"})
    write_manifest(finished / "checkpoint-3")
    expected = r"has shape \(\d+, \d+\) but the model's is" if fault == "wrong shape" else "holds NaN or infinite"
    with pytest.raises(CheckpointError, match=rf"cannot resume from .*checkpoint-3: tensor {name} {expected}"):
        Trainer(small_config(finished, max_steps=4, resume=True), **parts())


@pytest.mark.fault("a tampered prompt-stream position in a checkpoint",
                   "refused on resume, the field named")
def test_a_tampered_stream_position_is_refused_by_name(finished):
    """trainer_state.json's stream position past the end of the training set (manifest rewritten to match): a
    named error, not an IndexError mid-run."""
    from reinforce_ada.runs.manifest import write_manifest

    path = finished / "checkpoint-3" / "trainer_state.json"
    state = json.loads(path.read_text())
    state["stream"]["position"] = 10_000
    path.write_text(json.dumps(state))
    write_manifest(finished / "checkpoint-3")
    with pytest.raises(CheckpointError, match=r"trainer_state.json: the prompt stream's position 10000 \(epoch 0\) "
                                              r"is outside this training set of 64 prompts"):
        Trainer(small_config(finished, max_steps=4, resume=True), **parts())


# -- the data a run trained on -----------------------------------------------------------------------------------
@pytest.mark.fault("--resume after the data file was replaced or shrank",
                   "exit 2 naming the row counts, before anything in the folder is rewritten")
@pytest.mark.parametrize("change", ["replaced", "shrunk"])
def test_resume_on_changed_data_is_refused_before_anything_is_rewritten(tmp_path, change):
    """The data file replaced (same size, other prompts) or shrunk after the run started: --resume is refused with
    the row counts, before any file of the run changes. (On main: trained on the new prompts silently, or an
    IndexError after config.json was rewritten.)"""
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2), **parts(addition_prompts(64, 1))).train()
    new = addition_prompts(64, 7) if change == "replaced" else addition_prompts(64, 1)[:3]
    before = snapshot(out)
    rows = 64 if change == "replaced" else 3
    with pytest.raises(RunFolderError, match=rf"--resume: the training data \(task arithmetic\) changed since "
                                             rf".*checkpoint-2 was written: 64 rows with SHA-256 \w+\.\.\. then, "
                                             rf"{rows} rows .* now; put the original back, pass "
                                             rf"--force-resume-changes"):
        Trainer(small_config(out, max_steps=4, resume=True), **parts(new))
    assert snapshot(out) == before


@pytest.mark.fault("--resume --force-resume-changes on changed data",
                   "accepted, the change recorded in config_history.jsonl")
def test_forced_resume_on_changed_data_records_the_change(tmp_path):
    """--force-resume-changes continues on a shrunk data set (the stream starts a new epoch of it) and records
    the change in config_history.jsonl."""
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2), **parts(addition_prompts(64, 1))).train()
    Trainer(small_config(out, max_steps=3, resume=True, force_resume_changes=True),
            **parts(addition_prompts(64, 1)[:5])).train()
    history = [json.loads(x) for x in (out / "config_history.jsonl").read_text().splitlines()]
    assert history[-1]["event"] == "resume" and history[-1]["forced"]
    assert history[-1]["changed"]["data"][0]["rows"] == 64 and history[-1]["changed"]["data"][1]["rows"] == 5


@pytest.mark.fault("--resume --max-steps 2 of a run at step 3 (finished, or cut short in its final evaluation)",
                   "exit 2 before anything loads or is rewritten, naming the checkpoint's step and the --max-steps to "
                   "give (it said nothing, exit 0; summary.json said 3 steps and config.json 2)")
@pytest.mark.parametrize("finished_whole", [True, False])
def test_resume_with_max_steps_below_the_checkpoint_is_refused(finished, finished_whole):
    if not finished_whole:  # a kill during the final evaluation leaves the last checkpoint without a summary
        (finished / "summary.json").unlink()
    before = snapshot(finished)
    with pytest.raises(RunFolderError) as refused:
        Trainer(small_config(finished, max_steps=2, save_steps=1, resume=True), **parts())
    assert str(refused.value) == (f"--resume: {finished / 'checkpoint-3'} is at step 3, past --max-steps 2; a run "
                                  f"cannot go back: give --max-steps 3 or more (the same number finishes a run a "
                                  f"kill cut short), or --overwrite to start over")
    assert snapshot(finished) == before


@pytest.mark.fault("--resume of a folder that holds no run (a mistyped --output-dir)",
                   "exit 2 naming the folder and the closest run folder beside it; nothing created (it trained a whole "
                   "new run, exit 0)")
def test_resume_of_a_folder_without_a_run_is_refused_naming_the_closest_run(tmp_path, monkeypatch, capsys):
    from reinforce_ada import cli

    monkeypatch.chdir(tmp_path)
    Trainer(small_config(tmp_path / "runs" / "default", max_steps=1), **parts()).train()
    monkeypatch.setattr("reinforce_ada.training.loop.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    capsys.readouterr()
    assert cli.main(["train", "--resume", "--output-dir", "runs/defualt"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --resume: runs/defualt holds no run to resume; did you mean --output-dir runs/default? (to start a new "
        "run there, leave out --resume)"]
    assert cli.main(["train", "--resume", "--output-dir", "elsewhere/run"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --resume: elsewhere/run holds no run to resume (to start a new run there, leave out --resume)"]
    assert sorted(os.listdir(tmp_path)) == ["runs"] and os.listdir(tmp_path / "runs") == ["default"]
