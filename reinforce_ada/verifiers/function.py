"""Adapt a TRL-style reward function ``fn(prompts, completions, **kwargs) -> list[float | None]`` to a verifier.

TRL calls reward functions with the prompts and completions of a batch plus every other dataset column as a keyword
list (``answer=[...]``, ``solution=[...]``). :class:`RewardFunctionVerifier` rebuilds that call from our
:class:`~reinforce_ada.types.Prompt` objects:

- ``prompts``: each ``Prompt.prompt`` (a string, or a chat message list);
- ``completions``: the completion text; when the prompt is a message list, ``[{"role": "assistant", "content":
  text}]`` as TRL passes conversational completions;
- keyword columns: ``answer_key`` (default ``"answer"``) carries ``Prompt.answer``; every key found in any
  ``Prompt.metadata`` becomes a column (``None`` where a prompt lacks it); ``completion_ids`` carries the token ids;
  ``options`` given to the constructor are passed unchanged.

The result must be a sequence (list, tuple, 1-D array) with one entry per completion, each a real number or ``None``
(:func:`~reinforce_ada.verifiers.base.checked_rewards`): a dict, a string, a generator or a scalar is a
:class:`~reinforce_ada.sampling.protocols.VerifierError` -- a failed verifier call, which the sampler retries one
completion at a time and then counts as failures -- never read as its keys or characters.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.base import check_lengths, checked_rewards


def import_function(path: str) -> Callable:
    """Import ``"package.module:function"`` (dots after the colon walk attributes), with clear errors."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"expected 'package.module:function', got {path!r}")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(f"cannot import module {module_name!r} for reward function {path!r}: {err}") from err
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AttributeError(f"module {module_name!r} has no attribute {attribute!r} "
                                 f"(reward function {path!r})") from None
    if not callable(target):
        raise TypeError(f"{path!r} is a {type(target).__name__}, not a callable reward function")
    refuse_async(target, path)
    return target


def refuse_async(fn: Callable, name: str) -> None:
    """Raise :class:`ConfigError` when ``fn`` is an ``async def`` function (or async generator, or an object whose
    ``__call__`` is one): called like a plain function it returns a coroutine, never the rewards."""
    import inspect

    call = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        raise ConfigError(f"reward function {name!r} is an async def function; a reward function is called as "
                          f"fn(prompts, completions, **columns) and must return the rewards: make it a plain def "
                          f"(run any awaits inside it with asyncio.run)")


class RewardFunctionVerifier:
    """Wrap ``fn(prompts, completions, **kwargs)`` (TRL's reward-function signature) as a verifier.

    >>> from reinforce_ada.types import Completion, Prompt
    >>> def same_length(prompts, completions, answer, **kwargs):
    ...     return [float(len(c) == len(a)) for c, a in zip(completions, answer)]
    >>> verifier = RewardFunctionVerifier(same_length)
    >>> verifier([Prompt("p", "Say hi", answer="hi")] * 2, [Completion("p", "yo"), Completion("p", "hello")])
    [1.0, 0.0]
    """

    def __init__(self, fn: Callable, *, answer_key: str = "answer", **options: Any):
        if not callable(fn):
            raise TypeError(f"reward function must be callable (got {type(fn).__name__})")
        refuse_async(fn, getattr(fn, "__name__", type(fn).__name__))
        self.fn = fn
        self.answer_key = answer_key
        self.options = options
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.stats: dict[str, int] = dict.fromkeys(("completions", "none"), 0)

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        check_lengths(prompts, completions)
        texts: list[Any] = [
            [{"role": "assistant", "content": c.text}] if isinstance(p.prompt, list) else c.text
            for p, c in zip(prompts, completions)
        ]
        columns: dict[str, list[Any]] = {}
        for key in dict.fromkeys(k for p in prompts for k in p.metadata):
            columns[key] = [p.metadata.get(key) for p in prompts]
        columns[self.answer_key] = [p.answer for p in prompts]
        columns["completion_ids"] = [list(c.token_ids) for c in completions]
        rewards = checked_rewards(self.fn([p.prompt for p in prompts], texts, **columns, **self.options),
                                  len(completions), f"reward function {self.name!r}")
        self.stats["completions"] += len(rewards)
        self.stats["none"] += rewards.count(None)
        return rewards
