"""What every generation backend shares: prompt encoding (the single source of truth) and sampling-parameter checks.

Every generation backend and the trainer call :func:`encode_prompt`, so the prompt a completion was sampled from and
the prompt the trainer rebuilds to score it are the same token ids:

* chat messages (``list[dict]``) go through ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``;
* a plain string goes through the chat template as one user message when the tokenizer has a template and
  ``use_chat_template`` is true, and is otherwise tokenized as is, with no special tokens added.

The template is rendered to text and then tokenized with ``add_special_tokens=False``: a template writes its own
special tokens (BOS included), and adding them again would double them.

:func:`check_prompts_fit` is the one check that every prompt plus ``max_new_tokens`` fits the model's context, run
by the trainer (``training.guards.check_prompt_lengths``), ``eval`` and ``select-prompts`` before they generate.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from reinforce_ada.errors import ConfigError, DataError
from reinforce_ada.types import Prompt

__all__ = ["check_prompts_fit", "check_sampling_params", "encode_prompt", "prompt_messages"]


def prompt_messages(prompt: Prompt) -> list[dict[str, str]] | None:
    """The chat messages of ``prompt``, or ``None`` when it is a plain string; raise on any other type."""
    body = prompt.prompt
    if isinstance(body, str):
        return None
    if isinstance(body, (list, tuple)) and all(isinstance(m, dict) and "role" in m and "content" in m for m in body):
        if not body:
            raise ValueError(f"prompt {prompt.prompt_id!r} has an empty message list")
        return list(body)
    raise TypeError(f"prompt {prompt.prompt_id!r}: Prompt.prompt must be a string or a list of "
                    f"{{'role': ..., 'content': ...}} messages, got {type(body).__name__}")


def encode_prompt(tokenizer: Any, prompt: Prompt, use_chat_template: bool = True) -> list[int]:
    """Token ids of ``prompt`` as the model should see them before its completion.

    >>> from reinforce_ada.models import build_char_tokenizer
    >>> encode_prompt(build_char_tokenizer(), Prompt("p0", "1+1="))  # no chat template: the characters, no specials
    [4, 66, 4, 70]
    """
    messages = prompt_messages(prompt)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if messages is None and use_chat_template and has_template:
        messages = [{"role": "user", "content": prompt.prompt}]  # type: ignore[dict-item]
    if messages is not None:
        if not has_template:
            raise ConfigError(f"prompt {prompt.prompt_id!r} is a list of chat messages but the model's tokenizer has "
                              "no chat_template: give a model whose tokenizer has one, or plain-text prompts (no "
                              "--system-prompt, no 'messages' column)")
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        text = prompt.prompt
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        raise DataError(f"prompt {prompt.prompt_id!r} ({_shown(prompt.prompt)}) encodes to zero tokens with this "
                        f"model's tokenizer; a completion needs a non-empty prompt: fix or drop it")
    return ids


def _shown(body: Any) -> str:
    text = body if isinstance(body, str) else " ".join(str(m.get("content", "")) for m in body)
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def check_sampling_params(max_new_tokens: Any, temperature: Any, top_p: Any) -> None:
    """The checks every backend runs on its sampling parameters before any expensive work."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (sampling), got {temperature!r}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def check_prompts_fit(prompts: Mapping[str, Sequence[Prompt]], encode: Callable[[Prompt], list[int]],
                      context: int | None, max_new_tokens: int) -> None:
    """Every prompt plus ``max_new_tokens`` must fit the model's ``context`` (``None``: the model does not say);
    ``prompts`` maps a description (``training prompt``, ``task:arithmetic prompt``) to its prompts. Fails with a
    :class:`~reinforce_ada.errors.ConfigError` naming the first row that does not fit and the largest
    ``--max-new-tokens`` with which every prompt would, or a :class:`~reinforce_ada.errors.DataError` naming a row
    that encodes to zero tokens."""
    lengths = {what: _lengths(what, rows, encode) for what, rows in prompts.items()}  # zero tokens: named here
    if not context:
        return
    longest = max((n for row_lengths in lengths.values() for n in row_lengths), default=0)
    for what, rows in prompts.items():
        too_long = [(i, n) for i, n in enumerate(lengths[what]) if n + max_new_tokens > context]
        if not too_long:
            continue
        index, length = too_long[0]
        more = f" (and {len(too_long) - 1} more rows)" if len(too_long) > 1 else ""
        fix = (f"lower --max-new-tokens to {context - longest} or less" if longest < context
               else f"no --max-new-tokens fits the longest prompt ({longest} tokens): shorten or drop it")
        raise ConfigError(f"{what} at row {index} (prompt_id {rows[index].prompt_id!r}) is {length} tokens; with "
                          f"max_new_tokens={max_new_tokens} it needs {length + max_new_tokens} positions, more than "
                          f"the model's context of {context} (max_position_embeddings){more}: {fix}")


def _lengths(what: str, rows: Sequence[Prompt], encode: Callable[[Prompt], list[int]]) -> list[int]:
    """The encoded length of every prompt of ``rows``; a prompt that cannot be encoded is named by its row."""
    lengths = []
    for index, prompt in enumerate(rows):
        try:
            lengths.append(len(encode(prompt)))
        except DataError as err:
            raise DataError(f"{what} at row {index}: {err}") from None
    return lengths
