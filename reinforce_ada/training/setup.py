"""Building the trainer's pieces from a :class:`~reinforce_ada.config.TrainConfig`: the device, the seeds, the data
and verifier, the model (warm-started tiny model or a pretrained one, optionally with LoRA adapters), the frozen
reference model for the KL term, the optimizer and its schedule, and the generation backend (the sampler comes from
:func:`reinforce_ada.sampling.factory.build_sampler`). The built-in task is built once, by the preflight checks
(:func:`reinforce_ada.training.preflight.check_train_inputs`), and passed to what needs it.

Each function reads only the config fields it names; the :class:`~reinforce_ada.training.loop.Trainer` calls them in
a fixed order (the order matters: seeding comes before anything that draws random numbers).
"""

from __future__ import annotations

import logging
import random
from typing import Any, Sequence

import numpy as np

from reinforce_ada.config import TrainConfig
from reinforce_ada.errors import NoDeviceError
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)


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


def load_data(cfg: TrainConfig, task: Any) -> tuple[list[Prompt], list[Prompt], Any]:
    """``(train prompts, held-out prompts, verifier)``: from ``cfg.data`` / ``cfg.eval_data`` files, or from the
    built-in ``task`` (the config's, built; ``None`` for prompt files)."""
    from reinforce_ada.runs.data import held_out_prompts, run_verifier, training_prompts

    train = training_prompts(cfg, task)
    held_out = held_out_prompts(cfg, task)
    warn_of_shared_prompts(cfg, train, held_out)
    return train, held_out, run_verifier(cfg, task)


def warn_of_shared_prompts(cfg: TrainConfig, train: Sequence[Prompt], held_out: Sequence[Prompt]) -> None:
    """One warning line when held-out prompts are also training prompts (the same text and answer): their accuracy
    is then partly measured on what the run trains on. (The training file itself as ``eval_data`` is refused before
    anything loads: :func:`~reinforce_ada.training.preflight.check_held_out_is_not_the_training_data`.)"""
    from reinforce_ada.sampling.memory import prompt_key

    trained = {prompt_key(p) for p in train}
    shared = sum(prompt_key(p) in trained for p in held_out)
    if shared:
        logger.warning("%d of the %d held-out prompts (%s) are also training prompts (%s): held-out accuracy is "
                       "partly measured on prompts the run trains on", shared, len(held_out),
                       cfg.eval_data or f"task {cfg.task}'s test split", cfg.data or f"task {cfg.task}'s train split")


def load_model(cfg: TrainConfig, train_prompts: Sequence[Prompt], task: Any,
               held_out: Sequence[Prompt] = ()) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, warm_start_info)``: the tiny model warm-started on the built-in ``task`` (the config's,
    built), or ``cfg.model`` loaded pretrained (no warm start: ``{}``). Every training and held-out prompt is checked
    against the model's tokenizer and context first (:func:`check_prompts_before_weights`), so a prompt that encodes
    to zero tokens or does not fit is named before a warm start or a weights file loads."""
    check_prompts_before_weights(cfg, [*train_prompts], [*held_out])
    if cfg.model == "tiny":
        from reinforce_ada.models.loading import cache_dir
        from reinforce_ada.training.warm_start import WarmStartSettings, load_or_warm_start_tiny

        if cfg.data is not None:
            raise ValueError("model='tiny' is warm-started on a built-in task; give --task, or a real --model")
        settings = WarmStartSettings.from_config(cfg)
        # The warm start sees train prompts only; its accuracy checks use a slice of the held-out split
        # different from the prompts the RL run reports on.
        sft_held_out = task.prompts(settings.eval_prompts, seed=cfg.sft_seed + 1000, split="test")
        # The warm start checks accuracy with the task's own verifier (its cache is keyed by the task).
        from reinforce_ada.verifiers import get_verifier

        return load_or_warm_start_tiny(settings, train_prompts, sft_held_out, get_verifier(task.verifier_name),
                                       cache_dir())
    from reinforce_ada.models.loading import load_pretrained
    from reinforce_ada.runs.source import locate_model

    source = locate_model(cfg.model)  # a run or checkpoint folder: the model in it
    model, tokenizer = load_pretrained(str(source.model_dir) if source else cfg.model, cfg.dtype)
    return model, tokenizer, {}


def check_prompts_before_weights(cfg: TrainConfig, train: Sequence[Prompt], held_out: Sequence[Prompt]) -> None:
    """:func:`~reinforce_ada.generation.prompting.check_prompts_fit` with the tokenizer and context of the model
    ``cfg`` names, read without its weights (``smollm2-135m``'s tokenizer comes from its GGUF file with the weights:
    checked once they load, by :func:`~reinforce_ada.training.guards.check_prompt_lengths`)."""
    from reinforce_ada.generation.prompting import check_prompts_fit, encode_prompt

    if cfg.model == "smollm2-135m":
        return
    if cfg.model == "tiny":
        from reinforce_ada.models.tiny import TINY_SHAPE, build_char_tokenizer

        tokenizer, context = build_char_tokenizer(), TINY_SHAPE["max_positions"]
    else:
        from reinforce_ada.models.loading import context_length, load_tokenizer
        from reinforce_ada.runs.source import locate_model

        source = locate_model(cfg.model)
        path = str(source.model_dir) if source else cfg.model
        tokenizer, context = load_tokenizer(path), context_length(path)
    check_prompts_fit({"training prompt": train, "held-out prompt": held_out},
                      lambda p: encode_prompt(tokenizer, p, cfg.use_chat_template), context, cfg.max_new_tokens)


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


def make_optimizer(cfg: TrainConfig, model: Any) -> tuple[Any, Any]:
    """AdamW over the trainable parameters and its schedule: linear warm-up over ``warmup_steps``, then constant."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    warmup = cfg.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    return optimizer, scheduler


def apply_optimizer_settings(cfg: TrainConfig, optimizer: Any, scheduler: Any) -> None:
    """Once a checkpoint's optimizer and schedule are loaded: the run's own ``learning_rate``, ``weight_decay`` and
    warm-up, at the step the schedule reached. The checkpoint brings back the counts (Adam's moments, the schedule's
    step); the settings are the config's, so a change forced on ``--resume`` applies from the next optimizer step
    (and an unchanged one gives the very learning rate the uninterrupted run would: ``learning_rate x
    warmup(step)``, as the schedule computes it)."""
    scheduler.base_lrs = [cfg.learning_rate] * len(optimizer.param_groups)
    for group, lr_lambda in zip(optimizer.param_groups, scheduler.lr_lambdas):
        group["initial_lr"] = cfg.learning_rate
        group["weight_decay"] = cfg.weight_decay
        group["lr"] = cfg.learning_rate * lr_lambda(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


def make_generator(cfg: TrainConfig, model: Any, tokenizer: Any) -> Any:
    """The generation backend ``cfg.generator`` names, from the registry (:func:`reinforce_ada.generation.get_generator`):
    ``hf`` samples the live model; ``vllm`` is an offline engine in this process (in streaming mode the sampler steps
    it: requests scored as they finish, aborted when not needed); ``openai`` a running server."""
    from reinforce_ada.generation import get_generator

    options: dict[str, Any] = dict(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                   top_p=cfg.top_p, use_chat_template=cfg.use_chat_template)
    if cfg.generator == "hf":
        return get_generator("hf", model, tokenizer, max_batch_size=cfg.generation_batch_size, **options)
    if cfg.generator == "openai":  # a running server: checked, then its weights pushed each step unless generation-only
        return get_generator("openai", model, tokenizer, base_url=cfg.base_url, served_model=cfg.served_model,
                             generation_only=cfg.generation_only, dead_after_s=cfg.server_dead_after, **options)
    # the engine's checkpoint: VLLMGenerator finds it from the model, or writes the model to a folder it owns; sleep
    # mode frees the engine's GPU memory while the policy trains where the platform has it; in streaming mode the
    # sampler steps the same engine, one request per sample
    return get_generator("vllm", model, tokenizer, gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                         dtype=cfg.dtype, **options)


def trainer_generator(generator: Any) -> Any:
    """A generator given to the trainer, checked: it must offer what the loop calls every step (``generate``,
    ``load_weights``, ``sleep``, ``close``), i.e. be a :class:`~reinforce_ada.generation.base.GeneratorBase`."""
    from reinforce_ada.generation.base import GeneratorBase

    if not isinstance(generator, GeneratorBase):
        raise TypeError(f"the trainer's generator must subclass reinforce_ada.generation.base.GeneratorBase (which "
                        f"gives no-op load_weights, sleep and close); got {type(generator).__name__}")
    return generator
