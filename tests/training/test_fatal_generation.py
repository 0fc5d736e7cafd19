"""A generator that cannot serve another request (FatalGenerationError: a dead vLLM engine) stops the run at once
with a named cause and a "stopped" event; the CLI then exits 3 (tests/test_user_errors.py's rule for RunStopped)."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.generation import HFGenerator
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationError
from reinforce_ada.training import Trainer
from reinforce_ada.training.guards import RunStopped
from trainer_fixtures import small_config


class DeadGenerator(HFGenerator):
    def generate(self, requests):
        self.calls = getattr(self, "calls", 0) + 1
        raise FatalGenerationError("the vLLM engine is dead (EngineDeadError: EngineCore died)")


@pytest.mark.parametrize("mode", ["rounds", "streaming"])
def test_the_trainer_stops_with_a_named_cause_when_the_generator_cannot_recover(tmp_path, tiny_setup, mode):
    cfg = small_config(tmp_path, max_steps=2, sampler={"mode": mode})
    generator = DeadGenerator(tiny_setup["model"], tiny_setup["tokenizer"], max_new_tokens=cfg.max_new_tokens)
    trainer = Trainer(cfg, **tiny_setup, generator=generator)
    with pytest.raises(RunStopped, match=r"^step 1: the generator failed for good and was not retried: the vLLM engine is dead"):
        trainer.train()
    assert generator.calls == 1  # not retried
    events = [json.loads(line) for line in (tmp_path / "config_history.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped" and "engine is dead" in events[-1]["reason"]


class UnreachableServer(HFGenerator):
    def generate(self, requests):
        self.calls = getattr(self, "calls", 0) + 1
        raise GenerationError("request 1 for prompt 0 failed 3 times; last error: no complete answer within "
                              "timeout_s=2")


@pytest.mark.fault("a generator whose transient failures outlast their retries (a server that keeps timing out)",
                   "RunStopped after the retries, naming the last error, and a 'stopped' event (it was a traceback "
                   "with no event)")
def test_a_generator_failure_that_outlasts_its_retries_stops_the_run_with_a_named_cause(tmp_path, tiny_setup):
    cfg = small_config(tmp_path, max_steps=2, sampler={"generation_retries": 1})
    generator = UnreachableServer(tiny_setup["model"], tiny_setup["tokenizer"], max_new_tokens=cfg.max_new_tokens)
    trainer = Trainer(cfg, **{**tiny_setup, "eval_prompts": []}, generator=generator)
    with pytest.raises(RunStopped, match=r"^step 1: the generator failed for good and outlasted its retries: "
                                         r"generator failed 2 times: GenerationError: .*timeout_s=2"):
        trainer.train()
    assert generator.calls == 2  # the first call and one retry
    events = [json.loads(line) for line in (tmp_path / "config_history.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped" and "timeout_s=2" in events[-1]["reason"]


def test_cli_train_closes_the_trainer_and_exits_3_when_the_run_stops(tmp_path, monkeypatch):
    import reinforce_ada.training as training
    from reinforce_ada.cli import main

    closed = []

    class Stopping:
        def __init__(self, config):
            pass

        def train(self):
            raise RunStopped("step 1: the generator failed for good and was not retried: the vLLM engine is dead")

        def close(self):
            closed.append(True)

    monkeypatch.setattr(training, "Trainer", Stopping)
    assert main(["train", "--max-steps", "1", "--output-dir", str(tmp_path / "run")]) == 3
    assert closed == [True]  # the engine is shut down and its folder removed on the way out
