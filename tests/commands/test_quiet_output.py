"""The command line is quiet by default: a piped ``train`` prints its summary and nothing else -- no progress-bar
redraws (carriage returns), no INFO log, no third-party bars; ``-v`` turns the INFO log on; a finished run resumed with
nothing to do says so once."""

import os
import subprocess
import sys

RUN = ["train", "--max-steps", "2", "--eval-prompts", "8", "--num-threads", "1"]


def piped(*argv, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def test_a_piped_run_prints_its_summary_only_and_verbose_adds_the_log(tmp_path):
    out, err = piped(*RUN, "--output-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert err == ""
    lines = out.splitlines()
    assert "\r" not in out and len(lines) == 4, out
    assert lines[0].startswith("held-out sampled accuracy: ") and lines[1].startswith("by difficulty stratum ")
    assert lines[2].startswith("steps 2, samples drawn ") and lines[3].startswith("run folder: ")
    out, err = piped(*RUN, "--output-dir", str(tmp_path / "run"), "--resume", cwd=tmp_path)
    assert err == "" and out.count("nothing to do") == 1
    out, err = piped("-v", *RUN, "--output-dir", str(tmp_path / "verbose"), cwd=tmp_path)
    assert "\r" not in err and " INFO reinforce_ada.runs.checkpoint: saved " in err
    assert "Loading weights" not in err
