"""A run that cannot learn stops early naming the cause; nothing a user made is overwritten or mixed; every number
written is true (the trainer's side). Each test asserts the exact outcome: the exception or exit code, the
message naming the field / file / row / function, and the files left untouched byte for byte."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import reward_fixtures
from reinforce_ada.config import ConfigError, TrainConfig
from reinforce_ada.training.guards import RunStopped
from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.errors import CheckpointError, RunFolderError
from reinforce_ada.runs.files import write_atomic
from reinforce_ada.runs.metrics_file import truncate_metrics
from reinforce_ada.training import Trainer
from reinforce_ada.types import Prompt
from trainer_fixtures import addition_prompts, digit_verifier, small_config

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent




def setup(verifier=digit_verifier, evaluate=True):
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(64, 1),
                eval_prompts=addition_prompts(8, 2) if evaluate else [], verifier=verifier)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def metric_lines(folder: Path) -> list[dict]:
    if not (folder / "metrics.jsonl").exists():
        return []
    return [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]


def step_lines(folder: Path) -> list[dict]:
    return [r for r in metric_lines(folder) if "sampling/total_samples" in r]


# -- the verifier ------------------------------------------------------------------------------------------------
def test_a_reward_function_that_always_raises_stops_the_first_step_naming_it(tmp_path):
    parts = setup(reward_fixtures.always_raises, evaluate=False)
    before = {k: v.clone() for k, v in parts["model"].state_dict().items()}
    trainer = Trainer(small_config(tmp_path / "run"), **parts)
    with pytest.raises(RunStopped) as err:
        trainer.train()
    message = str(err.value)
    assert message.startswith("step 1: the verifier 'always_raises' could not score")
    assert "first error: ValueError: this reward function is broken" in message
    assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())
    assert not list((tmp_path / "run").glob("checkpoint-*")) and step_lines(tmp_path / "run") == []
    history = [json.loads(x) for x in (tmp_path / "run" / "config_history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start", "stopped"]
    assert history[1]["step"] == 0 and history[1]["reason"] == message


def _dict_rewards(prompts, completions):  # must never be read as its keys 0..n-1
    return {i: 1.0 for i in range(len(completions))}


def _str_rewards(prompts, completions):  # was read as one reward per character
    return "1" * len(completions)


def _nan_rewards(prompts, completions):  # was a VerifierError traceback, exit 1, no "stopped" event
    return [float("nan")] * len(completions)


def _inf_from_step_two(prompts, completions, calls=[]):
    calls.append(1)
    return [1.0 if len(calls) == 1 else -float("inf")] * len(completions)


@pytest.mark.fault("reward function returns a dict, a str, NaN or -inf (always or from a later step)",
                   "exit 3: RunStopped naming the cause, a 'stopped' event, nothing trained or saved")
@pytest.mark.parametrize("verifier, step, cause", [
    (_dict_rewards, 1, "verifier returned a dict"),
    (_str_rewards, 1, "verifier returned a str"),
    (_nan_rewards, 1, "reward=nan"),
    (_inf_from_step_two, 2, "reward=-inf"),
])
def test_rewards_that_are_not_real_numbers_stop_the_run_naming_the_cause(tmp_path, verifier, step, cause):
    trainer = Trainer(small_config(tmp_path / "run", sampler={"max_rounds": 1}), **setup(verifier, evaluate=False))
    with pytest.raises(RunStopped) as err:
        trainer.train()
    message = str(err.value)
    assert message.startswith(f"step {step}: the verifier '{verifier.__name__}' could not score")
    assert cause in message
    history = [json.loads(x) for x in (tmp_path / "run" / "config_history.jsonl").read_text().splitlines()]
    assert history[-1]["event"] == "stopped" and history[-1]["reason"] == message
    assert len(step_lines(tmp_path / "run")) == step - 1


def _exiting_rewards(prompts, completions):
    raise SystemExit(4)


def _interrupting_rewards(prompts, completions):
    raise KeyboardInterrupt


@pytest.mark.fault("sys.exit() inside a reward function", "a failed verifier call: exit 3 naming sys.exit(4), "
                   "a 'stopped' event (it was exit 4 with no message)")
def test_a_reward_function_calling_sys_exit_is_a_failed_call_not_the_end_of_the_process(tmp_path):
    trainer = Trainer(small_config(tmp_path / "run", sampler={"max_rounds": 1}), **setup(_exiting_rewards,
                                                                                           evaluate=False))
    with pytest.raises(RunStopped, match=r"sys\.exit\(4\)"):
        trainer.train()
    history = [json.loads(x) for x in (tmp_path / "run" / "config_history.jsonl").read_text().splitlines()]
    assert history[-1]["event"] == "stopped"


@pytest.mark.fault("KeyboardInterrupt / SIGINT during training (Ctrl-C, or raised by a reward function)",
                   "a 'stopped' event saying so; the CLI prints one line and exits 130 (it was a traceback, exit 1)")
def test_an_interrupt_during_training_is_recorded_and_ends_in_one_line(tmp_path, monkeypatch, capsys):
    import reinforce_ada.training as training
    from reinforce_ada.cli import main

    trainer = Trainer(small_config(tmp_path / "run", sampler={"max_rounds": 1}), **setup(_interrupting_rewards,
                                                                                           evaluate=False))
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    history = [json.loads(x) for x in (tmp_path / "run" / "config_history.jsonl").read_text().splitlines()]
    assert history[-1] == {**history[-1], "event": "stopped", "reason": "interrupted (KeyboardInterrupt) during step 1"}

    class Interrupted:
        def __init__(self, config):
            pass

        def train(self):
            raise KeyboardInterrupt

        def close(self):
            pass

    monkeypatch.setattr(training, "Trainer", Interrupted)
    assert main(["train", "--max-steps", "1", "--output-dir", str(tmp_path / "cli")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("interrupted: reinforce-ada train stopped (KeyboardInterrupt)") and "Traceback" not in \
        "\n".join(err)


@pytest.mark.fault("Ctrl-C during the held-out evaluation before the first step; SIGHUP (the terminal gone) mid-step",
                   "a 'stopped' event naming the interrupt and where; one line saying how the run goes on: "
                   "the same command when it stopped before its first step, else --resume from the newest (it said "
                   "--resume, which then refused; SIGHUP ended the process without a word or an event); under nohup the run goes on "
                   "(the SIGHUP handler replaced nohup's: the terminal's close stopped it)")
def test_an_interrupt_says_how_the_run_goes_on_and_a_hangup_is_an_interrupt(tmp_path, cli_run, capsys):
    from reinforce_ada import cli

    out, held_out = tmp_path / "run", tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps({"prompt": p.prompt, "answer": p.answer}) + "\n"
                                for p in addition_prompts(4, 7)))
    interrupted = [*cli_run, "--eval-data", str(held_out), "--output-dir", str(out)]
    for strata, where in (("0", "the held-out evaluation at step 0"), ("4", "the difficulty strata before training")):
        assert cli.main([*interrupted, "--verifier", "reward_fixtures:interrupts", "--eval-strata-samples", strata,
                         "--overwrite"]) == 130
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"interrupted: reinforce-ada train stopped (KeyboardInterrupt during {where}; no checkpoint was written "
            f"yet, so there is nothing to resume: the same command starts it over)")
        assert history(out)[-1]["reason"] == f"interrupted (KeyboardInterrupt) during {where}"
    assert cli.main(interrupted) == 0  # as the line says

    hung_up = run_cli([*cli_run, "--verifier", "reward_fixtures:hangs_up", "--save-steps", "1", "--output-dir",
                       str(tmp_path / "hup")], tmp_path)
    assert hung_up.returncode == 129, hung_up.stderr[-2000:]
    assert hung_up.stderr.strip().splitlines()[-1] == (
        "interrupted: reinforce-ada train stopped (SIGHUP during step 1; no checkpoint was written yet, so there is "
        "nothing to resume: the same command starts it over)")
    assert history(tmp_path / "hup")[-1] == {**history(tmp_path / "hup")[-1], "event": "stopped",
                                             "reason": "interrupted (SIGHUP) during step 1"}

    # under nohup (SIGHUP ignored from the start) the terminal going away does not stop the run
    nohup = run_cli([*cli_run, "--verifier", "reward_fixtures:hangs_up_and_scores", "--output-dir",
                     str(tmp_path / "nohup")], tmp_path, ignore_hangup=True)
    assert nohup.returncode == 0, nohup.stderr[-2000:]
    assert (tmp_path / "nohup" / "summary.json").exists() and "interrupted" not in nohup.stderr


@pytest.mark.fault("--eval-data naming the training file itself (--data same.jsonl --eval-data same.jsonl), or held-out "
                   "prompts that are also training prompts",
                   "the same file: exit 2 before anything loads, one line; shared prompts: one warning line counting "
                   "them (it trained and evaluated on the same prompts without a word)")
def test_held_out_prompts_that_are_the_training_prompts_are_refused_or_counted(tmp_path, cli_run, capsys, caplog):
    from reinforce_ada import cli

    data = cli_run[cli_run.index("--data") + 1]
    assert cli.main([*cli_run, "--eval-data", data, "--output-dir", str(tmp_path / "same")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: eval_data is the training data itself ({data}): held-out accuracy would be measured on the prompts "
        f"the run trains on; give held-out prompts of their own (or leave --eval-data out: no held-out accuracy)"]
    assert not (tmp_path / "same").exists()
    overlapping = tmp_path / "held_out.jsonl"
    trained = [json.loads(line) for line in Path(data).read_text().splitlines()]
    overlapping.write_text("".join(json.dumps(row) + "\n" for row in [*trained[:3], {"prompt": "x", "answer": "1"}]))
    assert cli.main([*cli_run, "--eval-data", str(overlapping), "--output-dir", str(tmp_path / "shared")]) == 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "held-out" in r.getMessage()] == [
        f"3 of the 4 held-out prompts ({overlapping}) are also training prompts ({data}): held-out accuracy is partly "
        f"measured on prompts the run trains on"]


def history(run) -> list[dict]:
    return [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("strata, where", [
    (0, "held-out evaluation at step 0: the verifier 'always_none' could not score 16 of 16"),
    (3, "difficulty strata before training: the verifier 'always_none' could not score 24 of 24")])
def test_all_none_rewards_stop_the_held_out_evaluation_instead_of_reporting_zero_accuracy(tmp_path, strata, where):
    """Neither the strata (8 prompts x 3 samples, before training) nor the step-0 evaluation (8 x 2) is made up of
    unscored samples."""
    trainer = Trainer(small_config(tmp_path / "run", eval_strata_samples=strata), **setup(reward_fixtures.always_none))
    with pytest.raises(RunStopped, match=rf"^{where} completions .*it returned None for them"):
        trainer.train()
    assert not (tmp_path / "run" / "summary.json").exists()
    assert not (tmp_path / "run" / "strata.json").exists()


def test_comparisons_that_fail_inside_the_verifier_count_as_failures(tmp_path):
    from reinforce_ada.verifiers.base import AnswerVerifier

    class BrokenCompare(AnswerVerifier):  # scores 0 and counts stats["failures"] when compare raises, like math
        def reference(self, prompt):
            return prompt.answer

        def answer(self, completion):
            return completion.text

        def compare(self, answer, reference):
            raise RecursionError("sympy blew up")

    with pytest.raises(RunStopped, match=r"^step 1: the verifier 'BrokenCompare' could not score 64 of 64 completions "
                                         r".*64 comparison\(s\) failed inside the verifier"):
        Trainer(small_config(tmp_path / "run", sampler={"max_rounds": 4}),
                **setup(BrokenCompare(), evaluate=False)).train()


def test_the_failure_rate_limit_is_configurable(tmp_path):
    def half_fail(prompts, completions):  # prompts with an odd index never score
        return [None if int(p.prompt_id.split("-")[1]) % 2 else 1.0 for p in prompts]

    prompts = [Prompt(f"1-{i}", f"{i % 10}+1=", str(i % 10 + 1)) for i in range(8)]
    parts = dict(setup(half_fail, evaluate=False), train_prompts=prompts)
    with pytest.raises(RunStopped, match=r"^step 1: .*could not score 16 of 32 completions \(50% >= "
                                         r"max_verifier_failure_rate=0.5\)"):
        Trainer(small_config(tmp_path / "strict", max_verifier_failure_rate=0.5), **parts).train()
    parts = dict(setup(half_fail, evaluate=False), train_prompts=prompts)
    summary = Trainer(small_config(tmp_path / "default"), **parts).train()  # default: all must fail
    assert summary["steps"] == 2
    assert [r["sampling/num_verifier_failures"] for r in step_lines(tmp_path / "default")] == [16.0, 16.0]


def test_verifier_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="max_verifier_failure_rate"):
        TrainConfig(max_verifier_failure_rate=0)
    with pytest.raises(ConfigError, match="verifier_timeout"):
        TrainConfig(verifier_timeout=-1.0)
    with pytest.raises(ConfigError, match="verifier_answer_kwarg"):
        TrainConfig(verifier_answer_kwarg="not a name")
    with pytest.raises(ConfigError, match="resume and overwrite"):
        TrainConfig(resume=True, overwrite=True)


def test_a_verifier_that_hangs_costs_a_step_two_timeouts_then_stops_the_run(tmp_path):
    parts = setup(reward_fixtures.sleeps_30s, evaluate=False)
    trainer = Trainer(small_config(tmp_path / "run", verifier_timeout=1.0, sampler={"max_rounds": 4}), **parts)
    with pytest.raises(RunStopped, match=r"^step 1: the verifier 'sleeps_30s' could not score 64 of 64 "
                                         r"completions .*2 call\(s\) ran past the verifier timeout of 1 s"):
        trainer.train()
    # Rounds 1 and 2 time out (16 completions each); rounds 3 and 4 are not even tried.
    stats = trainer.verifier.stats
    assert (stats["timeouts"], stats["timed_out_completions"], stats["skipped"]) == (2, 32, 32)
    trainer.verifier.close()


def test_timeouts_are_counted_in_the_metrics(tmp_path):
    parts = setup(reward_fixtures.sleeps_30s, evaluate=False)
    config = small_config(tmp_path / "run", max_steps=1, verifier_timeout=1.0, max_verifier_failure_rate=2.0)
    Trainer(config, **parts).train()  # a rate above 1 never stops: the step trains on its 32 failures
    step = step_lines(tmp_path / "run")[0]
    assert (step["verifier/timeouts"], step["verifier/timed_out_completions"]) == (2, 32)
    assert step["sampling/num_verifier_failures"] == 32.0 == step["sampling/total_samples"]


def test_verifier_options_follow_the_config():
    from reinforce_ada.runs.data import verifier_options

    assert verifier_options("m:f", TrainConfig()) == {"answer_key": "answer"}
    assert verifier_options("m:f", TrainConfig(answer_key="solution")) == {"answer_key": "solution"}
    assert verifier_options("m:f", TrainConfig(verifier_answer_kwarg="ref")) == {"answer_key": "ref"}
    assert verifier_options("math", TrainConfig(verifier_timeout=2.0)) == {"timeout": 2.0}
    assert verifier_options("exact", TrainConfig(verifier_timeout=2.0)) == {}  # wrapped in a TimedVerifier instead


def test_a_timed_verifier_scores_like_the_plain_one_and_keeps_counting_across_calls(tmp_path):
    from reinforce_ada.verifiers.timed import TimedVerifier, VerifierCallError

    prompts = addition_prompts(4, 3)
    from reinforce_ada.types import Completion

    completions = [Completion(p.prompt_id, str(p.answer)) for p in prompts]
    timed = TimedVerifier(reward_fixtures.first_digit, timeout=30.0)
    assert timed(prompts, completions) == reward_fixtures.first_digit(prompts, completions) == [1.0] * 4
    raising = TimedVerifier(reward_fixtures.always_raises, timeout=30.0)
    with pytest.raises(VerifierCallError, match="always_raises.*ValueError: this reward function is broken"):
        raising(prompts, completions)
    with pytest.raises(ConfigError, match="picklable .* not a lambda or a closure"):
        TimedVerifier(lambda p, c: [1.0] * len(c), timeout=1.0)
    timed.close()
    raising.close()


# -- the command line ------------------------------------------------------------------------------------------
def run_cli(args, cwd, ignore_hangup=False):
    """The command line in a process of its own, started with SIGINT and SIGHUP at their defaults (as from a
    terminal, however the tests were started: a shell's background job ignores SIGINT, nohup SIGHUP) or, with
    ``ignore_hangup``, with SIGHUP ignored (as under nohup)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))

    def signals():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN if ignore_hangup else signal.SIG_DFL)

    return subprocess.run([sys.executable, "-m", "reinforce_ada.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, preexec_fn=signals)


def test_cli_a_verifier_function_that_always_raises_exits_non_zero_in_step_one(tmp_path, cli_run):
    out = tmp_path / "run"
    result = run_cli([*cli_run, "--verifier", "reward_fixtures:always_raises", "--output-dir", str(out)], tmp_path)
    assert result.returncode == 3, result.stderr[-2000:]
    assert ("error: step 1: the verifier 'reward_fixtures:always_raises' could not score 32 of 32 completions"
            in result.stderr)
    assert "ValueError: this reward function is broken" in result.stderr
    assert step_lines(out) == [] and not list(out.glob("checkpoint-*"))


def test_cli_a_second_run_into_the_same_folder_fails_and_leaves_every_byte(tmp_path, cli_run, capsys):
    from reinforce_ada import cli

    out = tmp_path / "run"
    assert cli.main([*cli_run, "--output-dir", str(out)]) == 0
    first = snapshot(out)
    assert "metrics.jsonl" in first and "checkpoint-2/model/model.safetensors" in first
    capsys.readouterr()
    assert cli.main([*cli_run, "--output-dir", str(out), "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert f"error: {out} already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert snapshot(out) == first


@pytest.mark.fault("a verifier timeout with a reward function pickle cannot send to its worker (a module-level "
                   "lambda, a closure)", "exit 2 before the model loads, one line naming the function and why (it "
                   "was a TypeError traceback, exit 1)")
@pytest.mark.parametrize("function", ["lambda_reward", "closure_reward"])
def test_cli_a_timed_verifier_that_cannot_be_pickled_is_one_line_before_anything_loads(tmp_path, cli_run, capsys,
                                                                                       function):
    from reinforce_ada import cli

    out = tmp_path / "run"
    code = cli.main([*cli_run, "--verifier", f"reward_fixtures:{function}", "--verifier-timeout", "5",
                     "--output-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: verifier 'reward_fixtures:{function}' with verifier_timeout: a timed verifier "
                             f"runs in a worker process, so it must be picklable")
    assert not out.exists()


def test_cli_the_docs_example_reward_function_needs_its_answer_keyword(tmp_path, cli_run, capsys):
    from reinforce_ada import cli

    args = [*cli_run, "--verifier", "reward_fixtures:correct", "--max-steps", "1"]
    assert cli.main([*args, "--output-dir", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "reward function 'reward_fixtures:correct' cannot be called" in err
    assert "missing a required argument: 'solution'" in err and "--verifier-answer-kwarg" in err
    assert not (tmp_path / "a").exists()  # a failed start leaves no folder
    assert cli.main([*args, "--output-dir", str(tmp_path / "b"), "--verifier-answer-kwarg", "solution"]) == 0
    assert step_lines(tmp_path / "b")[0]["sampling/num_verifier_failures"] == 0


def test_cli_a_hanging_verifier_with_a_timeout_costs_a_few_timeouts(tmp_path, cli_run, capsys):
    from reinforce_ada import cli

    out = tmp_path / "run"
    code = cli.main([*cli_run, "--verifier", "reward_fixtures:sleeps_30s", "--verifier-timeout", "2",
                     "--max-rounds", "4", "--output-dir", str(out)])
    assert code == 3
    err = capsys.readouterr().err
    assert "step 1: the verifier 'reward_fixtures:sleeps_30s' could not score 64 of 64 completions" in err
    assert "2 call(s) ran past the verifier timeout of 2 s" in err


@pytest.mark.fault("a `module:function` reward returns a dict, a generator or strings (train, with and without "
                   "--verifier-timeout)", "exit 3 naming what came back; nothing trained or saved (a dict was read as "
                   "its keys: reward_mean 13.79, exit 0)")
@pytest.mark.parametrize("timeout", [[], ["--verifier-timeout", "30"]], ids=["in-process", "timed-worker"])
@pytest.mark.parametrize("function, cause", [
    ("as_dict", "reward function 'as_dict' returned a dict; it must return a list of"),
    ("as_generator", "reward function 'as_generator' returned a generator"),
    ("as_digit_strings", "reward function 'as_digit_strings' returned reward='1' (a str)"),
])
def test_cli_a_reward_function_result_that_is_not_a_list_of_numbers_stops_the_run(tmp_path, cli_run, capsys, timeout,
                                                                                  function, cause):
    from reinforce_ada import cli

    out = tmp_path / "run"
    assert cli.main([*cli_run, "--verifier", f"reward_fixtures:{function}", *timeout, "--output-dir", str(out)]) == 3
    err = capsys.readouterr().err
    assert f"error: step 1: the verifier 'reward_fixtures:{function}' could not score 32 of 32 completions" in err
    assert cause in err
    assert step_lines(out) == [] and not list(out.glob("checkpoint-*"))


@pytest.mark.fault("`eval` / `select-prompts` with a reward function that returns a dict",
                   "exit 3 naming the cause, nothing written (it gave Ave@k 0.984 and pass rates 0.75-1.0, exit 0)")
def test_eval_and_select_prompts_stop_on_a_reward_function_that_returns_a_dict(tmp_path, cli_run, capsys):
    from reinforce_ada import cli

    run = tmp_path / "run"
    assert cli.main([*cli_run, "--max-steps", "1", "--output-dir", str(run)]) == 0
    capsys.readouterr()
    common = ["--verifier", "reward_fixtures:as_dict", "--max-new-tokens", "4"]
    data = cli_run[cli_run.index("--data") + 1]
    assert cli.main(["eval", str(run), *common, "--data", data, "--k", "2", "--limit", "4", "--json"]) == 3
    err = capsys.readouterr().err
    assert f"error: eval of {data}: the verifier 'reward_fixtures:as_dict' could not score 8 of 8" in err
    assert "returned a dict" in err
    assert cli.main(["select-prompts", str(run), *common, "-k", "2", "--limit", "4"]) == 3
    err = capsys.readouterr().err
    assert "error: select-prompts: the verifier 'reward_fixtures:as_dict' could not score 8 of 8" in err
    assert not (run / "selected_prompts.jsonl").exists() and not (run / "pass_rates.jsonl").exists()


# -- the run folder ------------------------------------------------------------------------------------------------
def test_overwrite_deletes_the_old_run_first_and_never_mixes(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=3, save_steps=1), **setup()).train()
    (out / "notes.txt").write_text("mine")  # not a run file: kept
    (out / "plots" / "my_figure.svg").write_text("<svg/>")  # the user's file inside a run folder: kept
    Trainer(small_config(out, max_steps=2, overwrite=True, seed=1), **setup()).train()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]
    assert [r["step"] for r in metric_lines(out)] == [0, 1, 2, 2]
    assert json.loads((out / "config.json").read_text())["seed"] == 1
    assert (out / "notes.txt").read_text() == "mine" and (out / "plots" / "my_figure.svg").read_text() == "<svg/>"
    history = [json.loads(x) for x in (out / "config_history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start"] and history[0]["config"]["seed"] == 1


def test_a_users_own_config_json_is_never_overwritten_or_deleted(tmp_path):
    out = tmp_path / "project"
    out.mkdir()
    (out / "config.json").write_text('{"my": "settings"}')
    for overwrite in (False, True):
        with pytest.raises(RunFolderError, match=r"project/config.json was not written by a training run, and a run "
                                                 r"would overwrite it; move it out of .*project first, or choose "
                                                 r"another --output-dir"):
            Trainer(small_config(out, overwrite=overwrite), **setup())
    assert [p.name for p in out.iterdir()] == ["config.json"]
    assert (out / "config.json").read_text() == '{"my": "settings"}'


def test_resume_refuses_changed_settings_unless_forced_and_records_them(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    first = snapshot(out)
    for field, value in [("seed", 1), ("strategy", "grpo"), ("learning_rate", 0.1), ("batch_size", 8)]:
        with pytest.raises(RunFolderError, match=rf"changed settings \({field}: "):
            Trainer(small_config(out, max_steps=3, resume=True, **{field: value}), **setup())
    assert snapshot(out) == first
    trainer = Trainer(small_config(out, max_steps=3, resume=True, learning_rate=0.1, force_resume_changes=True),
                      **setup())
    trainer.train()
    history = [json.loads(x) for x in (out / "config_history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start", "resume"]
    assert history[1]["step"] == 2 and history[1]["forced"] is True
    assert history[1]["changed"]["learning_rate"] == [0.01, 0.1] and history[1]["changed"]["max_steps"] == [2, 3]


def test_resume_of_a_folder_with_a_run_but_no_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 0, "eval/accuracy": 0.5}\n')
    with pytest.raises(RunFolderError, match="holds a run .*metrics.jsonl.* but no checkpoint to resume from"):
        Trainer(small_config(out, resume=True), **setup())
    assert (out / "metrics.jsonl").read_text() == '{"step": 0, "eval/accuracy": 0.5}\n'


def test_a_run_that_appears_while_this_one_starts_is_not_touched(tmp_path):
    out = tmp_path / "run"
    trainer = Trainer(small_config(out), **setup())
    # e.g. a process that does not take the folder's lock (an older version), started at the same time
    (out / "metrics.jsonl").write_text("another run's line\n")
    with pytest.raises(RunFolderError, match="now holds a run .*metrics.jsonl.* nothing was written"):
        trainer.train()
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl"]
    assert (out / "metrics.jsonl").read_text() == "another run's line\n"


def test_a_failed_start_leaves_no_folder(tmp_path):
    long_prompt = Prompt("long-one", "1+" * 40 + "1=", "41")
    parts = dict(setup(), train_prompts=addition_prompts(10, 1) + [long_prompt])
    with pytest.raises(ConfigError, match=r"training prompt at row 10 \(prompt_id 'long-one'\) is 82 tokens; with "
                                          r"max_new_tokens=4 it needs 86 positions, more than the model's context of "
                                          r"64"):
        Trainer(small_config(tmp_path / "run"), **parts)
    assert not (tmp_path / "run").exists()
    parts = dict(setup(), eval_prompts=[long_prompt])
    with pytest.raises(ConfigError, match=r"held-out prompt at row 0 \(prompt_id 'long-one'\)"):
        Trainer(small_config(tmp_path / "run"), **parts)
    assert not (tmp_path / "run").exists()


# -- the update --------------------------------------------------------------------------------------------------
def test_a_huge_reward_stops_before_the_update_and_saves_nothing(tmp_path):
    def huge(prompts, completions):
        return [1e300 if i == 0 else 0.0 for i in range(len(completions))]

    parts = setup(huge, evaluate=False)
    before = {k: v.clone() for k, v in parts["model"].state_dict().items()}
    trainer = Trainer(small_config(tmp_path / "run"), **parts)
    with pytest.raises(RunStopped, match=r"^step 1: non-finite values in the advantages \(\d+ of \d+\); the largest "
                                         r"\|reward\| is 1e\+300"):
        trainer.train()
    assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())
    assert trainer.totals["optimizer_steps"] == 0 and not list((tmp_path / "run").glob("checkpoint-*"))


def test_non_finite_loss_or_gradient_never_reaches_the_optimizer(tmp_path, monkeypatch):
    trainer = Trainer(small_config(tmp_path / "run"), **setup(evaluate=False))
    real = trainer.update.policy_loss
    trainer.update.policy_loss = lambda *a, **k: (real(*a, **k)[0] * float("nan"), real(*a, **k)[1])
    steps = []
    monkeypatch.setattr(trainer.update.optimizer, "step", lambda *a, **k: steps.append(1))
    with pytest.raises(RunStopped, match=r"^step 1: non-finite values in the loss"):
        trainer.train()
    assert steps == []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: torch.tensor(float("inf")))
    trainer = Trainer(small_config(tmp_path / "run2"), **setup(evaluate=False))
    monkeypatch.setattr(trainer.update.optimizer, "step", lambda *a, **k: steps.append(1))
    with pytest.raises(RunStopped, match=r"^step 1: non-finite values in the gradient norm"):
        trainer.train()
    assert steps == []


# -- metrics and checkpoints ---------------------------------------------------------------------------------------
class CountingVerifier:
    def __init__(self):
        self.stats = {"completions": 0}

    def __call__(self, prompts, completions):
        self.stats["completions"] += len(completions)
        return digit_verifier(prompts, completions)


def test_resume_keeps_metrics_continuous_and_verifier_counters_cumulative(tmp_path):
    Trainer(small_config(tmp_path / "a", max_steps=3), **setup(CountingVerifier())).train()
    Trainer(small_config(tmp_path / "b", max_steps=2), **setup(CountingVerifier())).train()
    (tmp_path / "b" / ".tmp-checkpoint-7-123").mkdir()  # left by a run killed while saving
    Trainer(small_config(tmp_path / "b", max_steps=3, resume=True), **setup(CountingVerifier())).train()
    assert not list((tmp_path / "b").glob(".tmp-checkpoint-*"))
    assert [r["step"] for r in metric_lines(tmp_path / "b")] == [0, 1, 2, 2, 3, 3]  # b's final evaluation kept
    counts = lambda folder: [r["verifier/completions"] for r in step_lines(folder)]  # noqa: E731
    assert counts(tmp_path / "b") == counts(tmp_path / "a")
    assert counts(tmp_path / "b")[2] > counts(tmp_path / "b")[1]


def test_a_kill_after_the_final_evaluation_leaves_one_final_evaluation_line(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    (out / "summary.json").unlink()  # killed after the final evaluation line, before the summary
    Trainer(small_config(out, resume=True), **setup()).train()
    assert [r["step"] for r in metric_lines(out)] == [0, 1, 2, 2]
    assert len([r for r in metric_lines(out) if r["step"] == 2 and "sampling/total_samples" not in r]) == 1


def test_a_tampered_checkpoint_step_is_refused_and_nothing_is_truncated(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    state_file = out / "checkpoint-2" / "trainer_state.json"
    state_file.write_text(state_file.read_text().replace('"step": 2', '"step": -5', 1))
    first = snapshot(out)
    with pytest.raises(CheckpointError, match=r"trainer_state.json is not the file this checkpoint wrote \(its size "
                                              r"or SHA-256 differs .*manifest.json\).*no earlier intact checkpoint"):
        Trainer(small_config(out, resume=True, max_steps=3), **setup())
    assert snapshot(out) == first
    from reinforce_ada.runs.manifest import write_manifest

    write_manifest(out / "checkpoint-2")  # a checkpoint written so by a faulty writer: its fields are checked too
    first = snapshot(out)
    with pytest.raises(CheckpointError, match=r"trainer_state.json: step must be an integer >= 0 \(got -5\); there "
                                              r"is no earlier intact checkpoint"):
        Trainer(small_config(out, resume=True, max_steps=3), **setup())
    assert snapshot(out) == first


def test_a_corrupt_latest_checkpoint_is_named_with_the_previous_intact_one(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=3, save_steps=1), **setup()).train()
    (out / "checkpoint-3" / "model" / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError) as err:
        Trainer(small_config(out, max_steps=4, resume=True), **setup())
    message = str(err.value)
    assert "checkpoint-3/model/model.safetensors is not the file this checkpoint wrote" in message
    assert f"the previous intact checkpoint is {out / 'checkpoint-2'}" in message and "step 2" in message

    (out / "checkpoint-3").rename(tmp_path / "bad-checkpoint-3")  # the suggested fix
    torch.save({"not": "an optimizer state"}, out / "checkpoint-2" / "optimizer.pt")
    with pytest.raises(CheckpointError, match=r"checkpoint-2/optimizer.pt is not the file this checkpoint wrote.*"
                                              r"previous intact "
                                              r"checkpoint is .*checkpoint-1"):
        Trainer(small_config(out, max_steps=4, resume=True), **setup())


def test_metrics_that_do_not_match_the_checkpoint_are_refused(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")  # steps 0 and 1 only
    with pytest.raises(CheckpointError, match=r"metrics.jsonl has no line for step 2 .*its last step is 1"):
        Trainer(small_config(out, resume=True, max_steps=3), **setup())


def test_a_full_disk_while_checkpointing_names_the_file_and_leaves_no_temp_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"
    trainer = Trainer(small_config(out, max_steps=1), **setup(evaluate=False))

    def full_disk(obj, path, *args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
                           "data/0: file write failed")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match=r"could not write checkpoint-1 in .*run: writing optimizer.pt failed: "
                                      r".*inline_container"):
        trainer.train()
    assert not list(out.glob("checkpoint-*")) and not list(out.glob(".tmp-checkpoint-*"))


def test_metrics_rewrites_are_atomic(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n{"step": 1, "sampling/total_samples": 4.0}\n{"step": 2, "sampling/total_samples"')
    truncate_metrics(path, 1)  # the torn last line of a killed write is dropped
    assert path.read_text() == '{"step": 0}\n{"step": 1, "sampling/total_samples": 4.0}\n'
    original = path.read_bytes()
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match=r"could not write .*metrics.jsonl: No space left on device"):
        write_atomic(path, "")
    assert path.read_bytes() == original and [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


def test_resume_names_a_changed_sampler_setting_by_its_dotted_name(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    with pytest.raises(RunFolderError, match=r"changed settings \(sampler.streaming.target: 0.3 -> 0.5\)"):
        Trainer(small_config(out, max_steps=3, resume=True, sampler={"streaming": {"target": 0.5}}), **setup())


def test_resume_of_a_checkpoint_with_the_old_flat_config_is_refused_clearly(tmp_path):
    """Runs started before the sampler section (flat ``group_size``, ``sampler: "rounds"``) are not resumed."""
    out = tmp_path / "run"
    Trainer(small_config(out), **setup()).train()
    state_file = out / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    sampler = state["config"].pop("sampler")
    state["config"].update({k: v for k, v in sampler.items() if k not in ("streaming", "memory", "mode", "seed")},
                           sampler="rounds", streaming_target=0.3, memory=False)
    for written_later in ("data", "inputs"):  # that version wrote no fingerprints ...
        del state[written_later]
    state_file.write_text(json.dumps(state))
    (out / "checkpoint-2" / "manifest.json").unlink()  # ... and no manifest
    first = snapshot(out)
    with pytest.raises(RunFolderError, match=r"checkpoint-2 was written by an earlier version of reinforce-ada, "
                                             r"whose config holds the sampler's settings flat"):
        Trainer(small_config(out, max_steps=3, resume=True), **setup())
    assert snapshot(out) == first


@pytest.mark.fault("full disk while a metrics line is appended (a short write, then OSError ENOSPC)",
                   "MetricsWriteError naming the file (exit 2); the file truncated back to its last whole line")
def test_a_full_disk_while_appending_metrics_leaves_no_torn_line(tmp_path, monkeypatch):
    import pathlib

    from reinforce_ada.training import metrics
    from reinforce_ada.training.metrics import MetricsWriter

    writer = MetricsWriter(tmp_path, "none", {})
    writer.write({"step": 1, "loss": 0.5})
    whole = (tmp_path / "metrics.jsonl").read_bytes()
    real_open = pathlib.Path.open

    class HalfThenFull:  # the disk takes half the line, then is full
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "open", lambda self, *a, **k: HalfThenFull(real_open(self, *a, **k)))
    with pytest.raises(OSError, match=r"could not write .*metrics.jsonl: No space left on device") as err:
        writer.write({"step": 2, "loss": 0.25})
    monkeypatch.undo()
    assert (tmp_path / "metrics.jsonl").read_bytes() == whole
    assert isinstance(err.value, metrics.MetricsWriteError)
    writer.write({"step": 2, "loss": 0.25})  # once there is room again, the next line is whole
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]


@pytest.mark.fault("a run that stopped before its first training step (a failure at step 1, an interrupt during the "
                   "evaluation before training), then the corrected command",
                   "the corrected command starts afresh, replacing what the stopped run wrote (it was refused as "
                   "'already holds a run' though there was nothing to resume); a run that trained a step still "
                   "blocks")
def test_a_run_that_stopped_before_its_first_step_blocks_nothing(tmp_path):
    out = tmp_path / "run"
    failing = Trainer(small_config(out, max_steps=2), **setup())

    def fails(*_):
        raise RuntimeError("step 1 failed")

    failing.sampler.sample = fails
    with pytest.raises(RuntimeError, match="step 1 failed"):
        failing.train()
    assert metric_lines(out) and {r["step"] for r in metric_lines(out)} == {0}  # it evaluated before training
    Trainer(small_config(out, max_steps=2), **setup()).train()  # the corrected command
    history = [json.loads(x) for x in (out / "config_history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start"] and (out / "summary.json").exists()

    trained = tmp_path / "trained"
    once = Trainer(small_config(trained, max_steps=3, save_steps=10), **setup())
    original = once.sampler.sample
    calls = []

    def fails_at_step_2(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("step 2 failed")
        return original(*args)

    once.sampler.sample = fails_at_step_2
    with pytest.raises(RuntimeError, match="step 2 failed"):
        once.train()
    with pytest.raises(RunFolderError, match="already holds a run"):
        Trainer(small_config(trained, max_steps=3), **setup())


@pytest.mark.fault("Ctrl-C during a held-out evaluation between steps (eval_steps) or the final one",
                   "the stopped event and the line name the evaluation and its step (they said 'during step 3', "
                   "a step that had not started)")
def test_an_interrupt_during_a_later_evaluation_names_the_evaluation(tmp_path):
    from reinforce_ada.training.guards import RunInterrupted

    trainer = None

    def verifier(prompts, completions):
        if trainer.step == 2 and str(prompts[0].prompt_id).startswith("2-"):  # a held-out prompt, at step 2
            raise KeyboardInterrupt
        return digit_verifier(prompts, completions)

    out = tmp_path / "run"
    trainer = Trainer(small_config(out, max_steps=4, eval_steps=2), **{**setup(), "verifier": verifier})
    with pytest.raises(RunInterrupted, match=r"^KeyboardInterrupt during the held-out evaluation at step 2; "):
        trainer.train()
    stopped = [json.loads(x) for x in (out / "config_history.jsonl").read_text().splitlines()][-1]
    assert stopped["reason"] == "interrupted (KeyboardInterrupt) during the held-out evaluation at step 2"
