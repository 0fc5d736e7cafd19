"""Exact resume for every setting: a run stopped at a checkpoint and resumed
ends with the same weights, optimizer and metrics, bit for bit, as the same run left uninterrupted -- with every
option that holds state: the KL term's reference model, the warm-up schedule, several PPO epochs, the cross-step
memory, streaming mode and budget mode. Tiny model, four steps: a few seconds each."""

import json
import shutil

import pytest
import torch

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from trainer_fixtures import addition_prompts, digit_verifier, small_config

# the metrics that depend on the run's state (times and rates of the machine left out)
COMPARED = ("step", "total_samples", "total_tokens", "train/loss", "train/kl", "train/grad_norm", "train/lr",
            "sampling/reward_mean", "sampling/total_samples", "eval/accuracy")

SETTINGS = {
    "kl": dict(kl_coef=0.05),
    "warmup": dict(warmup_steps=3),
    "ppo_epochs": dict(ppo_epochs=2, mini_batch_size=8),
    "memory": dict(sampler={"memory": {"enabled": True}}),
    "streaming": dict(sampler={"mode": "streaming"}),
    "budget": dict(strategy="ada-budget"),
    "all": dict(kl_coef=0.05, warmup_steps=3, ppo_epochs=2, mini_batch_size=8, sampler={"memory": {"enabled": True}}),
}


def parts():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(64, 1),
                eval_prompts=addition_prompts(8, 2), verifier=digit_verifier)


def metrics(folder):
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in COMPARED if k in r} for r in lines]


def run(folder, steps, **settings):
    trainer = Trainer(small_config(folder, max_steps=steps, save_steps=2, eval_steps=2, **settings), **parts())
    trainer.train()
    return trainer


def resumed(folder, steps, **settings):
    trainer = Trainer(small_config(folder, max_steps=steps, save_steps=2, eval_steps=2, resume=True, **settings),
                      **parts())
    trainer.train()
    return trainer


def assert_same(a, b, folder_a, folder_b):
    for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(x, y), f"{name} differs"
    assert metrics(folder_a) == metrics(folder_b)
    assert a.summary(None)["accuracy_history"] == b.summary(None)["accuracy_history"]


@pytest.mark.fault("resume with state-holding settings (KL reference, warmup, PPO epochs, memory, streaming, budget)",
                   "bit-identical to the uninterrupted run")
@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_run_killed_at_a_checkpoint_and_resumed_equals_the_uninterrupted_run(tmp_path, name):
    """Killed after checkpoint-2: the uninterrupted run's folder cut back to what a kill -9 during step 3 leaves
    (checkpoint-4 and the summary gone, metrics of later steps still there), then resumed."""
    settings = SETTINGS[name]
    whole = run(tmp_path / "whole", 4, **settings)
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "checkpoint-4")
    (tmp_path / "cut" / "summary.json").unlink()
    assert_same(whole, resumed(tmp_path / "cut", 4, **settings), tmp_path / "whole", tmp_path / "cut")


@pytest.mark.fault("--resume --max-steps beyond a finished run",
                   "the final evaluation kept; bit-identical to the longer uninterrupted run")
@pytest.mark.parametrize("eval_steps", [2, 3])
def test_extending_a_finished_run_equals_the_longer_uninterrupted_run(tmp_path, eval_steps):
    """A finished 2-step run extended to 4 steps keeps its final evaluation and ends as an
    uninterrupted 4-step run, whether step 2 is an evaluation step of the longer run (eval_steps=2) or not (3)."""
    settings = dict(kl_coef=0.05, save_steps=2, eval_steps=eval_steps)
    whole = Trainer(small_config(tmp_path / "whole", max_steps=4, **settings), **parts())
    whole.train()
    Trainer(small_config(tmp_path / "ext", max_steps=2, **settings), **parts()).train()
    final = json.loads((tmp_path / "ext" / "summary.json").read_text())["accuracy_after"]
    ext = Trainer(small_config(tmp_path / "ext", max_steps=4, resume=True, **settings), **parts())
    ext.train()
    for (name, x), (_, y) in zip(whole.model.state_dict().items(), ext.model.state_dict().items()):
        assert torch.equal(x, y), f"{name} differs"
    steps = lambda f: [r for r in metrics(f) if "sampling/total_samples" in r]  # noqa: E731
    assert [{k: v for k, v in r.items() if k != "eval/accuracy"} for r in steps(tmp_path / "whole")] == \
        [{k: v for k, v in r.items() if k != "eval/accuracy"} for r in steps(tmp_path / "ext")]
    assert (2, final) in [tuple(x) for x in ext.accuracy_history]  # the finished run's final evaluation is kept
    assert {"step": 2, "eval/accuracy": final} in [{k: r[k] for k in ("step", "eval/accuracy") if k in r}
                                                   for r in metrics(tmp_path / "ext")]
