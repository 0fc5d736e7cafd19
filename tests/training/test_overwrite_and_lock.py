"""What --overwrite deletes, and who may write into a run folder: only what the run itself wrote goes (never a user's
`checkpoint-best/` or `checkpoint-notes.txt`, a file a checkpoint's manifest does not list, or the model the new run
starts from), and the run lock is on the folder itself, so deleting a file cannot let a second writer in."""

import os
import shutil

import pytest

from reinforce_ada.errors import RunFolderError
from reinforce_ada.training import Trainer
from trainer_fixtures import folder_bytes, small_config, tiny_parts


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2, save_steps=1), **tiny_parts()).train()
    return out


@pytest.mark.fault("train --overwrite on a run folder holding the user's checkpoint-best/ and checkpoint-notes.txt",
                   "both kept byte for byte; only the run's own files deleted (both were deleted)")
def test_overwrite_keeps_the_users_checkpoint_named_files(finished):
    shutil.copytree(finished / "checkpoint-2", finished / "checkpoint-best")
    (finished / "checkpoint-notes.txt").write_text("step 2 looked best")
    mine = {name: folder_bytes(finished / name) if (finished / name).is_dir() else (finished / name).read_bytes()
            for name in ("checkpoint-best", "checkpoint-notes.txt")}
    Trainer(small_config(finished, max_steps=1, overwrite=True, seed=3), **tiny_parts()).train()
    assert folder_bytes(finished / "checkpoint-best") == mine["checkpoint-best"]
    assert (finished / "checkpoint-notes.txt").read_bytes() == mine["checkpoint-notes.txt"]
    assert sorted(p.name for p in finished.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-best",
                                                                      "checkpoint-notes.txt"]


@pytest.mark.fault("train --overwrite where a run's checkpoint holds a file its manifest does not list, or a "
                   "checkpoint-N/ folder no run wrote",
                   "exit 2 naming the file before anything is deleted (it was deleted with the checkpoint)")
@pytest.mark.parametrize("where", ["inside a checkpoint", "a checkpoint-N folder of the user's"])
def test_overwrite_refuses_to_delete_what_no_run_wrote(finished, where):
    mine = finished / "checkpoint-2" / "my_eval.json" if where == "inside a checkpoint" else \
        finished / "checkpoint-7" / "notes.txt"
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("{}")
    before = folder_bytes(finished)
    why = "--overwrite would delete it: it is not in checkpoint-2's manifest.json" if where == "inside a checkpoint" \
        else "a run would replace it"
    target = mine if where == "inside a checkpoint" else mine.parent
    with pytest.raises(RunFolderError, match=rf"^{target} was not written by a training run, and {why}; move it out "
                                             rf"of {finished} first, or choose another --output-dir$"):
        Trainer(small_config(finished, max_steps=1, overwrite=True), **tiny_parts())
    assert folder_bytes(finished) == before


@pytest.mark.fault("train --model RUN --output-dir RUN --overwrite (or --model RUN/checkpoint-N)",
                   "exit 2 in one line before anything is deleted (it deleted the checkpoint it starts from)")
@pytest.mark.parametrize("model", ["RUN", "RUN/checkpoint-1"])
def test_overwrite_never_deletes_the_model_the_run_starts_from(finished, model):
    given = str(finished) if model == "RUN" else str(finished / "checkpoint-1")
    before = folder_bytes(finished)
    with pytest.raises(RunFolderError, match=rf"^--overwrite would delete the run in {finished}, which --model {given} "
                                             rf"reads \(the new run would start from what it deletes\); copy it out of "
                                             rf"{finished} first, or choose another --output-dir$"):
        Trainer(small_config(finished, max_steps=1, overwrite=True, model=given), **tiny_parts())
    assert folder_bytes(finished) == before


@pytest.mark.fault("the run folder's lock file deleted while a run trains, then a second train into the folder",
                   "refused, naming the holder: the lock is on the folder itself (the second writer got in: metrics "
                   "steps 0, 50, 1, 2, 51, ...)")
def test_deleting_files_in_a_run_folder_never_lets_a_second_writer_in(tmp_path):
    from reinforce_ada.runs.lock import RunLock

    out = tmp_path / "run"
    first = Trainer(small_config(out, max_steps=1), **tiny_parts())  # holds the folder, as a training run does
    for path in out.iterdir():  # whatever file the lock might live in
        path.unlink() if path.is_file() else shutil.rmtree(path)
    with pytest.raises(RunFolderError, match=rf"{out} is in use by another training run \(process {os.getpid()} "
                                             rf"holds it\)"):
        RunLock(out)
    with pytest.raises(RunFolderError, match="in use by another training run"):
        Trainer(small_config(out, max_steps=1, overwrite=True), **tiny_parts())
    first.train()
    RunLock(out).release()  # free once the run has ended
