"""The shipped start models: the built-in tasks' default settings load the same weights on every machine."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.config import TrainConfig
from reinforce_ada.models.warm_start import SHIPPED_START_MODELS, WarmStartSettings, shipped_start_model


@pytest.mark.parametrize("task", ["arithmetic", "arithmetic-mixed"])
def test_default_settings_find_the_shipped_model(task):
    folder = shipped_start_model(WarmStartSettings.from_config(TrainConfig(task=task)))
    assert folder == SHIPPED_START_MODELS / task
    info = json.loads((folder / "warm_start.json").read_text())
    assert info["settings"]["task"] == task and "made_with" in info
    assert (folder / "model.safetensors").stat().st_size < 1_000_000


def test_other_settings_do_not_use_a_shipped_model():
    assert shipped_start_model(WarmStartSettings.from_config(TrainConfig(sft_target_accuracy=0.3))) is None
    assert shipped_start_model(WarmStartSettings.from_config(TrainConfig(task_digits=3))) is None


@pytest.mark.slow
def test_the_trainer_loads_the_shipped_weights(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    from reinforce_ada.training import Trainer

    monkeypatch.setenv("REINFORCE_ADA_CACHE", str(tmp_path / "cache"))
    trainer = Trainer(TrainConfig(output_dir=str(tmp_path / "run"), max_steps=1, eval_prompts=0))
    shipped = load_file(SHIPPED_START_MODELS / "arithmetic" / "model.safetensors")
    state = trainer.model.state_dict()
    assert all(torch.equal(state[name], tensor) for name, tensor in shipped.items())
    assert trainer.warm_start_info["source"].endswith("arithmetic")
    assert not (tmp_path / "cache").exists()  # nothing trained, nothing cached
