"""A piece that fails -- a generator whose completions cannot be trained on, a reward that raises a BaseException or
is ``async def``, a full disk while the final evaluation is recorded, a reward that hangs under ``eval`` -- ends in
one line naming it (and a ``stopped`` event when a run had started), never a traceback, a hang or a run trained on
nothing."""

import json
import os
from pathlib import Path

import pytest
import torch

import reward_fixtures
from reinforce_ada import cli
from reinforce_ada.config import ConfigError
from reinforce_ada.generation import HFGenerator
from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from reinforce_ada.training.guards import RunStopped
from reinforce_ada.types import Completion
from trainer_fixtures import addition_prompts, digit_verifier, small_config

HERE = Path(__file__).resolve().parent


def parts(evaluate=True, verifier=digit_verifier):
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(64, 1),
                eval_prompts=addition_prompts(8, 2) if evaluate else [], verifier=verifier)


def events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]


def one_error_line(err: str) -> str:
    """The one ``error:`` line, last on stderr (progress bars and log lines may come before it), no traceback."""
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


@pytest.fixture
def cli_run(cli_run, monkeypatch):
    """The training tests' saved-model command line, one step, with the reward fixtures importable by name."""
    monkeypatch.syspath_prepend(str(HERE))
    return [*cli_run, "--max-steps", "1"]


# -- the generator ----------------------------------------------------------------------------------------------------
class NoTokenIds(HFGenerator):
    """Completions with their text and no token ids: what an OpenAI-compatible server that returns none gives."""

    def generate(self, requests):
        return [[Completion(c.prompt_id, c.text, finish_reason=c.finish_reason) for c in row]
                for row in super().generate(requests)]


@pytest.mark.fault("a generator whose completions carry no token ids (an OpenAI-compatible server that returns none)",
                   "exit 3 at step 1 naming the generator, a 'stopped' event, nothing trained or saved (it trained "
                   "on 0 sequences every step, exit 0)")
@pytest.mark.parametrize("mode", ["rounds", "streaming"])
@pytest.mark.parametrize("backend", ["hf-without-ids", "openai-server"])
def test_completions_without_token_ids_stop_the_first_step_naming_the_generator(tmp_path, monkeypatch, mode,
                                                                                  backend):
    pieces = parts()
    before = {k: v.clone() for k, v in pieces["model"].state_dict().items()}
    if backend == "openai-server":  # a server that returns text only (no return_token_ids)
        pytest.importorskip("httpx")
        from streaming_fakes import FakeOpenAIServer

        from reinforce_ada.generation.server.client import OpenAICompletionsEngine

        server = FakeOpenAIServer(lambda index, request_id, attempt: "no_token_ids").__enter__()
        generator, name = OpenAICompletionsEngine(server.url, "fake", max_tokens=4), "OpenAICompletionsEngine"
    else:
        server, name = None, "NoTokenIds"
        generator = NoTokenIds(pieces["model"], pieces["tokenizer"], max_new_tokens=4)
    trainer = Trainer(small_config(tmp_path / "run", sampler={"mode": mode}), **pieces, generator=generator)
    try:
        with pytest.raises(RunStopped) as err:
            trainer.train()
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    message = str(err.value)
    assert message.startswith(f"step 1: the generator ({name}) returned ")
    assert "completions with text but no token ids" in message and "cannot be trained on" in message
    assert events(tmp_path / "run")[-1] == {**events(tmp_path / "run")[-1], "event": "stopped", "reason": message}
    assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())
    assert trainer.totals["optimizer_steps"] == 0 and not list((tmp_path / "run").glob("checkpoint-*"))


def test_empty_completions_are_left_out_and_the_rest_trained():
    """An empty completion (no text, no ids: a stop at once) is no fault; only text without ids is."""
    import numpy as np

    from reinforce_ada.training.update import sequences
    from reinforce_ada.types import Group, Prompt, SampledBatch

    kept = [Completion("p", "2", token_ids=(5,), reward=1.0), Completion("p", "", reward=0.0)]
    group = Group(Prompt("p", "1+1=", "2"), kept, pool_mean=0.5, pool_std=0.7, pool_count=2, pool_num_positive=1,
                  exited=True)
    batch = SampledBatch(groups=[group], pools={}, rounds=[], advantages=np.array([0.5, -0.5]))
    seqs = sequences(batch, 0, lambda p: [1, 2])
    assert seqs.input_ids.tolist() == [[1, 2, 5]] and seqs.advantages.tolist() == [0.5]


# -- the reward function ----------------------------------------------------------------------------------------------
@pytest.mark.fault("a reward function raising a BaseException subclass (not an Exception), with and without "
                   "--verifier-timeout",
                   "a failed verifier call: exit 3 in one line naming it, a 'stopped' event (it was a traceback with no "
                   "event)")
@pytest.mark.parametrize("timeout", [[], ["--verifier-timeout", "30"]], ids=["in-process", "timed-worker"])
def test_a_reward_raising_a_base_exception_stops_the_run_in_one_line(tmp_path, cli_run, capsys, timeout):
    run = tmp_path / "run"
    code = cli.main([*cli_run, "--verifier", "reward_fixtures:raises_base_exception", *timeout, "--output-dir",
                     str(run)])
    line = one_error_line(capsys.readouterr().err)
    assert code == 3
    assert line.startswith("error: step 1: the verifier 'reward_fixtures:raises_base_exception' could not score")
    assert "RewardBlewUp" in line and "the reward server went away" in line
    assert events(run)[-1]["event"] == "stopped" and not list(run.glob("checkpoint-*"))


@pytest.mark.fault("an `async def` reward function",
                   "exit 2 before anything loads, naming the function (it ran, every call a 'coroutine was never "
                   "awaited' warning, then exit 3)")
def test_an_async_reward_function_is_refused_at_start_by_name(tmp_path, cli_run, capsys, monkeypatch):
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: pytest.fail("weights were loaded"))
    code = cli.main([*cli_run, "--verifier", "reward_fixtures:async_reward", "--output-dir", str(tmp_path / "run")])
    assert code == 2 and one_error_line(capsys.readouterr().err) == (
        "error: reward function 'reward_fixtures:async_reward' is an async def function; a reward function is called "
        "as fn(prompts, completions, **columns) and must return the rewards: make it a plain def (run any awaits "
        "inside it with asyncio.run)")
    assert not (tmp_path / "run").exists()
    from reinforce_ada.verifiers.function import RewardFunctionVerifier

    with pytest.raises(ConfigError, match="'async_reward' is an async def function"):
        RewardFunctionVerifier(reward_fixtures.async_reward)  # from Python too


@pytest.mark.fault("`eval` of a run trained with --verifier-timeout, its reward function hanging",
                   "the run's timeout applies: exit 3 naming it (it had no timeout: each call waited for the reward)")
def test_eval_of_a_run_applies_the_runs_verifier_timeout(tmp_path, cli_run, capsys):
    run = tmp_path / "run"
    data = cli_run[cli_run.index("--data") + 1]
    assert cli.main([*cli_run, "--verifier", "reward_fixtures:first_digit_text", "--verifier-timeout", "0.5",
                     "--output-dir", str(run)]) == 0
    state = json.loads((run / "checkpoint-1" / "trainer_state.json").read_text())
    assert state["config"]["verifier_timeout"] == 0.5
    capsys.readouterr()
    code = cli.main(["eval", str(run), "--data", data, "--limit", "2", "--k", "1",
                     "--verifier", "reward_fixtures:sleeps_5s"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 3
    assert line.startswith(f"error: eval of {data}: the verifier 'reward_fixtures:sleeps_5s' could not score 2 of 2")
    assert "1 call(s) ran past the verifier timeout of 0.5 s" in line


# -- the disk ---------------------------------------------------------------------------------------------------------
@pytest.mark.fault("full disk while final_evaluation.pt is written (torch.save: 'file write failed')",
                   "exit 2, one line naming the file; no temporary file left; --resume redoes the evaluation (it was "
                   "a traceback with the temporary file left)")
def test_a_full_disk_while_recording_the_final_evaluation_is_one_line_and_leaves_no_temp_file(tmp_path, cli_run,
                                                                                            capsys, monkeypatch):
    real_save = torch.save

    def full_disk(obj, path, *args, **kwargs):
        if Path(path).name.startswith(".final_evaluation.pt"):
            real_save(obj, path, *args, **kwargs)  # a part of it reached the disk
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
                               "data/0: file write failed")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk)
    run = tmp_path / "run"
    held_out = tmp_path / "held_out.jsonl"  # prompts of their own: the training file itself is refused
    held_out.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(4)))
    args = [*cli_run, "--eval-data", str(held_out), "--eval-prompts", "4"]
    code = cli.main([*args, "--output-dir", str(run)])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert line.startswith(f"error: could not write {run / 'checkpoint-1' / 'final_evaluation.pt'}: ")
    assert "file write failed" in line
    assert sorted(p.name for p in (run / "checkpoint-1").iterdir()) == [
        "manifest.json", "model", "optimizer.pt", "rng_state.pt", "scheduler.pt", "trainer_state.json"]
    monkeypatch.undo()
    assert cli.main([*args, "--output-dir", str(run), "--resume"]) == 0  # the evaluation done again
    assert (run / "checkpoint-1" / "final_evaluation.pt").is_file() and (run / "summary.json").is_file()
    assert not [p for p in os.listdir(run / "checkpoint-1") if p.startswith(".")]
