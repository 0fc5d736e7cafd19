"""Training data: ``load_prompts`` reads prompts from files or Hugging Face datasets; ``get_task`` builds a task.

``load_prompts(source, prompt_key=..., answer_key=..., template=..., system_prompt=..., split=..., limit=...,
id_key=...)`` returns :class:`~reinforce_ada.types.Prompt` objects with stable ids (see
:mod:`reinforce_ada.data.loading`). A :class:`Task` (``get_task("arithmetic", digits=2)``,
``get_task("reasoning-gym:basic_arithmetic")``) generates prompts with ``task.prompts(num, seed, split)`` and names
its verifier in ``task.verifier_name`` (see :mod:`reinforce_ada.data.tasks`).
"""

from reinforce_ada.data.loading import SUPPORTED_EXTENSIONS, apply_template, content_id, load_prompts
from reinforce_ada.data.tasks import (
    TASKS,
    ArithmeticTask,
    ReasoningGymTask,
    Task,
    get_task,
    list_tasks,
    register_task,
    split_of,
)

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "TASKS",
    "ArithmeticTask",
    "ReasoningGymTask",
    "Task",
    "apply_template",
    "content_id",
    "get_task",
    "list_tasks",
    "load_prompts",
    "register_task",
    "split_of",
]
