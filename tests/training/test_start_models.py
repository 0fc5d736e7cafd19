"""The shipped start models: the built-in tasks' default settings load the same weights on every machine."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.config import TrainConfig
from reinforce_ada.models.tiny import SHIPPED_START_MODELS
from reinforce_ada.training.warm_start import WarmStartSettings, shipped_start_model


@pytest.mark.parametrize("task", ["arithmetic", "arithmetic-mixed"])
def test_default_settings_find_the_shipped_model(task):
    folder = shipped_start_model(WarmStartSettings.from_config(TrainConfig(task=task)))
    assert folder == SHIPPED_START_MODELS / task
    info = json.loads((folder / "warm_start.json").read_text())
    assert info["settings"]["task"] == task and "made_with" in info
    assert (folder / "model.safetensors").stat().st_size < 1_000_000


@pytest.mark.parametrize("task", ["arithmetic", "arithmetic-mixed"])
def test_the_shipped_models_have_the_built_in_shape_and_tokenizer(task):
    """Shipped weights must be the shape ``build_tiny_model`` builds (a shape change means regenerating them), with a
    head size vLLM's CPU attention serves (>= 32), and carry the char tokenizer so an engine can load the folder
    (on transformers 4.56.2 too: not under transformers 5's class name ``TokenizersBackend``)."""
    from transformers import AutoConfig, AutoTokenizer

    from reinforce_ada.models.tiny import TINY_VOCAB, build_tiny_model

    folder = SHIPPED_START_MODELS / task
    shipped, built = AutoConfig.from_pretrained(folder), build_tiny_model().config
    fields = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "max_position_embeddings", "vocab_size", "tie_word_embeddings"]
    assert {f: getattr(shipped, f) for f in fields} == {f: getattr(built, f) for f in fields}
    assert shipped.hidden_size // shipped.num_attention_heads >= 32
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.convert_ids_to_tokens(list(range(len(TINY_VOCAB)))) == TINY_VOCAB
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (0, 1)
    assert tokenizer("85+63=", add_special_tokens=False).input_ids == [TINY_VOCAB.index(c) for c in "85+63="]


def test_the_cache_key_covers_the_model_shape(monkeypatch):
    """A cache warm-started for another shape (e.g. the old 4 heads of 16) must not be loaded for this one."""
    from reinforce_ada.models import tiny

    settings = WarmStartSettings.from_config(TrainConfig())
    key = settings.key()
    monkeypatch.setitem(tiny.TINY_SHAPE, "num_heads", 4)
    assert settings.key() != key


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


def test_a_saved_char_tokenizer_loads_as_the_exact_tokenizer(tmp_path):
    """The library's loaders give back the char tokenizer a folder declares, spaces and newlines included (transformers
    5's ``AutoTokenizer`` builds a byte-level ``Qwen2Tokenizer`` for a qwen2 folder, which drops both)."""
    from reinforce_ada.models.loading import load_tokenizer
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model, save_char_tokenizer

    build_tiny_model().save_pretrained(tmp_path)
    save_char_tokenizer(build_char_tokenizer(), tmp_path)
    text = "What is 12 + 34?\nAnswer: 46"
    ids = load_tokenizer(str(tmp_path))(text, add_special_tokens=False).input_ids
    assert ids == build_char_tokenizer()(text, add_special_tokens=False).input_ids
    assert len(ids) == len(text)
