"""The command line is quiet by default: a piped ``train`` prints its summary and nothing else -- no progress-bar
redraws (carriage returns), no INFO log, no third-party bars; ``-v`` turns the INFO log on; a finished run resumed with
nothing to do says so once. On a terminal -- also a pseudo-terminal that reports no size, as ``script`` gives one --
``train`` and ``select-prompts`` draw their progress bars."""

import json
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


def on_a_terminal(*argv, cwd, columns=0) -> str:
    """``reinforce-ada ARGV`` under a pseudo-terminal of ``columns`` x 24 (0: one that reports no size): what it
    wrote there."""
    import fcntl
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: the pseudo-terminal is its stdin, stdout and stderr
        os.chdir(cwd)
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "reinforce_ada.cli", *argv])
    if columns:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    written = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child is gone
            break
        if not chunk:
            break
        written += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, written.decode(errors="replace")[-2000:]
    return written.decode(errors="replace")


def test_train_and_select_prompts_draw_their_bars_on_a_terminal_of_no_size(tmp_path):
    """A pseudo-terminal without a size made tqdm draw nothing (0 columns, and every bar hidden below a screen of 0
    rows): `train` showed no progress, as the help promised it would."""
    written = on_a_terminal(*RUN, "--output-dir", str(tmp_path / "run"), cwd=tmp_path)
    redraws = written.split("\r")
    assert any(r.startswith("strata: 8 held-out x 16: ") for r in redraws)  # what the wait before step 1 is
    assert any(r.startswith("eval: 8 held-out x 4: ") for r in redraws)
    assert any(r.startswith("train: 100%|") and "2/2 [" in r for r in redraws), written
    assert "run folder: " in written
    rows = tmp_path / "rows.jsonl"  # more prompts than select-prompts takes of a task unless told: the hint shows
    rows.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(300)))
    written = on_a_terminal("select-prompts", str(tmp_path / "run"), "--data", str(rows), "-k", "2", cwd=tmp_path,
                            columns=100)
    assert "sampling 300 prompts x 2; --limit N estimates the first N only" in written
    assert any(r.startswith("pass rates (2 samples each): 100%|") and "300/300" in r
               for r in written.split("\r")), written[-3000:]
