"""``strategy="ada-budget"`` through the trainer and the command line (tiny model, a few steps)."""

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


def budget_config(tmp_path, **overrides):
    values = dict(model="injected", strategy="ada-budget", max_steps=3, batch_size=4, max_new_tokens=4,
                  eval_prompts=8, eval_samples=2, learning_rate=1e-2, output_dir=str(tmp_path), num_threads=1,
                  save_steps=2, sampler=dict(samples_per_round=4, max_rounds=3, group_size=4,
                                             sample_budget_per_step=24))
    values.update(overrides)
    return TrainConfig(**values)


def fresh_setup():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(8, 1),
                eval_prompts=addition_prompts(8, 2), verifier=parity_verifier)


def test_budget_strategy_trains_logs_its_budget_and_checkpoints_its_memory(tmp_path):
    setup = fresh_setup()
    before = {k: v.clone() for k, v in setup["model"].state_dict().items()}
    trainer = Trainer(budget_config(tmp_path), **setup)
    assert trainer.sampler.config.is_budget and trainer.sampler.config.exit_rule == "mixed"
    trainer.train()
    assert any(not torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items()), "no parameter moved"
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "sampling/total_samples" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for record in steps:
        assert record["sampling/budget"] == 24 and record["sampling/total_samples"] <= 24
        assert record["sampling/num_skipped"] + record["sampling/num_groups"] == 4
        assert "sampling/budget_used_fraction" in record and "sampling/skipped_fraction" in record
    state = json.loads((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["sampler"]["memory"]["entries"], "the pass-rate memory is part of the checkpoint"


def test_resumed_budget_run_reproduces_the_uninterrupted_step(tmp_path):
    Trainer(budget_config(tmp_path / "a"), **fresh_setup()).train()
    Trainer(budget_config(tmp_path / "b", max_steps=2), **fresh_setup()).train()
    resumed = Trainer(budget_config(tmp_path / "b", resume=True), **fresh_setup())
    assert resumed.step == 2 and len(resumed.sampler.memory) > 0  # the memory came back from the checkpoint
    resumed.train()

    def step3(folder):
        rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
        row = next(r for r in rows if r.get("step") == 3 and "train/loss" in r)
        return {k: v for k, v in row.items() if not k.startswith("time/")}

    assert step3(tmp_path / "a") == step3(tmp_path / "b")


def test_budget_settings_fail_before_anything_loads():
    with pytest.raises(ConfigError, match=r"^sampler.sample_budget_per_step=15 is below one group per prompt: at least "
                                          r"group_size x batch_size = 4 x 4 = 16$"):
        TrainConfig(strategy="ada-budget", batch_size=4, sampler={"group_size": 4, "sample_budget_per_step": 15})
    with pytest.raises(ConfigError, match="sample_budget_per_step is a setting of strategy='ada-budget'"):
        TrainConfig(strategy="grpo", sampler={"sample_budget_per_step": 64})
    with pytest.raises(ConfigError, match="ada-budget runs on sampler.mode='rounds'"):
        TrainConfig(strategy="ada-budget", sampler={"mode": "streaming"})
    config = TrainConfig(strategy="ada-budget", batch_size=8, sampler={"budget_probe": 2})
    sampler = config.sampler_config()
    assert (sampler.allocation, sampler.exit_rule, sampler.budget_probe, sampler.sample_budget_per_step) == (
        "budget", "mixed", 2, None)
    assert sampler.step_budget(8) == 32  # default: what GRPO draws, group_size x prompts
    assert sampler.min_exit_count == 4 and sampler.budget_half_life == 2.0
    short = TrainConfig(strategy="ada-budget",
                        sampler={"budget_probe": 2, "budget_min_group": 2, "budget_half_life": 4.0})
    assert (short.sampler_config().min_exit_count, short.sampler_config().budget_half_life) == (2, 4.0)
    with pytest.raises(ConfigError, match="budget_min_group is a setting of strategy='ada-budget'"):
        TrainConfig(strategy="ada-mixed", sampler={"budget_min_group": 2})


def test_cli_selects_the_budget_strategy_and_rejects_a_small_budget(capsys, monkeypatch):
    from reinforce_ada import cli

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))
    assert cli.main(["train", "--strategy", "ada-budget", "--batch-size", "8", "--sample-budget-per-step", "20"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sample_budget_per_step=20 is below one group per prompt" in err[0] and "32" in err[0]
