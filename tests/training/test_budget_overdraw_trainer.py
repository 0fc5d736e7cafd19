"""``strategy="ada-budget"`` with ``budget_overdraw`` through the trainer (tiny model, a few steps)."""

import json

import pytest
import torch

from reinforce_ada.config import ConfigError, TrainConfig
from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from trainer_fixtures import addition_prompts


def parity_verifier(prompts, completions):
    """Reward the parity of the first token: about half the completions of a random model are positive."""
    return [float(c.token_ids[0] % 2) if c.token_ids else 0.0 for c in completions]


def overdraw_config(tmp_path, **overrides):
    values = dict(model="injected", strategy="ada-budget", max_steps=4, batch_size=3, max_new_tokens=4,
                  eval_prompts=8, eval_samples=2, learning_rate=1e-2, output_dir=str(tmp_path), num_threads=1,
                  save_steps=2, sampler=dict(budget_overdraw=2.0, samples_per_round=4, max_rounds=3, group_size=4))
    values.update(overrides)
    return TrainConfig(**values)


def fresh_setup():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(12, 1),
                eval_prompts=addition_prompts(8, 2), verifier=parity_verifier)


def step_records(folder):
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "sampling/total_samples" in r]


def test_overdraw_offers_twice_the_prompts_and_spends_grpos_budget_on_some_of_them(tmp_path):
    setup = fresh_setup()
    before = {k: v.clone() for k, v in setup["model"].state_dict().items()}
    trainer = Trainer(overdraw_config(tmp_path), **setup)
    assert trainer.config.prompts_per_step == 6 and trainer.sampler.config.budget_overdraw == 2.0
    trainer.train()
    assert any(not torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items()), "no parameter moved"
    steps = step_records(tmp_path)
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    for record in steps:
        assert record["sampling/num_prompts"] == 6  # ceil(2 x 3) candidates from the stream
        assert record["sampling/budget"] == 12 and record["sampling/total_samples"] <= 12  # GRPO's for 3 prompts
        assert record["sampling/num_skipped"] >= 3  # 12 samples buy at most three groups of 4
        assert record["sampling/num_skipped"] + record["sampling/num_groups"] == 6
    # 12 prompts, 6 candidates a step: every prompt is offered once per 2 steps, skipped ones included
    assert trainer.stream.state_dict() == {"epoch": 1, "position": 12}


def test_resumed_overdraw_run_reproduces_the_uninterrupted_step(tmp_path):
    Trainer(overdraw_config(tmp_path / "a"), **fresh_setup()).train()
    Trainer(overdraw_config(tmp_path / "b", max_steps=2), **fresh_setup()).train()
    resumed = Trainer(overdraw_config(tmp_path / "b", resume=True), **fresh_setup())
    assert resumed.step == 2 and len(resumed.sampler.memory) > 0
    resumed.train()

    def later_steps(folder):
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in step_records(folder)
                if r["step"] > 2]

    assert later_steps(tmp_path / "a") == later_steps(tmp_path / "b") and len(later_steps(tmp_path / "a")) == 2


def test_overdraw_settings_fail_before_anything_loads(capsys, monkeypatch):
    with pytest.raises(ConfigError, match="budget_overdraw is a setting of strategy='ada-budget'"):
        TrainConfig(strategy="grpo", sampler={"budget_overdraw": 2.0})
    with pytest.raises(ConfigError, match=r"budget_overdraw must be a number >= 1 \(got 0.5\)"):
        TrainConfig(strategy="ada-budget", sampler={"budget_overdraw": 0.5})
    # the budget is per trained prompt: batch_size, not the candidates
    with pytest.raises(ConfigError, match=r"^sampler.sample_budget_per_step=31 is below one group per prompt: at least "
                                          r"group_size x batch_size = 4 x 8 = 32$"):
        TrainConfig(strategy="ada-budget", batch_size=8,
                    sampler={"budget_overdraw": 2.0, "sample_budget_per_step": 31})
    config = TrainConfig(strategy="ada-budget", batch_size=8,
                         sampler={"budget_overdraw": 1.5, "sample_budget_per_step": 32})
    assert config.prompts_per_step == 12 and config.sampler_config().step_budget(12) == 32
    assert TrainConfig(strategy="grpo", batch_size=8).prompts_per_step == 8
    from reinforce_ada import cli

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))
    assert cli.main(["train", "--strategy", "ada-mixed", "--budget-overdraw", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget_overdraw is a setting of strategy='ada-budget'" in err[0]


def test_overdraw_beyond_the_training_set_fails_before_the_model_loads(tmp_path):
    setup = fresh_setup()
    setup["train_prompts"] = addition_prompts(5, 1)
    setup["model"] = None  # would be loaded from config.model, an empty folder -- must not get that far
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")  # passes the preflight check (a model folder); loading it would fail
    with pytest.raises(ConfigError, match=r"^budget_overdraw=2 takes 6 candidate prompts per step \(batch_size=3\), "
                                          r"but the training set has only 5$"):
        Trainer(overdraw_config(tmp_path / "run", model=str(empty)), **setup)
