"""Building the trainer's pieces from a :class:`~reinforce_ada.config.TrainConfig`: the device, the seeds, the data
and verifier, the model (warm-started tiny model or a pretrained one, optionally with LoRA adapters), the frozen
reference model for the KL term and the generation backend (the sampler comes from
:func:`reinforce_ada.sampling.factory.build_sampler`).

Each function reads only the config fields it names; the :class:`~reinforce_ada.training.loop.Trainer` calls them in
a fixed order (the order matters: seeding comes before anything that draws random numbers).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import numpy as np

from reinforce_ada.config import TrainConfig
from reinforce_ada.errors import NoDeviceError
from reinforce_ada.types import Prompt


def resolve_device(device: str) -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NoDeviceError(f"device={device!r} but torch sees no CUDA GPU")
    return torch.device(device)


def check_report_to(report_to: str) -> None:
    """Fail before any model loads when the requested metrics sink is not installed."""
    import importlib.util

    if report_to != "none" and importlib.util.find_spec(report_to) is None:
        raise ImportError(f"report_to={report_to!r} needs the {report_to} package: pip install {report_to}")


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_data(cfg: TrainConfig) -> tuple[list[Prompt], list[Prompt], Any, Any]:
    """``(train prompts, held-out prompts, verifier, task)``: from ``cfg.data`` / ``cfg.eval_data`` files, or from the
    built-in ``cfg.task`` (then also returned, so the warm start can reuse it; ``None`` otherwise)."""
    from reinforce_ada.data import get_task, load_prompts
    from reinforce_ada.training.run_data import held_out_prompts, prompt_keys, run_verifier

    task = None
    if cfg.data is not None:
        train = load_prompts(cfg.data, **prompt_keys(cfg))
    else:
        task = get_task(cfg.task, **cfg.task_options())
        train = task.prompts(max(4096, cfg.batch_size * 4), seed=cfg.seed, split="train")
    return train, held_out_prompts(cfg, task), run_verifier(cfg, task), task


def load_model(cfg: TrainConfig, train_prompts: Sequence[Prompt], task: Any) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, warm_start_info)``: the tiny model warm-started on the built-in task (``task`` when
    :func:`load_data` built it), or ``cfg.model`` loaded pretrained (no warm start: ``{}``)."""
    if cfg.model == "tiny":
        from reinforce_ada.models.loading import cache_dir
        from reinforce_ada.models.warm_start import WarmStartSettings, load_or_warm_start_tiny

        if cfg.data is not None:
            raise ValueError("model='tiny' is warm-started on a built-in task; give --task, or a real --model")
        settings = WarmStartSettings.from_config(cfg)
        # The warm start sees train prompts only; its accuracy checks use a slice of the held-out split
        # different from the prompts the RL run reports on.
        if task is None:
            from reinforce_ada.data import get_task

            task = get_task(cfg.task, **cfg.task_options())
        sft_held_out = task.prompts(settings.eval_prompts, seed=cfg.sft_seed + 1000, split="test")
        # The warm start checks accuracy with the task's own verifier (its cache is keyed by the task).
        from reinforce_ada.verifiers import get_verifier

        return load_or_warm_start_tiny(settings, train_prompts, sft_held_out, get_verifier(task.verifier_name),
                                       cache_dir())
    from reinforce_ada.models.loading import load_pretrained
    from reinforce_ada.training.run_source import locate_model

    source = locate_model(cfg.model)  # a run or checkpoint folder: the model in it
    model, tokenizer = load_pretrained(str(source.model_dir) if source else cfg.model, cfg.dtype)
    return model, tokenizer, {}


def wrap_lora(cfg: TrainConfig, model: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear",
                                            task_type="CAUSAL_LM"))


def reference_model(cfg: TrainConfig, model: Any) -> Any:
    """A frozen copy of the policy for the KL term; ``None`` with LoRA (the base model with adapters disabled is the
    reference)."""
    import copy

    if cfg.lora:
        return None
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def make_generator(cfg: TrainConfig, model: Any, tokenizer: Any) -> Any:
    from reinforce_ada.generation import get_generator

    options: dict[str, Any] = dict(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                   top_p=cfg.top_p, use_chat_template=cfg.use_chat_template)
    if cfg.generator == "hf":
        options["max_batch_size"] = cfg.generation_batch_size
    elif cfg.generator == "openai":  # a running server: checked, then its weights pushed each step unless gen-only
        options.update(base_url=cfg.base_url, served_model=cfg.served_model, generation_only=cfg.generation_only,
                       dead_after_s=cfg.server_dead_after)
    else:  # the engine's checkpoint: VLLMGenerator finds it from the model, or writes the model to a folder it owns;
        # sleep mode (the engine's GPU memory freed while the policy trains) where the platform has it
        options.update(gpu_memory_utilization=cfg.vllm_gpu_memory_utilization, dtype=cfg.dtype)
    return get_generator(cfg.generator, model, tokenizer, **options)
