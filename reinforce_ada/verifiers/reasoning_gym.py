"""``reasoning-gym`` verifier: score a completion with the procedural dataset's own ``score_answer``.

Prompts made by the ``reasoning-gym:<task>`` task (:mod:`reinforce_ada.data.tasks`) carry the generated entry in
``Prompt.metadata["reasoning_gym"]`` as ``{"dataset": name, "entry": {"question", "answer", "metadata"}}``. The answer
is taken from the completion (``extract="answer_tag"``: the last ``<answer>...</answer>``, reasoning-gym's own
convention; ``boxed``, ``last_line``, ``full`` and ``auto`` also work) and scored with
``reasoning_gym.get_score_answer_fn(dataset)(answer, entry)``, a float in [0, 1] (no answer found -> 0.0). A prompt
without that metadata gives ``None``. Needs the optional ``reasoning-gym`` package (imported on first use).

Partial credit. Several datasets give similarity credit to wrong answers (``spell_backward`` scores a misspelt
word 0.6-0.9, ``word_sorting`` a list with one word wrong 0.89). Taken as rewards, such scores cross
``positive_threshold`` (0.5), so exit rules and balanced selection would count wrong answers as positive. By default
the reward is therefore the scorer's verdict: 1.0 when its score is 1 (``>= 1 - CORRECT_TOLERANCE``; some scorers
return 1.0000000000000002), else 0.0 -- and ``stats["partial_credit"]`` counts the wrong answers that had some
credit. ``partial_credit=True`` returns the raw score instead; then set ``positive_threshold`` above the highest
credit a wrong answer can get (e.g. 0.99), or positives will include wrong answers.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.base import AnswerVerifier
from reinforce_ada.verifiers.extract import EXTRACTORS, extract
from reinforce_ada.verifiers.registry import register_verifier

METADATA_KEY = "reasoning_gym"

CORRECT_TOLERANCE = 1e-6
"""A score counts as correct when it is at least ``1 - CORRECT_TOLERANCE``."""


def require_reasoning_gym() -> None:
    """Raise a clear ``ImportError`` when ``reasoning-gym`` is not installed."""
    if importlib.util.find_spec("reasoning_gym") is None:
        raise ImportError("reasoning-gym tasks need the reasoning-gym package: pip install 'reinforce-ada[tasks]' "
                          "(or pip install reasoning-gym)")


@register_verifier("reasoning-gym")
class ReasoningGymVerifier(AnswerVerifier):
    """Score with the reasoning-gym dataset named in ``Prompt.metadata["reasoning_gym"]``: 1.0 for a correct answer,
    0.0 otherwise (``partial_credit=True``: the dataset's raw score in [0, 1]; see the module docstring)."""

    def __init__(self, *, extract: str = "answer_tag", partial_credit: bool = False):
        require_reasoning_gym()
        super().__init__()
        self.stats["partial_credit"] = 0
        self.partial_credit = partial_credit
        if extract not in EXTRACTORS:
            raise ValueError(f"unknown extract={extract!r}; choose one of {', '.join(EXTRACTORS)}")
        self.extract = extract
        self._scorers: dict[str, Callable[[Any, dict], float]] = {}

    def _scorer(self, dataset: str) -> Callable[[Any, dict], float]:
        if dataset not in self._scorers:
            import reasoning_gym

            self._scorers[dataset] = reasoning_gym.get_score_answer_fn(dataset)
        return self._scorers[dataset]

    def reference(self, prompt: Prompt) -> dict | None:
        info = prompt.metadata.get(METADATA_KEY)
        return info if isinstance(info, dict) and "dataset" in info and "entry" in info else None

    def answer(self, completion: Completion) -> str | None:
        return extract(completion.text, self.extract)

    def compare(self, answer: str, reference: dict) -> float:
        score = float(self._scorer(reference["dataset"])(answer, reference["entry"]))
        if score >= 1.0 - CORRECT_TOLERANCE:
            return 1.0
        if score > 0.0:
            self.stats["partial_credit"] += 1
        return score if self.partial_credit else 0.0
