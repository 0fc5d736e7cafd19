"""A :class:`~reinforce_ada.sampler.Verifier` over a ``GRPOTrainer``'s reward functions.

The sampler scores every round's completions through this adapter. It calls each of the trainer's ``reward_funcs``
the way TRL does (``prompts=``, ``completions=``, ``completion_ids=``, the dataset's other columns, ``trainer_state``)
-- plain callables, ``async`` callables and sequence-classification reward models -- and returns
``sum_i weight_i * reward_i`` over the functions that returned a value (TRL's ``reward_weights`` and its
``sum_then_normalize`` aggregation); ``None`` when every function returned ``None``.

Differences from TRL's own ``_calculate_rewards``: nothing is gathered across processes (each process scores its own
pools, whose sizes differ), and ``log_extra`` / ``log_metric`` are no-ops here (their rows would not line up with
TRL's completions table). Every completion's per-function values are kept (``values_for``) so that the trainer can
hand TRL the scores of the kept completions instead of calling the reward functions on them a second time.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any, Sequence

from reinforce_ada.types import Completion, Prompt

ROW_KEY = "trl_row"
"""``Prompt.metadata`` key holding the dataset row (dict) the prompt came from."""


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class TRLRewardVerifier:
    """Score completions with ``trainer.reward_funcs`` weighted by ``trainer.reward_weights``."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self._values: dict[int, list[float]] = {}

    def reset(self) -> None:
        """Forget the kept per-function values (call at the start of each step)."""
        self._values.clear()

    def values_for(self, completion: Completion) -> list[float] | None:
        """Per-function rewards (NaN where a function returned None) of a completion scored since :meth:`reset`."""
        return self._values.get(id(completion))

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        trainer = self.trainer
        if not completions:
            return []
        prompt_values = [p.prompt for p in prompts]
        conversational = not isinstance(prompt_values[0], str)
        texts = [c.text for c in completions]
        completion_values = ([[{"role": "assistant", "content": t}] for t in texts] if conversational else texts)
        completion_ids = [list(c.token_ids) for c in completions]
        rows = [p.metadata.get(ROW_KEY, {}) for p in prompts]
        keys = [k for k in rows[0] if k not in ("prompt", "completion", "completion_ids")]
        kwargs: dict[str, Any] = {k: [row.get(k) for row in rows] for k in keys}
        kwargs.update(trainer_state=trainer.state, log_extra=_noop, log_metric=_noop)

        weights = [float(w) for w in trainer.reward_weights.tolist()]
        per_func: list[list[float | None]] = []
        for func, processing_class, name in zip(trainer.reward_funcs, trainer.reward_processing_classes,
                                                trainer.reward_func_names):
            if _is_module(func):
                values = self._score_with_model(func, processing_class, prompt_values, completion_values,
                                                conversational)
            else:
                output = func(prompts=prompt_values, completions=completion_values, completion_ids=completion_ids,
                              **kwargs)
                if inspect.isawaitable(output):
                    output = asyncio.run_coroutine_threadsafe(_await(output), trainer.async_loop).result()
                values = list(output)
            if len(values) != len(completions):
                raise ValueError(f"reward function {name!r} returned {len(values)} rewards for "
                                 f"{len(completions)} completions")
            per_func.append(values)

        for i, completion in enumerate(completions):
            self._values[id(completion)] = [math.nan if vals[i] is None else float(vals[i]) for vals in per_func]
        rewards: list[float | None] = []
        for i in range(len(completions)):
            terms = [(w, vals[i]) for w, vals in zip(weights, per_func)
                     if vals[i] is not None and not math.isnan(float(vals[i]))]
            rewards.append(sum(w * float(v) for w, v in terms) if terms else None)
        return rewards

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
