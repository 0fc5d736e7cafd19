"""A :class:`~reinforce_ada.sampling.protocols.Verifier` over a ``GRPOTrainer``'s reward functions.

The sampler scores every round's completions through this adapter. It calls each of the trainer's ``reward_funcs``
the way TRL's ``_calculate_rewards`` does (``prompts=``, ``completions=``, ``completion_ids=``, the dataset's other
columns, ``trainer_state``, ``log_extra``, ``log_metric``) -- plain callables, ``async`` callables and
sequence-classification reward models -- and keeps every completion's per-function values (``None`` -> NaN, as in TRL)
for the trainer, which computes the advantages from them with ``reward_weights`` (:mod:`.advantages`).

What it returns to the sampler is the **correctness score**: the unweighted sum of the values of the
``correctness`` functions (``None`` when all of them returned ``None``). The sampler compares it with
``positive_threshold`` for exits and selection, so a format reward can be trained on without making every
well-formatted completion "correct".

As in TRL: a reward function that raises stops training (the exception propagates through the sampler, which would
otherwise score the completion ``None``; see :class:`RewardFunctionError`); a completion every function returned
``None`` for logs TRL's warning on TRL's logger. ``log_extra`` values are kept per completion (the trainer hands the
kept completions' values to TRL's completions table); ``log_metric`` goes to ``trainer._log_metric`` (averaged over
the step's calls, i.e. over everything scored), unless ``forward_logs`` is off. Unlike TRL, nothing is gathered
across processes here: each process scores its own pools, whose sizes differ.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from typing import Any, Sequence

from reinforce_ada.integrations.trl.generation import PROMPT_IDS_KEY
from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.base import checked_rewards

ROW_KEY = "trl_row"
"""``Prompt.metadata`` key holding the dataset row (dict) the prompt came from."""

TRL_LOGGER = logging.getLogger("trl.trainer.grpo_trainer")
"""TRL's logger: the "all reward functions returned None" warning goes where TRL users look for it."""


class RewardFunctionError(BaseException):
    """A reward function raised; carries the exception through the sampler to the trainer, which re-raises it.

    A ``BaseException`` on purpose: the sampler treats an ``Exception`` from a verifier as "could not score" (retry one
    completion at a time, then score ``None``), but plain TRL stops on a raising reward function, and so does this
    integration.
    """

    def __init__(self, name: str, error: BaseException):
        super().__init__(f"reward function {name!r} raised {error!r}")
        self.name, self.error = name, error


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class TRLRewardVerifier:
    """Score completions with ``trainer.reward_funcs``; return the correctness score (see module doc)."""

    def __init__(self, trainer: Any, correctness: Sequence[int] | None = None, forward_logs: bool = True):
        self.trainer = trainer
        self.correctness = list(correctness) if correctness is not None else None
        """Indices of the reward functions that decide correctness (``None``: every function)."""
        self.forward_logs = forward_logs
        """Keep ``log_extra`` values and forward ``log_metric`` to the trainer (off: both are no-ops)."""
        self._values: dict[int, list[float]] = {}
        self._extras: dict[int, dict[str, Any]] = {}

    def reset(self) -> None:
        """Forget the kept per-function values and extra columns (call at the start of each step)."""
        self._values.clear()
        self._extras.clear()

    def values_for(self, completion: Completion) -> list[float] | None:
        """Per-function rewards (NaN where a function returned None) of a completion scored since :meth:`reset`."""
        return self._values.get(id(completion))

    def extras_for(self, completion: Completion) -> dict[str, Any]:
        """The ``log_extra`` columns reward functions logged for ``completion`` since :meth:`reset`."""
        return self._extras.get(id(completion), {})

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        trainer = self.trainer
        if not completions:
            return []
        prompt_values = [p.prompt for p in prompts]
        conversational = not isinstance(prompt_values[0], str)
        completion_values = (self._messages(prompts, completions) if conversational else [c.text for c in completions])
        completion_ids = [list(c.token_ids) for c in completions]
        rows = [p.metadata.get(ROW_KEY, {}) for p in prompts]
        keys = [k for k in rows[0] if k not in ("prompt", "completion", "completion_ids")]
        columns: dict[str, Any] = {k: [row.get(k) for row in rows] for k in keys}
        kwargs = dict(columns, trainer_state=trainer.state, log_extra=self._extra_logger(completions),
                      log_metric=trainer._log_metric if self.forward_logs else _noop)

        per_func: list[list[float]] = []
        for func, processing_class, name in zip(trainer.reward_funcs, trainer.reward_processing_classes,
                                                trainer.reward_func_names):
            try:
                if _is_module(func):
                    values = self._score_with_model(func, processing_class, prompt_values, completion_values,
                                                    conversational)
                else:
                    output = func(prompts=prompt_values, completions=completion_values,
                                  completion_ids=completion_ids, **kwargs)
                    if inspect.isawaitable(output):
                        output = asyncio.run_coroutine_threadsafe(_await(output), trainer.async_loop).result()
                    values = checked_rewards(output, len(completions), f"reward function {name!r}")
            except Exception as err:  # noqa: BLE001 -- re-raised by the trainer, as TRL would
                raise RewardFunctionError(name, err) from err
            per_func.append([math.nan if v is None else v for v in values])

        correctness = self.correctness if self.correctness is not None else range(len(per_func))
        scores: list[float | None] = []
        warned = False
        for i, completion in enumerate(completions):
            values = [vals[i] for vals in per_func]
            self._values[id(completion)] = values
            if not warned and all(math.isnan(v) for v in values):
                self._warn_all_none(columns, i, prompt_values[i], completion_values[i])
                warned = True
            decisive = [values[k] for k in correctness if not math.isnan(values[k])]
            scores.append(sum(decisive) if decisive else None)
        return scores

    def _messages(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[list[dict]]:
        """Chat completions as TRL builds them: parsed with the tokenizer's response schema when it has one (tool
        calls, reasoning; transformers >= 5), else ``[{"role": "assistant", "content": text}]``."""
        import transformers
        from packaging.version import Version

        tokenizer = getattr(self.trainer, "_tokenizer", None)
        has_schema = (getattr(tokenizer, "response_template", None) is not None
                      or getattr(tokenizer, "response_schema", None) is not None)
        if not has_schema or Version(transformers.__version__) < Version("5.0.0"):  # TRL's condition
            return [[{"role": "assistant", "content": c.text}] for c in completions]
        from trl.chat_template_utils import parse_response

        return [[parse_response(tokenizer, list(c.token_ids), prefix=p.metadata.get(PROMPT_IDS_KEY))]
                for p, c in zip(prompts, completions)]

    def _extra_logger(self, completions: Sequence[Completion]) -> Any:
        """``log_extra(column, values)`` for this call: one value per completion, kept per completion."""
        if not self.forward_logs:
            return _noop

        def log_extra(column: str, values: list) -> None:
            values = list(values)
            if len(values) != len(completions):
                raise ValueError(f"log_extra({column!r}, ...) got {len(values)} values for {len(completions)} "
                                 "completions; log one value per completion")
            for completion, value in zip(completions, values):
                self._extras.setdefault(id(completion), {})[column] = value

        return log_extra

    @staticmethod
    def _warn_all_none(columns: dict[str, list], row: int, prompt: Any, completion: Any) -> None:
        """TRL's warning, word for word, for the first completion every reward function returned ``None`` for."""
        row_kwargs = {key: values[row] for key, values in columns.items()}
        row_kwargs["prompt"], row_kwargs["completion"] = prompt, completion
        TRL_LOGGER.warning(f"All reward functions returned None for the following kwargs:\n{row_kwargs}\n"
                           "Please ensure that at least one reward function returns a valid reward.")

    def _score_with_model(self, model: Any, processing_class: Any, prompts: list, completions: list,
                          conversational: bool) -> list[float]:
        import torch
        from trl.data_utils import apply_chat_template

        trainer = self.trainer
        if conversational:
            texts = [apply_chat_template({"messages": p + c}, processing_class, **trainer.chat_template_kwargs)["text"]
                     for p, c in zip(prompts, completions)]
        else:
            texts = [p + c for p, c in zip(prompts, completions)]
        inputs = processing_class(text=texts, return_tensors="pt", padding=True, padding_side="right",
                                  add_special_tokens=False)
        inputs = {k: v.to(trainer.accelerator.device) for k, v in inputs.items()}
        with torch.inference_mode():
            return model(**inputs).logits[:, 0].float().tolist()


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _is_module(func: Any) -> bool:
    import torch

    return isinstance(func, torch.nn.Module)
