"""A user's first hour, walked as a user walks it: ``train`` -> ``eval RUN`` -> ``select-prompts RUN`` -> ``train``
on the selected prompts -> ``plot RUN`` -> ``train --resume --max-steps N+2``, each command on what the previous one wrote, in a temporary
folder that is the current directory.

Each step checks what the command prints and writes, that it took the run's own settings (task, max_new_tokens,
held-out prompts, seed) without being told, and that the current folder gets nothing but the run folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from reinforce_ada import cli

STEPS = 4
HELD_OUT = 50  # --eval-prompts: small, and not the default, so that eval must read it from the run


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The user's current folder, holding the run ``train`` made there: ``(folder, train's stdout)``."""
    folder = tmp_path_factory.mktemp("first-hour")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("REINFORCE_ADA_CACHE", str(folder.parent / f"{folder.name}-cache"))
        code, out = _run("train", "--max-steps", str(STEPS), "--eval-prompts", str(HELD_OUT))
    assert code == 0, out
    return folder, out


@pytest.fixture()
def in_home(home, monkeypatch):
    folder, _ = home
    monkeypatch.chdir(folder)
    monkeypatch.setenv("REINFORCE_ADA_CACHE", str(folder.parent / f"{folder.name}-cache"))
    yield folder
    assert sorted(os.listdir(folder)) == ["runs"], "a command wrote into the current folder unasked"


def _run(*argv: str) -> tuple[int, str]:
    """``reinforce-ada ARGV`` in this process: (exit status, what it printed on stdout)."""
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = cli.main(list(argv))
    return code, stdout.getvalue()


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_train_writes_the_run_folder_and_says_where(home):
    folder, out = home
    run = folder / "runs" / "default"
    summary = _summary(run)
    before, after = summary["accuracy_before"], summary["accuracy_after"]
    assert f"held-out sampled accuracy: {100 * before:.1f}% -> {100 * after:.1f}%" in out
    assert f"run folder: {run.resolve()}" in out
    assert "\nby difficulty stratum (the start model's pass rate over 16 samples; prompts): " in out
    assert (run / f"checkpoint-{STEPS}" / "model" / "model.safetensors").is_file()
    assert sorted(os.listdir(folder)) == ["runs"]
    # the strata fixed before training (16 samples of each held-out prompt) and every evaluation's analyses
    strata = json.loads((run / "strata.json").read_text())
    assert strata["num_samples"] == 16 and sum(strata["counts"].values()) == HELD_OUT
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r for r in records if "eval/accuracy" in r]
    assert [r["step"] for r in evaluations] == [0, STEPS]
    for record in evaluations:
        assert [record[f"eval/num_prompts/{name}"] for name in strata["counts"]] == list(strata["counts"].values())
        assert all(f"eval/accuracy/{name}" in record for name, num in strata["counts"].items() if num)
        assert record["eval/pass@1"] == record["eval/accuracy"] and "eval/pass@4" in record
        assert record["eval/entropy"] > 0
    assert all(r["train/entropy"] > 0 for r in records if "train/loss" in r)


def test_eval_on_the_run_uses_its_settings_and_its_held_out_prompts(in_home):
    from reinforce_ada.data import get_task

    run = Path("runs/default")
    code, out = _run("eval", str(run), "--k", "8", "--out", str(run / "eval.jsonl"), "--json")
    assert code == 0
    results = json.loads(out)  # --json: stdout is the JSON alone
    assert results["model"] == str(run / f"checkpoint-{STEPS}" / "model") and results["run"] == str(run)
    assert results["settings"]["max_new_tokens"] == 8  # the run's, not eval's own default of 1024
    assert "max_new_tokens=8" in results["settings_from_run"]
    assert results["verifiers"] == {"held-out": "arithmetic"}
    assert results["prompts"]["held-out"] == (f"the run's held-out prompts ({HELD_OUT} of task arithmetic's test "
                                              "split drawn with seed 1, the run's seed + 1, as its eval/accuracy)")
    lines = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    trainer_held_out = get_task("arithmetic").prompts(HELD_OUT, seed=1, split="test")  # training/setup's rule
    assert list(dict.fromkeys(line["prompt_id"] for line in lines)) == [p.prompt_id for p in trainer_held_out]
    row = results["datasets"]["held-out"]
    assert row["num_prompts"] == HELD_OUT and row["num_samples"] == HELD_OUT * 8
    # the same prompts and model as the run's final evaluation: the same accuracy up to sampling noise (the sd of
    # the difference is about 0.04 here)
    assert abs(row["ave@k"] - _summary(run)["accuracy_after"]) < 0.15
    # Ave@k per stratum (the run's strata.json), the pass@k curve and the entropy
    strata = json.loads((run / "strata.json").read_text())
    assert {name: cell["num_prompts"] for name, cell in row["groups"].items()} == strata["counts"]
    assert list(row["pass_curve"]) == ["1", "2", "4", "8"] and row["pass_curve"]["1"] == pytest.approx(row["ave@k"])
    assert row["entropy"] > 0 and row["num_tokens"] > 0
    assert results["strata"].startswith(f"{run / 'strata.json'}: each held-out prompt's pass rate under the start "
                                        "model from 16 samples")
    code, out = _run("eval", "--model", str(run), "--k", "2")  # the table says which model and prompts it used
    assert code == 0
    assert "pass@k of held-out (unbiased estimator, from the 2 samples per prompt):" in out
    assert "Ave@2 of held-out by stratum:" in out and "extremely_hard" in out and "mean token entropy" in out
    assert f"model: {run / f'checkpoint-{STEPS}' / 'model'} (step {STEPS} of run {run})" in out
    assert "settings from the run: max_new_tokens=8" in out
    assert "prompts of held-out: the run's held-out prompts (50 of task arithmetic's test split" in out


def test_select_prompts_on_the_run_writes_into_the_run_folder(in_home):
    run = Path("runs/default")
    code, out = _run("select-prompts", str(run), "--limit", "32", "-k", "4")
    assert code == 0
    selected, rates = run / "selected_prompts.jsonl", run / "pass_rates.jsonl"
    kept = [json.loads(line) for line in selected.read_text().splitlines()]
    estimates = [json.loads(line) for line in rates.read_text().splitlines()]
    assert re.search(r"prompts: the first 32 of the run's \d+ training prompts \(task arithmetic's train split "
                     r"drawn with seed 0\)", out)
    assert (f"kept {len(kept)} of 32 prompts with pass rate in [0.0625, 0.9375] (4 samples each); wrote "
            f"{selected.resolve()} and {rates.resolve()}") in out
    assert len(estimates) == 32 and all(e["num_samples"] == 4 for e in estimates)
    assert [row["id"] for row in kept] == [e["prompt_id"] for e in estimates if e["kept"]]
    for row in kept:
        a, b = re.fullmatch(r"(\d+)\+(\d+)=", row["prompt"]).groups()
        assert row["answer"] == str(int(a) + int(b))
    # the paper's hard subset (Table 4): 1 or 2 of 16 correct
    code, out = _run("select-prompts", str(run), "--limit", "32", "--preset", "paper-hard", "--overwrite")
    assert code == 0 and "with pass rate in [0.0625, 0.125] (16 samples each, --preset paper-hard)" in out
    estimates = [json.loads(line) for line in rates.read_text().splitlines()]
    assert all(e["kept"] == (e["num_positive"] in (1, 2)) and e["num_samples"] == 16 for e in estimates)


def test_the_selected_prompts_train_by_the_command_the_error_and_select_prompts_give(in_home, capsys):
    """The tiny model cannot train on a prompt file (it is warm-started on a built-in task): the error names the
    command that trains the run's model on the prompts ``select-prompts RUN`` wrote, ``select-prompts`` prints the
    same command, and that command runs with the tiny model's defaults and the run's held-out prompts."""
    import shlex

    run, selected = Path("runs/default"), "runs/default/selected_prompts.jsonl"
    code, out = _run("select-prompts", str(run), "--limit", "32", "-k", "4", "--min", "0", "--max", "1", "--overwrite")
    assert code == 0
    command = out.split("to train the run's model further on them: ", 1)[1].strip()
    assert command == (f"reinforce-ada train --model runs/default --data {selected} --verifier arithmetic "
                       f"--eval-data task:arithmetic --eval-prompts {HELD_OUT} --output-dir runs/default-selected")
    for extra in ([], ["--task", "arithmetic"]):
        capsys.readouterr()
        assert _run("train", "--data", selected, *extra)[0] == 2
        assert capsys.readouterr().err.strip().endswith(f"; to train the model of the run that holds it further on "
                                                        f"these prompts, type: {command}")
    code, out = _run("train", "--model", "runs/default", "--data", selected, "--max-steps", "1", "--output-dir",
                     "runs/default-no-held-out")  # without --eval-data: said, not silent
    assert code == 0 and ("no held-out accuracy: a run on a prompt file holds none out unless told (--eval-data "
                          "FILE, or --eval-data task:NAME for 200 prompts of a built-in task's test split)") in out
    shutil.rmtree("runs/default-no-held-out")
    code, out = _run(*shlex.split(command)[1:], "--max-steps", "2")
    assert code == 0, out
    new = Path("runs/default-selected")
    config = json.loads((new / "config.json").read_text())
    assert (config["learning_rate"], config["batch_size"], config["max_new_tokens"]) == (1e-3, 32, 8)  # tiny's
    assert "held-out sampled accuracy: " in out
    strata = json.loads((new / "strata.json").read_text())
    assert sum(strata["counts"].values()) == HELD_OUT  # the run's own held-out prompts: task arithmetic, seed 1
    code, out = _run("eval", str(new), "--k", "1")
    assert code == 0 and (f"the run's held-out prompts ({HELD_OUT} of task arithmetic's test split drawn with seed "
                          f"1, the run's seed + 1") in out
    shutil.rmtree(new)


def test_plot_on_the_run_writes_into_its_plots_folder(in_home):
    plot = Path("runs/default/plots/training.png")
    plot.unlink()
    code, out = _run("plot", "runs/default")
    assert code == 0 and out == f"wrote {plot.resolve()}\n" and plot.stat().st_size > 0


def _resumed_copy(home) -> Path:
    """The run copied (so the other tests keep theirs), then resumed for two more steps."""
    folder, _ = home
    run = folder.parent / f"{folder.name}-resumed"
    if not run.exists():
        shutil.copytree(folder / "runs" / "default", run)
        code, out = _run("train", "--resume", "--max-steps", str(STEPS + 2), "--eval-prompts", str(HELD_OUT),
                         "--output-dir", str(run))
        assert code == 0 and f"run folder: {run.resolve()}" in out
    return run


def test_train_resume_continues_the_run(home, in_home):
    run = _resumed_copy(home)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if "sampling/total_samples" in line]
    assert steps == list(range(1, STEPS + 3)) and (run / f"checkpoint-{STEPS + 2}").is_dir()


def test_extending_a_finished_run_keeps_its_final_evaluation(home, in_home):
    run = _resumed_copy(home)
    evaluations = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
                   if "eval/accuracy" in line]
    assert STEPS in [record["step"] for record in evaluations]
    assert [STEPS, _summary(Path("runs/default"))["accuracy_after"]] in _summary(run)["accuracy_history"]


def test_resuming_a_finished_run_with_nothing_to_do_says_so_and_changes_nothing(home, in_home, capsys):
    run = _resumed_copy(home)
    before = {path: path.stat().st_mtime_ns for path in run.rglob("*")}
    code, out = _run("train", "--resume", "--max-steps", str(STEPS + 2), "--eval-prompts", str(HELD_OUT),
                     "--output-dir", str(run))
    said = out + capsys.readouterr().err
    assert re.search(r"nothing to do|already (finished|at step)", said, re.IGNORECASE), said
    assert {path: path.stat().st_mtime_ns for path in run.rglob("*")} == before
