import json

import pytest
import torch

from reinforce_ada.config import ConfigError, TrainConfig
from reinforce_ada.trainer import Trainer

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from trainer_fixtures import addition_prompts, digit_verifier


def small_config(tmp_path, **overrides):
    values = dict(model="injected", max_steps=2, batch_size=4, samples_per_round=4, max_rounds=2, group_size=4,
                  max_new_tokens=4, eval_prompts=8, eval_samples=2, learning_rate=1e-2, output_dir=str(tmp_path),
                  num_threads=1)
    values.update(overrides)
    return TrainConfig(**values)


@pytest.mark.parametrize("strategy", ["ada-balanced", "grpo", "dapo"])
def test_a_few_steps_change_the_parameters_and_write_metrics(tmp_path, tiny_setup, strategy):
    before = {k: v.clone() for k, v in tiny_setup["model"].state_dict().items()}
    trainer = Trainer(small_config(tmp_path, strategy=strategy, dapo_max_batches=2), **tiny_setup)
    summary = trainer.train()

    after = trainer.model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter moved"
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "sampling/total_samples" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("train/loss" in r and "sampling/zero_variance_fraction" in r for r in steps)
    assert summary["steps"] == 2 and summary["total_samples"] == sum(r["sampling/total_samples"] for r in steps)
    assert set(json.loads((tmp_path / "summary.json").read_text())) >= {
        "accuracy_before", "accuracy_after", "total_samples", "steps", "wall_seconds"}
    assert (tmp_path / "checkpoint-2" / "model" / "model.safetensors").exists()
    assert (tmp_path / "plots" / "training.png").exists()


def test_resumed_run_reproduces_the_uninterrupted_next_step(tmp_path, tiny_setup):
    """Run A: 3 steps straight. Run B: 2 steps, stop, resume, 1 more. Step 3 must be identical on CPU."""
    straight = Trainer(small_config(tmp_path / "a", max_steps=3), **tiny_setup)
    straight.train()

    def fresh():
        return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(),
                    train_prompts=addition_prompts(64, 1), eval_prompts=addition_prompts(8, 2),
                    verifier=digit_verifier)

    Trainer(small_config(tmp_path / "b", max_steps=2), **fresh()).train()
    resumed = Trainer(small_config(tmp_path / "b", max_steps=3, resume=True), **fresh())
    assert resumed.step == 2
    resumed.train()

    for key, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key]), key

    def step3(folder):
        lines = (folder / "metrics.jsonl").read_text().splitlines()
        return [json.loads(x) for x in lines if json.loads(x).get("step") == 3 and "train/loss" in json.loads(x)]

    a, b = step3(tmp_path / "a"), step3(tmp_path / "b")
    assert len(a) == len(b) == 1
    drop_times = lambda r: {k: v for k, v in r.items() if not k.startswith("time/")}  # noqa: E731
    assert drop_times(a[0]) == drop_times(b[0])


@pytest.mark.parametrize("field, value", [("batch_size", 0), ("clip_ratio_c", 1.0), ("strategy", "ppo"),
                                          ("group_size", 64), ("top_p", 1.5), ("loss_agg_mode", "mean")])
def test_bad_config_fails_before_anything_loads(field, value, monkeypatch):
    import reinforce_ada.trainer as trainer_module

    monkeypatch.setattr(trainer_module.Trainer, "__init__", lambda *a, **k: pytest.fail("trainer was built"))
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**{field: value})


def test_cli_rejects_bad_values_before_loading_a_model(capsys, monkeypatch):
    from reinforce_ada import cli

    monkeypatch.setattr("reinforce_ada.trainer.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))
    assert cli.main(["train", "--samples-per-round", "-1"]) == 2
    assert "samples_per_round" in capsys.readouterr().err
