"""The values :class:`~reinforce_ada.config.train.TrainConfig` fills in when a field is left unset: the model-dependent
defaults (by :func:`model_kind`, filled in by :func:`resolve_model_defaults`), the rollout/trainer mismatch limit by
dtype, and reasoning-gym's system prompt."""

from __future__ import annotations

from typing import Any

from reinforce_ada.errors import ConfigError

__all__ = ["MODEL_DEFAULTS", "ROLLOUT_MISMATCH_LIMITS", "TASK_DEFAULTS", "model_kind", "reasoning_gym_system_prompt",
           "resolve_model_defaults"]


MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "tiny": dict(learning_rate=1e-3, max_new_tokens=8, batch_size=32, eval_prompts=200, micro_batch_size=64,
                 generation_batch_size=512, completion_logits_only=False),
    "pretrained": dict(learning_rate=1e-6, max_new_tokens=128, batch_size=2, eval_prompts=8, micro_batch_size=8,
                       generation_batch_size=64, completion_logits_only=True),
}
"""Values of the model-dependent :class:`TrainConfig` fields (declared ``None``), by :func:`model_kind`.

``tiny`` is the char-level demo model (or a folder holding one, :func:`model_kind`): a from-scratch ~0.1M-parameter network needs a large learning rate and
answers in a few characters. ``pretrained`` is every other model: the paper's learning rate (1e-6; a larger one
wrecks a pretrained policy within steps), room for some reasoning before an ``<answer>`` tag, and batch sizes small
enough for a ~135M model on a CPU (``--model smollm2-135m``: two to three minutes per step on 2 cores, see
docs/smollm2.md). Set the fields for a real run; ``examples/paper_qwen_math_1.5b.yaml`` holds the paper's values.
"""


TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "arithmetic-chat": dict(learning_rate=1e-5, max_new_tokens=8, batch_size=8, eval_prompts=32),
}
"""Values a *pretrained* model's run on a built-in task takes for the model-dependent fields left unset, ahead of
``MODEL_DEFAULTS["pretrained"]`` (which fills the rest).

``arithmetic-chat``: the answer is a number, so 8 new tokens; 8 prompts a step and 32 held-out prompts keep a step
on a CPU core to tens of seconds for SmolLM2-135M. The learning rate is the one the declared sweep chose
(``bash benchmarks/smollm2_compare.sh lr-sweep``: GRPO-n8 on 16 training prompts judged on 64 other prompts of the
task's train split, the highest mean accuracy after 20 steps; docs/smollm2.md gives its table): the paper's 1e-6 is
for a 1.5B model and 512 prompts a step, and barely moves a 135M model in the steps a CPU affords.
"""


ROLLOUT_MISMATCH_LIMITS: dict[str, float] = {"float32": 1e-3, "bfloat16": 0.05, "float16": 0.05}
"""``max_rollout_mismatch`` by ``dtype`` when not given: the mean ``|old_logp - rollout_logp|`` above which a step
stops the run as sampled from stale weights (measurements in docs/training.md, "Rollout/trainer mismatch")."""


def model_kind(model: str) -> str:
    """``"tiny"`` for the built-in demo model and for a local folder holding one (a run of it, a checkpoint, a model
    folder: its char tokenizer says so, :func:`~reinforce_ada.models.tiny.holds_tiny_model`), so that a run started
    from the demo's checkpoint keeps the demo's learning rate, batch and held-out size; ``"pretrained"`` for anything
    else (the keys of MODEL_DEFAULTS)."""
    from reinforce_ada.models.tiny import holds_tiny_model

    return "tiny" if model == "tiny" or holds_tiny_model(model) else "pretrained"


def reasoning_gym_system_prompt() -> str | None:
    """reasoning-gym's own default system prompt (it asks for ``<answer>...</answer>``), or None without the package."""
    try:
        from reasoning_gym.utils import SYSTEM_PROMPTS
    except ImportError:  # the task itself raises the clear "install reasoning-gym" error later
        return None
    return SYSTEM_PROMPTS["default"]


def resolve_model_defaults(config: Any) -> None:
    """Fill a TrainConfig's fields left ``None`` with their values for its model's kind (:data:`MODEL_DEFAULTS`), a
    pretrained model's on a built-in task with :data:`TASK_DEFAULTS` first, and a pretrained model's system prompt on a
    ``reasoning-gym:`` task with reasoning-gym's own."""
    if not isinstance(config.model, str) or not config.model:
        raise ConfigError(f"model must be a non-empty string (got {config.model!r})")
    kind = model_kind(config.model)
    task = TASK_DEFAULTS.get(config.task, {}) if kind == "pretrained" and config.data is None else {}
    for name, value in {**MODEL_DEFAULTS[kind], **task}.items():
        if getattr(config, name) is None:
            setattr(config, name, value)
    if (config.system_prompt is None and kind == "pretrained" and config.data is None
            and isinstance(config.task, str) and config.task.startswith("reasoning-gym:")):
        config.system_prompt = reasoning_gym_system_prompt()
