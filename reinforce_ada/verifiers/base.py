"""The building blocks every verifier shares: the length check and the extract-then-compare loop.

Kept apart from :mod:`reinforce_ada.verifiers.registry` so that verifier modules (including the TRL-style function
adapter the registry builds) depend on this module and the registry depends on them, never the other way round.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from reinforce_ada.errors import VerifierError


def check_lengths(prompts: Sequence[Any], completions: Sequence[Any]) -> None:
    """Every verifier's first check: one prompt per completion."""
    if len(prompts) != len(completions):
        raise ValueError(f"got {len(prompts)} prompts for {len(completions)} completions; pass one prompt per "
                         f"completion")


def reward_list(answer: Any, expected: int, source: str = "verifier") -> list[Any]:
    """A reward function's result as a list of ``expected`` entries, by the one rule every verifier path uses.

    Accepted: a sequence (list, tuple) or a one-dimensional numpy array / torch tensor with one entry per
    completion. Refused with a :class:`VerifierError` naming ``source`` and what came back: a mapping (never read as
    its keys), a string, a generator or other one-pass iterator, a scalar, an array of another shape, a sequence of
    the wrong length. The entries are checked by :func:`real_reward` where they are used.

    >>> reward_list((1, 0.5, None), 3)
    [1, 0.5, None]
    >>> reward_list({0: 1.0, 1: 0.0}, 2, "reward function 'f'")
    Traceback (most recent call last):
    ...
    reinforce_ada.errors.VerifierError: reward function 'f' returned a dict; it must return a list of 2 \
rewards (real numbers or None), one per completion
    """
    if isinstance(answer, (str, bytes, dict)) or not isinstance(answer, Sequence) and not _is_array(answer):
        raise VerifierError(f"{source} returned a {type(answer).__name__}; it must return a list of {expected} "
                            f"rewards (real numbers or None), one per completion")
    rewards = answer.tolist() if _is_array(answer) else list(answer)
    if len(rewards) != expected:
        raise VerifierError(f"{source} returned {len(rewards)} rewards, but {expected} were expected (one per "
                            f"completion: {len(rewards)} rewards for {expected} completions)")
    return rewards


def _is_array(value: Any) -> bool:
    """A one-dimensional numpy array or torch tensor (what many reward functions return)."""
    return getattr(value, "ndim", None) == 1 and callable(getattr(value, "tolist", None))


def real_reward(reward: Any) -> float | None:
    """A real, finite number as a float; None, a non-number (str, dict, list, complex) or NaN/±inf -> None."""
    if reward is None or isinstance(reward, (str, bytes)) or not isinstance(reward, numbers.Real):
        return None
    value = float(reward)
    return value if math.isfinite(value) else None


def checked_rewards(answer: Any, expected: int, source: str) -> list[float | None]:
    """:func:`reward_list`, then every entry a float or None; an entry that is neither (a string, a nested list) is
    a :class:`VerifierError` naming it -- ``"1"`` is never read as 1.0. NaN and ±inf pass as floats: the scorer
    counts them as failures (:func:`real_reward`)."""
    checked: list[float | None] = []
    for i, reward in enumerate(reward_list(answer, expected, source)):
        if reward is not None and (isinstance(reward, (str, bytes)) or not isinstance(reward, numbers.Real)):
            raise VerifierError(f"{source} returned reward={reward!r} (a {type(reward).__name__}) for completion "
                                f"{i}; rewards must be real numbers or None")
        checked.append(None if reward is None else float(reward))
    return checked


class AnswerVerifier:
    """The loop shared by verifiers that compare one extracted answer with one reference per completion.

    Subclasses define :meth:`reference` (``None``: this prompt cannot be scored -> reward ``None``), :meth:`answer`
    (``None``: no answer found -> reward 0) and :meth:`compare`. ``stats`` counts completions, missing answers and
    references, and comparisons that raised (scored 0).
    """

    def __init__(self) -> None:
        self.stats: dict[str, int] = dict.fromkeys(("completions", "no_answer", "no_reference", "failures"), 0)

    def reference(self, prompt: Any) -> Any:
        raise NotImplementedError

    def answer(self, completion: Any) -> Any:
        raise NotImplementedError

    def compare(self, answer: Any, reference: Any) -> float:
        raise NotImplementedError

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float | None]:
        check_lengths(prompts, completions)
        rewards: list[float | None] = []
        for prompt, completion in zip(prompts, completions):
            self.stats["completions"] += 1
            reference = self.reference(prompt)
            if reference is None:
                self.stats["no_reference"] += 1
                rewards.append(None)
                continue
            answer = self.answer(completion)
            if answer is None:
                self.stats["no_answer"] += 1
                rewards.append(0.0)
                continue
            try:
                rewards.append(float(self.compare(answer, reference)))
            except Exception:  # noqa: BLE001 -- a comparison that breaks on odd output is a failed check, not a crash
                self.stats["failures"] += 1
                rewards.append(0.0)
        return rewards
