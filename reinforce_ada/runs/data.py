"""A run's data, by one rule each: how it reads a prompt file, which prompts it holds out, which reward function
scores it (with the run's options, :func:`verifier_options`). The trainer builds its data with these (:func:`reinforce_ada.training.setup.load_data`), and
``reinforce-ada eval RUN`` / ``select-prompts RUN`` rebuild the same from the run's config, so a command given a run
reports on exactly the prompts the run reported on.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.config import TrainConfig
from reinforce_ada.types import Prompt

__all__ = ["held_out_prompts", "held_out_source", "held_out_task_name", "prompt_keys", "run_task", "run_verifier",
           "run_verifier_name", "train_on_prompts_command", "training_prompts", "verifier_options"]


def prompt_keys(cfg: TrainConfig) -> dict[str, Any]:
    """How the run reads a prompt file: its columns, template and system prompt (``load_prompts`` options)."""
    return dict(prompt_key=cfg.prompt_key, answer_key=cfg.answer_key, template=cfg.template,
                system_prompt=cfg.system_prompt)


def run_task(cfg: TrainConfig) -> Any:
    """The run's built-in task with its options, built (``None`` for a run on a prompt file); build it once and pass
    it to the functions below."""
    if cfg.data is not None:
        return None
    from reinforce_ada.data import get_task

    return get_task(cfg.task, **cfg.task_options())


def training_prompts(cfg: TrainConfig, task: Any) -> list[Prompt]:
    """The prompts the run trains on: its ``data`` file, else ``task_train_prompts`` prompts of the built-in task's
    train split (``task``, :func:`run_task`'s) drawn with ``seed`` -- or, for 0, a pool of max(4096, 4 x
    ``batch_size``), or fewer where the task says its mix would change beyond (``Task.pool_size``: ``arithmetic-chat``
    draws 280, about a quarter from each of its families).
    (``reinforce-ada select-prompts RUN`` estimates the same prompts.)"""
    from reinforce_ada.data import load_prompts

    if cfg.data is not None:
        return load_prompts(cfg.data, **prompt_keys(cfg))
    num = cfg.task_train_prompts or max(4096, cfg.batch_size * 4)
    size = task.pool_size("train")
    if not cfg.task_train_prompts and size is not None:
        num = min(num, size)
    return task.prompts(num, seed=cfg.seed, split="train")


def held_out_task_name(cfg: TrainConfig) -> str | None:
    """The built-in task whose test split the run holds out: ``eval_data``'s ``task:NAME``, else the run's own task
    when it trains on one and has no ``eval_data``; ``None`` when its held-out prompts come from a file (or there
    are none)."""
    if cfg.eval_data:
        return cfg.eval_data.removeprefix("task:") if cfg.eval_data.startswith("task:") else None
    return cfg.task if cfg.data is None else None


def held_out_prompts(cfg: TrainConfig, task: Any) -> list[Prompt]:
    """The prompts the run reports held-out accuracy on: ``eval_data`` (at most ``eval_prompts``), else for a
    built-in task (``task``, :func:`run_task`'s) ``eval_prompts`` prompts of its test split drawn with ``seed + 1``,
    else none. ``eval_data: task:NAME`` holds out task NAME's test split the same way, also for a run on a prompt
    file (with the config's task options when NAME is its ``task``). (``reinforce-ada eval RUN`` uses the same
    prompts.)"""
    from reinforce_ada.data import get_task, load_prompts

    name = held_out_task_name(cfg)
    if name is None:
        return load_prompts(cfg.eval_data, **prompt_keys(cfg), limit=cfg.eval_prompts or None) if cfg.eval_data else []
    if not cfg.eval_prompts:
        return []
    if task is None or cfg.data is not None or name != cfg.task:
        task = get_task(name, **(cfg.task_options() if name == cfg.task else {}))
    return task.prompts(cfg.eval_prompts, seed=cfg.seed + 1, split="test")


def held_out_source(cfg: TrainConfig) -> str:
    """Where :func:`held_out_prompts` takes the run's held-out prompts from, in words."""
    name = held_out_task_name(cfg)
    if name is None:
        return str(cfg.eval_data)
    return f"task {name}'s test split drawn with seed {cfg.seed + 1}, the run's seed + 1"


def run_verifier_name(cfg: TrainConfig, task: Any) -> str:
    """The run's reward function by name: ``cfg.verifier``, else the task's own (``math`` for prompt files)."""
    if cfg.verifier is not None:
        return cfg.verifier
    if cfg.data is not None:
        return "math"
    return task.verifier_name


def verifier_options(name: str, config: Any) -> dict[str, Any]:
    """Options for ``get_verifier(name)`` from the config: a ``module:function`` reward function gets the answer
    column under its name (``verifier_answer_kwarg``, else ``answer_key``, as TRL passes columns); ``math`` takes
    ``verifier_timeout`` per completion in its own workers."""
    if ":" in name:
        return {"answer_key": config.verifier_answer_kwarg or config.answer_key}
    if name == "math" and config.verifier_timeout:
        return {"timeout": config.verifier_timeout}
    return {}


def run_verifier(cfg: TrainConfig, task: Any) -> Any:
    """The run's reward function (:func:`run_verifier_name`) with the run's options (timeout, answer keyword)."""
    from reinforce_ada.verifiers import get_verifier

    name = run_verifier_name(cfg, task)
    return get_verifier(name, **verifier_options(name, cfg))


def train_on_prompts_command(run_dir: Any, cfg: TrainConfig, data: str) -> str:
    """The ``reinforce-ada train`` command that trains the run's model (``run_dir``, its newest checkpoint) further on
    the prompt file ``data`` (``select-prompts RUN`` writes one), scored and held out as the run was: its reward
    function when that is not a prompt file's default (``math``), its held-out prompts (``--eval-data task:NAME`` for
    a run on a built-in task), its ``max_new_tokens`` and ``eval_prompts`` where the new run's defaults differ. Into a
    folder of its own, ``<run_dir>-selected``."""
    import shlex

    from reinforce_ada.config import MODEL_DEFAULTS, model_kind

    verifier = run_verifier_name(cfg, run_task(cfg) if cfg.verifier is None and cfg.data is None else None)
    held_out = held_out_task_name(cfg)
    words = ["reinforce-ada", "train", "--model", str(run_dir), "--data", str(data)]
    if verifier != "math":
        words += ["--verifier", verifier]
    if held_out is not None and cfg.eval_prompts:
        words += ["--eval-data", f"task:{held_out}"]
        if held_out == "arithmetic" and cfg.task_digits != TrainConfig.task_digits:
            words += ["--task-digits", str(cfg.task_digits)]
    elif cfg.eval_data:
        words += ["--eval-data", cfg.eval_data]
    defaults = MODEL_DEFAULTS[model_kind(str(run_dir))]
    for name in ("max_new_tokens", "eval_prompts"):
        if getattr(cfg, name) != defaults[name] and (name != "eval_prompts" or "--eval-data" in words):
            words += [f"--{name.replace('_', '-')}", str(getattr(cfg, name))]
    return shlex.join([*words, "--output-dir", f"{str(run_dir).rstrip('/')}-selected"])
