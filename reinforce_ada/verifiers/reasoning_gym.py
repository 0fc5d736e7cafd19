"""``reasoning-gym`` verifier: score a completion with the procedural dataset's own ``score_answer``.

Prompts made by the ``reasoning-gym:<task>`` task (:mod:`reinforce_ada.data.tasks`) carry the generated entry in
``Prompt.metadata["reasoning_gym"]`` as ``{"dataset": name, "entry": {"question", "answer", "metadata"}}``. The answer
is taken from the completion (``extract="answer_tag"``: the last ``<answer>...</answer>``, reasoning-gym's own
convention; ``boxed``, ``last_line``, ``full`` and ``auto`` also work) and scored with
``reasoning_gym.get_score_answer_fn(dataset)(answer, entry)``, a float in [0, 1] (no answer found -> 0.0). A prompt
without that metadata gives ``None``. Needs the optional ``reasoning-gym`` package (imported on first use).
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.extract import EXTRACTORS, extract
from reinforce_ada.verifiers.registry import AnswerVerifier, register_verifier

METADATA_KEY = "reasoning_gym"


def require_reasoning_gym() -> None:
    """Raise a clear ``ImportError`` when ``reasoning-gym`` is not installed."""
    if importlib.util.find_spec("reasoning_gym") is None:
        raise ImportError("reasoning-gym tasks need the reasoning-gym package: pip install 'reinforce-ada[tasks]' "
                          "(or pip install reasoning-gym)")


@register_verifier("reasoning-gym")
class ReasoningGymVerifier(AnswerVerifier):
    """Score with the reasoning-gym dataset named in ``Prompt.metadata["reasoning_gym"]``."""

    def __init__(self, *, extract: str = "answer_tag"):
        require_reasoning_gym()
        super().__init__()
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
        return self._scorer(reference["dataset"])(answer, reference["entry"])
