"""The building blocks every verifier shares: the length check and the extract-then-compare loop.

Kept apart from :mod:`reinforce_ada.verifiers.registry` so that verifier modules (including the TRL-style function
adapter the registry builds) depend on this module and the registry depends on them, never the other way round.
"""

from __future__ import annotations

from typing import Any, Sequence


def check_lengths(prompts: Sequence[Any], completions: Sequence[Any]) -> None:
    """Every verifier's first check: one prompt per completion."""
    if len(prompts) != len(completions):
        raise ValueError(f"got {len(prompts)} prompts for {len(completions)} completions; pass one prompt per "
                         f"completion")


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
