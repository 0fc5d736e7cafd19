"""Commands that compose: every command that takes a model finds it in a run, a checkpoint or a model
folder and takes the run's own settings; every wrong turn is one line (exit 2) before anything expensive; files land
where the user expects; ``--help`` is plain text listing the registries.

The runs here are made by hand (an untrained tiny model saved as ``checkpoint-3/model`` beside a trainer state), so
each test takes a second; ``tests/test_user_path.py`` walks the same commands on a run the trainer wrote.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from reinforce_ada import cli
from reinforce_ada.config import STRATEGIES, ConfigError, TrainConfig
from reinforce_ada.errors import UsageError


def one_line(capsys, *argv) -> str:
    """Run ``reinforce-ada ARGV``; it must exit 2 with one ``error:`` line and no traceback. Returns the line."""
    capsys.readouterr()  # what came before (a model saved with a progress bar)
    code = cli.main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if not line.startswith("Loading weights")]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0].removeprefix("error: ")


def save_tiny(folder: Path) -> Path:
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    folder.mkdir(parents=True)
    build_tiny_model().save_pretrained(folder)
    build_char_tokenizer().save_pretrained(folder)
    return folder


def make_run(folder: Path, step: int = 3, **settings) -> Path:
    """A run folder as the trainer leaves it, enough for the commands that read one: ``config.json`` and
    ``checkpoint-{step}`` with the model, the trainer state (holding the config) and the other checkpoint files."""
    config = asdict(TrainConfig(output_dir=str(folder), **{"eval_prompts": 10, "seed": 5, "max_new_tokens": 4,
                                                           **settings}))
    checkpoint = folder / f"checkpoint-{step}"
    save_tiny(checkpoint / "model")
    state = {"step": step, "totals": {"samples": 0}, "stream": {"epoch": 0, "position": 0}, "sampler": {},
             "config": config}
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pt"):
        (checkpoint / name).write_bytes(b"")
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "metrics.jsonl").write_text(json.dumps({"step": 1, "sampling/reward_mean": 0.5, "total_samples": 8,
                                                      "sampling/zero_variance_fraction": 0.0,
                                                      "sampling/num_prompts": 2}) + "\n")
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "demo")


@pytest.fixture()
def no_weights(monkeypatch):
    """Fail the test if any model's weights are loaded or any sample is generated."""
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: pytest.fail("weights were loaded"))
    monkeypatch.setattr("reinforce_ada.generation.hf.HFGenerator.generate",
                        lambda *a, **k: pytest.fail("the generator was called"))


# -- finding the model ----------------------------------------------------------------------------------------------
def test_the_model_is_found_in_a_run_a_checkpoint_or_its_model_folder(run, tmp_path):
    from reinforce_ada.runs.source import locate_model

    model = run / "checkpoint-3" / "model"
    for given in (run, run / "checkpoint-3", model):
        source = locate_model(str(given))
        assert (source.model_dir, source.checkpoint, source.run_dir) == (model, run / "checkpoint-3", run)
        assert (source.config.seed, source.config.max_new_tokens, source.config.eval_prompts) == (5, 4, 10)
    bare = save_tiny(tmp_path / "bare")
    source = locate_model(str(bare))
    assert source.model_dir == bare and source.config is None and source.describe() == str(bare)
    assert locate_model(str(tmp_path / "missing")) is None  # not a local path: the caller decides


def test_a_damaged_newest_checkpoint_is_skipped_naming_it(tmp_path, caplog):
    from reinforce_ada.runs.source import locate_model

    run = make_run(tmp_path / "run")
    damaged = run / "checkpoint-7"
    (damaged / "model").mkdir(parents=True)  # killed while saving: no trainer state, no weights
    with caplog.at_level("WARNING"):
        assert locate_model(str(run)).checkpoint == run / "checkpoint-3"
    assert "checkpoint-7" in caplog.text and "using checkpoint-3" in caplog.text
    (run / "checkpoint-3" / "trainer_state.json").unlink()
    with pytest.raises(UsageError, match="the run holds no complete checkpoint .*checkpoint-7: .*checkpoint-3: "):
        locate_model(str(run))


def test_a_path_one_level_off_is_one_line_naming_the_path_to_give(run, capsys, no_weights):
    parent = run.parent
    weights = run / "checkpoint-3" / "model" / "model.safetensors"
    for argv in (["eval", "--model", str(parent), "--data", "task:arithmetic"],
                 ["select-prompts", str(parent), "--data", "task:arithmetic"],
                 ["train", "--model", str(parent), "--output-dir", str(parent / "new")]):
        flag = "RUN" if argv[1] == str(parent) else "--model"
        assert one_line(capsys, *argv) == f"{flag} {parent} holds no model itself, but {run} does: give {flag} {run}"
    assert one_line(capsys, "eval", str(weights)) == (f"RUN {weights} is a file, not a model folder; give the folder "
                                                      f"that holds it: RUN {weights.parent}")
    assert not (parent / "new").exists()
    started = parent / "started"
    started.mkdir()
    (started / "metrics.jsonl").write_text("")
    assert one_line(capsys, "eval", str(started)) == (f"RUN {started} holds a run but no checkpoint yet (the trainer "
                                                      "writes one when it ends, and every --save-steps steps)")


def test_train_takes_a_run_as_its_model(run):
    from reinforce_ada.training.preflight import check_model
    from reinforce_ada.training.setup import load_model

    check_model(str(run))
    model, tokenizer, warm_start = load_model(TrainConfig(model=str(run / "checkpoint-3")), [], None)
    assert model.name_or_path == str(run / "checkpoint-3" / "model") and warm_start == {}


# -- the run's own settings ----------------------------------------------------------------------------------------
def test_eval_on_a_run_uses_its_settings_and_held_out_prompts(run, capsys, tmp_path):
    from reinforce_ada.data import get_task

    out = tmp_path / "gens.jsonl"
    assert cli.main(["eval", str(run), "--k", "2", "--out", str(out), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["settings"] == {"max_new_tokens": 4, "temperature": 1.0, "top_p": 1.0, "use_chat_template": True}
    assert results["prompts"] == {"held-out": "the run's held-out prompts (10 of task arithmetic's test split drawn "
                                              "with seed 6, the run's seed + 1, as its eval/accuracy)"}
    ids = list(dict.fromkeys(json.loads(line)["prompt_id"] for line in out.read_text().splitlines()))
    assert ids == [p.prompt_id for p in get_task("arithmetic").prompts(10, seed=6, split="test")]
    assert cli.main(["eval", str(run), "--k", "1", "--max-new-tokens", "2", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)  # an option given wins over the run's value
    assert results["settings"]["max_new_tokens"] == 2 and "max_new_tokens=4" not in results["settings_from_run"]


@pytest.mark.fault("eval --json with a reward function that prints (DEBUG lines), in the process or in the worker "
                   "process of a verifier timeout", "stdout holds the JSON alone, the printed lines go to stderr (they "
                   "were in the middle of the JSON: not valid JSON)")
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_eval_json_stdout_holds_the_json_alone_when_the_verifier_prints(tmp_path, timeout):
    import subprocess
    import sys

    (tmp_path / "loud_rewards.py").write_text(
        "def loud(prompts, completions, **kwargs):\n"
        "    print(f'DEBUG scoring {len(completions)} completions')\n"
        "    return [0.0] * len(completions)\n")
    run = make_run(tmp_path / "run", verifier="loud_rewards:loud", verifier_timeout=timeout)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", "eval", str(run), "--k", "2", "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["verifiers"] == {"held-out": "loud_rewards:loud"}
    assert "DEBUG scoring 20 completions" in done.stderr


def test_eval_on_a_model_outside_a_run_needs_data(tmp_path, capsys, no_weights):
    bare = save_tiny(tmp_path / "bare")
    assert one_line(capsys, "eval", str(bare)) == (f"give --data: {bare} is not part of a run, so it has no held-out "
                                                   "prompts of its own")
    assert one_line(capsys, "eval") == ("give the model to use: a run folder, a checkpoint or a model folder (RUN or "
                                        "--model)")


def test_select_prompts_on_a_run_needs_no_out_and_writes_into_the_run(tmp_path, capsys, monkeypatch):
    run = make_run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["select-prompts", str(run), "--limit", "5", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "settings from the run: max_new_tokens=4, temperature=1.0, use_chat_template=True, seed=5" in out
    assert "prompts: the first 5 of the run's 4096 training prompts (task arithmetic's train split drawn with seed " \
           "5)" in out
    assert len((run / "pass_rates.jsonl").read_text().splitlines()) == 5 and (run / "selected_prompts.jsonl").exists()
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert one_line(capsys, "select-prompts", "--tiny", "--data", "task:arithmetic") == (
        "give --out FILE for the kept prompts (only for a run or checkpoint do they go into the run folder by default)")


@pytest.mark.fault("select-prompts RUN on a run that trained on 8 task prompts (--task-train-prompts 8)",
                   "estimates those 8 prompts, the keys of the run's training prompts (it drew 256 others of the "
                   "task's train split, whatever the run trained on)")
def test_select_prompts_on_a_run_estimates_the_runs_own_training_prompts(tmp_path, capsys, monkeypatch):
    from reinforce_ada.runs.data import run_task, training_prompts
    from reinforce_ada.sampling.memory import prompt_key

    run = make_run(tmp_path / "run", task_train_prompts=8, batch_size=8)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["select-prompts", str(run), "-k", "2"]) == 0
    assert ("prompts: the run's 8 training prompts (task arithmetic's train split drawn with seed 5)"
            in capsys.readouterr().out)
    config = TrainConfig(**{k: v for k, v in json.loads((run / "config.json").read_text()).items()
                            if k != "sampler"})
    trained = {prompt_key(p) for p in training_prompts(config, run_task(config))}
    rates = [json.loads(line) for line in (run / "pass_rates.jsonl").read_text().splitlines()]
    assert len(trained) == 8 and {r["key"] for r in rates} == trained


# -- wrong input: one line, before anything expensive ---------------------------------------------------------------
def test_a_prompt_that_cannot_fit_is_one_line_naming_max_new_tokens(tmp_path, capsys, no_weights):
    bare = save_tiny(tmp_path / "bare")  # 64 positions; eval's and select-prompts' own default is 1024 new tokens
    line = one_line(capsys, "eval", "--model", str(bare), "--data", "task:arithmetic")
    assert line.startswith("task:arithmetic prompt at row 0 (prompt_id ") and line.endswith(
        "with max_new_tokens=1024 it needs 1030 positions, more than the model's context of 64 "
        "(max_position_embeddings) (and 199 more rows): lower --max-new-tokens to 58 or less")
    for argv in (["--model", str(bare)], ["--tiny"]):  # never sampled, so never retried
        line = one_line(capsys, "select-prompts", *argv, "--data", "task:arithmetic", "--out", str(tmp_path / "o"))
        assert line.startswith("task:arithmetic prompt at row 0") and line.endswith("lower --max-new-tokens to 58 or less")
    assert not (tmp_path / "o").exists()


def test_a_task_name_given_as_data_is_one_line_and_never_asks_the_hub(tmp_path, capsys, monkeypatch, no_weights):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("datasets.load_dataset", lambda *a, **k: pytest.fail("the hub was asked"))
    bare = save_tiny(tmp_path / "bare")
    assert one_line(capsys, "eval", str(bare), "--data", "arithmetic") == (
        "--data arithmetic is a built-in task, not a dataset: give --data task:arithmetic")
    assert one_line(capsys, "select-prompts", "--tiny", "--data", "arithmetic-mixed", "--out", "o.jsonl") == (
        "--data arithmetic-mixed is a built-in task, not a prompt file: give --data task:arithmetic-mixed")
    assert one_line(capsys, "train", "--data", "arithmetic", "--model", str(bare)) == (
        "data: 'arithmetic' is a built-in task, not a dataset: give --task arithmetic (or --data task:arithmetic)")
    assert sorted(os.listdir(tmp_path)) == ["bare"]


def test_train_spells_a_task_as_data_too():
    config = TrainConfig(data="task:arithmetic-mixed")
    assert (config.task, config.data) == ("arithmetic-mixed", None)
    with pytest.raises(ConfigError, match="data='task:arithmetic' and task='arithmetic-mixed' name two tasks"):
        TrainConfig(data="task:arithmetic", task="arithmetic-mixed")


# -- files where the user expects them -----------------------------------------------------------------------------
def test_simulate_writes_no_file_unasked_and_json_alone_on_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["simulate", "--prompts", "50", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4 and os.listdir(tmp_path) == []
    assert cli.main(["simulate", "--prompts", "50", "--json", "--plot", "sim.png"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert captured.err.strip() == f"wrote {tmp_path / 'sim.png'}" and os.listdir(tmp_path) == ["sim.png"]


def test_plot_writes_into_the_run_folder(tmp_path, capsys, monkeypatch):
    run = make_run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plot", "run"]) == 0
    assert capsys.readouterr().out == f"wrote {run / 'plots' / 'training.png'}\n"
    assert one_line(capsys, "plot", "run", "run") == "plotting 2 runs together: give --out DIR for their training.png"
    assert one_line(capsys, "plot", "run/checkpoint-3") == "run/checkpoint-3 is inside run run, not a run itself: give run"
    assert one_line(capsys, "plot", ".") == ". is not a run but holds runs (run): give them"
    assert one_line(capsys, "plot", "nope").startswith("nope/metrics.jsonl does not exist")
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no nope/plots made for a run that is not there


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.fault("an output onto a run's own files or a run's inputs (eval --out RUN/checkpoint-N/model/"
                   "model.safetensors or the run's --eval-data, select-prompts --out RUN/metrics.jsonl, --pass-rates "
                   "RUN/checkpoint-N/trainer_state.json, plot --out RUN/checkpoint-N, simulate --plot, through a "
                   "symlink too)",
                   "exit 2 in one line naming the file, before any model loads; every byte of the run and its inputs "
                   "unchanged (the weights were destroyed by SIGBUS; the others overwritten, exit 0)")
@pytest.mark.parametrize("case", ["eval-weights", "eval-eval-data", "select-metrics", "select-trainer-state",
                                  "select-link-to-config", "plot-into-checkpoint", "simulate-plot", "multistep-json"])
def test_no_command_writes_onto_a_run_or_its_inputs(tmp_path, capsys, monkeypatch, no_weights, case):
    monkeypatch.chdir(tmp_path)
    held_out = tmp_path / "held.jsonl"
    held_out.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    run = make_run(tmp_path / "run", eval_data=str(held_out))
    (tmp_path / "link.jsonl").symlink_to(run / "config.json")
    before, held_before = tree(run), held_out.read_bytes()
    weights = "run/checkpoint-3/model/model.safetensors"
    argv, culprit = {
        "eval-weights": (["eval", "run", "--out", weights],
                         f"--out {weights} lies inside the model folder run/checkpoint-3/model"),
        "eval-eval-data": (["eval", "run", "--out", "held.jsonl"],
                           f"--out held.jsonl is the same file as the run's --eval-data {held_out}"),
        "select-metrics": (["select-prompts", "run", "--out", "run/metrics.jsonl"],
                           f"--out run/metrics.jsonl is metrics.jsonl of the training run in {run}"),
        "select-trainer-state": (["select-prompts", "run", "--pass-rates", "run/checkpoint-3/trainer_state.json"],
                                 f"--pass-rates run/checkpoint-3/trainer_state.json lies inside checkpoint-3/ of "
                                 f"the training run in {run}"),
        "select-link-to-config": (["select-prompts", "run", "--out", "link.jsonl"],
                                  f"--out link.jsonl is config.json of the training run in {run}"),
        "plot-into-checkpoint": (["plot", "run", "--out", "run/checkpoint-3"],
                                 f"--out run/checkpoint-3/training.png lies inside checkpoint-3/ of the training run "
                                 f"in {run}"),
        "simulate-plot": (["simulate", "--prompts", "50", "--plot", "run/metrics.jsonl"],
                          f"--plot run/metrics.jsonl is metrics.jsonl of the training run in {run}"),
        "multistep-json": (["simulate-multistep", "--prompts", "50", "--json", "run/config.json"],
                           f"--json run/config.json is config.json of the training run in {run}"),
    }[case]
    line = one_line(capsys, *argv)
    assert line.startswith(f"{culprit}: "), line
    assert tree(run) == before and held_out.read_bytes() == held_before


def test_a_new_file_in_a_run_folder_and_a_runs_own_plot_are_fine(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = make_run(tmp_path / "run")
    from reinforce_ada.outputs import refuse_unsafe_outputs

    refuse_unsafe_outputs({"--out": run / "eval.jsonl"}, [])  # the command's own file beside the run's
    assert cli.main(["plot", "run"]) == 0 and (run / "plots" / "training.png").is_file()
    assert cli.main(["plot", "run"]) == 0  # redrawn in place
    assert one_line(capsys, "plot", "run", "run", "--out", "run/plots").startswith(
        "--out run/plots/training.png lies inside plots/ of the training run in")


@pytest.mark.fault("select-prompts on prompt rows without an answer",
                   "exit 2 naming the rows, before any model loads (every pass rate was 0: 'kept 20 of 20' with "
                   "--min 0)")
def test_select_prompts_refuses_rows_without_an_answer(tmp_path, capsys, monkeypatch, no_weights):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in (
        {"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2="}, {"prompt": "3+3=", "answer": " "})))
    assert one_line(capsys, "select-prompts", "--tiny", "--data", "rows.jsonl", "--out", "o.jsonl", "--min", "0") == (
        "rows.jsonl: 2 of 3 rows have no answer in column 'answer' (row 1 (line 2), row 2 (line 3)); give every row "
        "a reference answer or remove those rows")
    assert sorted(os.listdir(tmp_path)) == ["rows.jsonl"]


@pytest.mark.fault("select-prompts run again onto its earlier output (RUN/selected_prompts.jsonl, --out, "
                   "--pass-rates)",
                   "exit 2 naming the files unless --overwrite; the earlier output unchanged (it was replaced "
                   "without asking)")
def test_select_prompts_replaces_its_earlier_output_only_with_overwrite(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = make_run(tmp_path / "run")
    assert cli.main(["select-prompts", "run", "--limit", "3", "-k", "1"]) == 0
    earlier = tree(run)
    assert one_line(capsys, "select-prompts", "run", "--limit", "3", "-k", "1") == (
        "--out run/selected_prompts.jsonl and --pass-rates run/pass_rates.jsonl already exist (an earlier output?): "
        "pass --overwrite to replace them, or give another path")
    (tmp_path / "mine.jsonl").write_text("my notes\n")
    assert one_line(capsys, "select-prompts", "run", "--limit", "3", "-k", "1", "--out", "mine.jsonl") == (
        "--out mine.jsonl already exists (an earlier output?): pass --overwrite to replace it, or give another path")
    assert tree(run) == earlier and (tmp_path / "mine.jsonl").read_text() == "my notes\n"
    assert cli.main(["select-prompts", "run", "--limit", "4", "-k", "1", "--overwrite"]) == 0
    assert len((run / "pass_rates.jsonl").read_text().splitlines()) == 4


@pytest.mark.fault("eval --out onto a file that already exists (a user's own, or an earlier eval's)",
                   "exit 2 naming the file unless --overwrite, before any model loads; the file unchanged (it was "
                   "replaced without asking)")
def test_eval_replaces_an_existing_out_file_only_with_overwrite(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "run")
    (tmp_path / "mine.jsonl").write_text("my notes\n")
    with monkeypatch.context() as patched:
        patched.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: pytest.fail("weights were loaded"))
        assert one_line(capsys, "eval", "run", "--k", "1", "--limit", "2", "--out", "mine.jsonl") == (
            "--out mine.jsonl already exists (an earlier output?): pass --overwrite to replace it, or give another "
            "path")
    assert (tmp_path / "mine.jsonl").read_text() == "my notes\n"
    assert cli.main(["eval", "run", "--k", "1", "--out", "mine.jsonl", "--overwrite", "--json"]) == 0
    rows = (tmp_path / "mine.jsonl").read_text().splitlines()
    assert len(rows) == 10 and all("prompt_id" in json.loads(row) for row in rows)


@pytest.mark.fault("eval RUN after the run's --eval-data file was replaced (it evaluated other prompts than the "
                   "run's eval/accuracy, without a word)",
                   "a warning naming the file and its fingerprints then and now; the JSON lists it under "
                   "inputs_changed")
def test_eval_of_a_run_says_when_its_held_out_prompts_changed(tmp_path, capsys, monkeypatch):
    from reinforce_ada.data import load_prompts
    from reinforce_ada.runs.inputs import prompts_fingerprint

    monkeypatch.chdir(tmp_path)
    held_out = tmp_path / "held.jsonl"
    held_out.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3)))
    run = make_run(tmp_path / "run", eval_data=str(held_out))
    state_file = run / "checkpoint-3" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["inputs"] = {"held_out": prompts_fingerprint(list(load_prompts(str(held_out))))}
    state_file.write_text(json.dumps(state))
    capsys.readouterr()
    assert cli.main(["eval", "run", "--k", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert "inputs_changed" not in json.loads(captured.out) and "warning" not in captured.err
    held_out.write_text(json.dumps({"prompt": "7+1=", "answer": "8"}) + "\n")
    assert cli.main(["eval", "run", "--k", "1", "--json"]) == 0
    captured = capsys.readouterr()
    results = json.loads(captured.out)
    changed = results["inputs_changed"]
    assert len(changed) == 1 and changed[0].startswith(
        f"the held-out prompts (--eval-data {held_out}) changed since run/checkpoint-3 was written: 3 rows "
        f"with SHA-256 "), changed
    assert " then, 1 row with SHA-256 " in changed[0]
    assert f"warning: {changed[0]}; this evaluation reads it as it is now" in captured.err
    assert results["prompts"] == {"held-out": f"the run's held-out file as it is now (1 of {held_out}; changed since "
                                              f"the run measured its eval/accuracy)"}


# -- --help --------------------------------------------------------------------------------------------------------
def test_help_is_plain_text_and_lists_the_registries(monkeypatch):
    from reinforce_ada.data.tasks import TASKS

    monkeypatch.setitem(TASKS._fns, "my-task", lambda **options: None)  # a task registered later is listed too
    parser = cli.build_parser()
    (subparsers,) = [action for action in parser._actions if action.dest == "command"]
    texts = {name: sub.format_help() for name, sub in subparsers.choices.items()}
    for name, text in texts.items():
        assert "``" not in text and ":class:`" not in text and ":data:`" not in text, name
    flat = {name: " ".join(text.split()).replace("- ", "-") for name, text in texts.items()}  # wrapped at hyphens
    for name in [*TASKS.names(), *STRATEGIES]:
        assert name in flat["train"]
    for name in ("eval", "select-prompts"):
        assert "NAME: arithmetic, arithmetic-chat, arithmetic-mixed, my-task, reasoning-gym:<dataset>" in flat[name]


def test_select_prompts_retries_only_what_the_one_rule_calls_transient():
    from reinforce_ada.research.select_prompts import estimate_pass_rates
    from reinforce_ada.sampling.protocols import FatalGenerationError
    from reinforce_ada.types import Completion, Prompt

    class Generator:
        def __init__(self, error):
            self.error, self.num_calls = error, 0

        def generate(self, requests):
            self.num_calls += 1
            if self.num_calls == 1:
                raise self.error
            return [[Completion(r.prompt.prompt_id, "1") for _ in range(r.num_samples)] for r in requests]

    def verifier(prompts, completions):
        return [1.0 for _ in completions]

    prompts = [Prompt("p", "1+0=", "1")]
    flaky = Generator(ConnectionError("reset"))
    assert estimate_pass_rates(prompts, flaky, verifier, k=2)[0].pass_rate == 1.0 and flaky.num_calls == 2
    broken = Generator(ValueError("prompt too long for the model"))
    with pytest.raises(FatalGenerationError, match="not retried"):
        estimate_pass_rates(prompts, broken, verifier, k=2)
    assert broken.num_calls == 1  # never retried: a configuration error comes out the same every time


@pytest.mark.parametrize("settings", [{"strategy": name} for name in STRATEGIES] + [
    {"sampler": {"mode": "streaming", "memory": {"enabled": True}}}, {"model": "org/model", "task": "arithmetic-mixed"}])
def test_a_run_config_as_saved_is_read_back_as_the_same_config(settings):
    """What ``locate_model`` reads from a checkpoint (``asdict`` of the run's config) builds the same config again."""
    config = TrainConfig(**settings)
    assert TrainConfig(**asdict(config)) == config


@pytest.mark.fault("eval RUN whose strata.json was fixed on other prompts than the held-out ones it evaluates",
                   "no per-stratum rows, and the strata line says why: none of the N held-out prompts is among the "
                   "strata's (it showed '0 - (no prompt)' per stratum without a word)")
def test_eval_says_why_a_runs_strata_do_not_fit_its_prompts(tmp_path):
    from types import SimpleNamespace

    from reinforce_ada.commands.eval import _strata_groups
    from reinforce_ada.difficulty import Strata
    from reinforce_ada.types import Prompt

    run = tmp_path / "run"
    run.mkdir()
    others = [Prompt(i, f"{i}*{i}=", str(i * i)) for i in range(4)]
    (run / "strata.json").write_text(json.dumps(Strata.fix(others, [(4, 1)] * 4, 4).to_json()))
    held_out = [Prompt(i, f"{i}+{i}=", str(2 * i)) for i in range(3)]
    groups, line = _strata_groups(SimpleNamespace(run_dir=run), {"held-out": held_out})
    assert groups is None
    assert line == (f"{run / 'strata.json'} does not fit these prompts: none of the 3 held-out prompts is among the 4 "
                    f"it fixed strata on (the held-out prompts changed since?), so there is no accuracy per stratum")
    groups, line = _strata_groups(SimpleNamespace(run_dir=run), {"held-out": held_out + others[:1]})
    assert groups is not None and line.endswith("; 3 of these prompts are not among them and are in no stratum")
