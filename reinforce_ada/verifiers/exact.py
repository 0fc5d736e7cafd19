"""``exact`` and ``arithmetic`` verifiers: cheap string/integer checks that run in the calling process.

``exact``: extract the final answer (``extract="auto"``: the last ``\\boxed{}`` if any, else the last non-empty line;
also ``boxed``, ``last_line``, ``answer_tag``, ``full``), normalise both it and ``Prompt.answer`` (strip whitespace and
surrounding ``$``, collapse inner whitespace, drop one trailing period; optionally lower-case) and reward 1.0 on
equality, else 0.0 (no answer found -> 0.0).

``arithmetic``: for the built-in arithmetic task, whose completions are just the number. Take the text before the
first ``<eos>`` or newline, strip it; reward 1.0 if it is an integer (optional sign, digits only) equal to
``int(Prompt.answer)``, else 0.0. Nothing is ever evaluated: ``"40+6"`` is not ``46``.

``last-integer``: for a model that explains before it answers ("To add 29 and 16 ... so the answer is 45."): reward
1.0 if the last number in the completion, read with its sign and decimal part, is the integer ``int(Prompt.answer)``
(``45.0`` is, ``45.5`` is not), else 0.0 (no number: 0.0).

All three give ``None`` ("could not score") when ``Prompt.answer`` is missing (or, for ``arithmetic`` and
``last-integer``, not an integer).
"""

from __future__ import annotations

import re
from typing import Sequence

from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.base import AnswerVerifier
from reinforce_ada.verifiers.extract import EXTRACTORS, cut_at_stop, extract, normalize_answer
from reinforce_ada.verifiers.registry import register_verifier

_INTEGER = re.compile(r"[+-]?\d{1,100}")


@register_verifier("exact")
class ExactMatchVerifier(AnswerVerifier):
    """Normalised string equality of the extracted final answer with ``Prompt.answer``.

    >>> from reinforce_ada.types import Completion, Prompt
    >>> verifier = ExactMatchVerifier()
    >>> prompt = Prompt("p0", "Capital of France?", answer="Paris")
    >>> verifier([prompt] * 3, [Completion("p0", t) for t in ["It is\\n Paris. ", "\\\\boxed{Paris}", "paris"]])
    [1.0, 1.0, 0.0]
    """

    def __init__(self, *, extract: str = "auto", case_sensitive: bool = True):
        super().__init__()
        if extract not in EXTRACTORS:
            raise ValueError(f"unknown extract={extract!r}; choose one of {', '.join(EXTRACTORS)}")
        self.extract = extract
        self.case_sensitive = case_sensitive

    def reference(self, prompt: Prompt) -> str | None:
        return None if prompt.answer is None else normalize_answer(str(prompt.answer),
                                                                   case_sensitive=self.case_sensitive)

    def answer(self, completion: Completion) -> str | None:
        answer = extract(completion.text, self.extract)
        return None if answer is None else normalize_answer(answer, case_sensitive=self.case_sensitive)

    def compare(self, answer: str, reference: str) -> float:
        return 1.0 if answer == reference else 0.0


@register_verifier("arithmetic")
class ArithmeticVerifier(AnswerVerifier):
    """1.0 when the completion's first line is the integer ``Prompt.answer``; never evaluates anything.

    >>> from reinforce_ada.types import Completion, Prompt
    >>> prompt = Prompt("12+34=", "12+34=", answer="46")
    >>> ArithmeticVerifier()([prompt] * 4, [Completion("12+34=", t) for t in ["46<eos>", " 46\\n7", "40+6", "4 6"]])
    [1.0, 1.0, 0.0, 0.0]
    """

    def __init__(self, *, stops: Sequence[str] = ("<eos>", "\n")):
        super().__init__()
        self.stops = tuple(stops)

    def reference(self, prompt: Prompt) -> int | None:
        reference = str(prompt.answer).strip() if prompt.answer is not None else ""
        return int(reference) if _INTEGER.fullmatch(reference) else None

    def answer(self, completion: Completion) -> int | None:
        answer = cut_at_stop(completion.text, self.stops).strip()
        return int(answer) if _INTEGER.fullmatch(answer) else None

    def compare(self, answer: int, reference: int) -> float:
        return 1.0 if answer == reference else 0.0


_ANY_NUMBER = re.compile(r"[+\-\u2212]?\d{1,100}(?:\.\d{1,100})?")
"""A signed number with an optional decimal part; ``\u2212`` is the minus sign (U+2212) some models write."""


@register_verifier("last-integer")
class LastIntegerVerifier(ArithmeticVerifier):
    """1.0 when the last number anywhere in the completion is the integer ``Prompt.answer``.

    The last number is read with its sign (``-``, ``+`` or the minus sign U+2212) and its decimal part, so that
    ``"3 - 8 = -5"`` reads -5, ``"13.5"`` is not 13 and ``"13.0"`` is; text after it does not matter. A sign counts
    only directly before the digits: ``"7 - 2"`` ends with 2, ``"5-3"`` with -3 (an expression, not an answer).

    >>> from reinforce_ada.types import Completion, Prompt
    >>> prompt = Prompt("q", "What is 29 + 16? Reply with just the number.", answer="45")
    >>> texts = ["To add 29 and 16, ... so 29 + 16 = 45.", "45", "The answer is 46", "forty-five", "45.0", "45.5"]
    >>> LastIntegerVerifier()([prompt] * 6, [Completion("q", t) for t in texts])
    [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    >>> negative = Prompt("r", "What is 3 - 8? Reply with just the number.", answer="-5")
    >>> LastIntegerVerifier()([negative] * 3, [Completion("r", t) for t in ["3 - 8 = -5", "\u22125 of course", "5"]])
    [1.0, 1.0, 0.0]
    """

    def __init__(self) -> None:
        super().__init__(stops=())

    def answer(self, completion: Completion) -> int | None:
        last = None
        for last in _ANY_NUMBER.finditer(completion.text):  # linear in the text; keeps the last match
            pass
        if last is None:
            return None
        whole, _, fraction = last.group().replace("\u2212", "-").partition(".")
        if fraction.strip("0"):
            return None  # not an integer, so not the integer answer
        return int(whole)
