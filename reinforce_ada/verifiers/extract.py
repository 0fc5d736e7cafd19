"""Pull the final answer out of a completion: last ``\\boxed{...}``, last line, ``<answer>`` tag; and normalise it.

Every function here is linear in the length of the text (no backtracking regex), so they are safe to run in the
trainer process on adversarial model output; the expensive symbolic comparison runs elsewhere
(:mod:`reinforce_ada.verifiers.math`).
"""

from __future__ import annotations

import re

_BOX_COMMANDS = ("\\boxed", "\\fbox")


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``; ``None`` when there is none.

    Braces are matched, with ``\\{`` and ``\\}`` (LaTeX set braces) not counted. A last box that never closes (a
    completion cut off mid-answer) gives ``None`` rather than an earlier box. ``\\boxed 5`` (no braces) gives ``5``.

    >>> extract_boxed(r"first \\boxed{1}, then \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> extract_boxed(r"\\boxed{\\{1, 2\\}}")
    '\\\\{1, 2\\\\}'
    >>> extract_boxed("no box") is None, extract_boxed(r"\\boxed{12") is None
    (True, True)
    """
    start = max(text.rfind(command) for command in _BOX_COMMANDS)
    if start < 0:
        return None
    command_end = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    i = command_end
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":
        if i == command_end:  # "\\boxedfoo" is another command, not a box
            return None
        end = i
        while end < len(text) and not text[end].isspace() and text[end] not in "$":
            end += 1
        return text[i:end] or None
    depth, j = 0, i
    while j < len(text):
        char = text[j]
        if char == "\\":
            j += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
        j += 1
    return None


def extract_last_line(text: str) -> str | None:
    """The last non-empty line of ``text``, stripped; ``None`` for blank text."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def extract_answer_tag(text: str, tag: str = "answer") -> str | None:
    """The content of the last ``<answer>...</answer>`` (or ``<tag>``) pair, stripped; ``None`` when there is none."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    end = text.rfind(close_tag)
    if end < 0:
        return None
    start = text.rfind(open_tag, 0, end)
    if start < 0:
        return None
    return text[start + len(open_tag):end].strip()


def cut_at_stop(text: str, stops: tuple[str, ...] = ("<eos>", "\n")) -> str:
    """``text`` up to the first of ``stops`` (for short completions whose answer is the first line)."""
    cut = len(text)
    for stop in stops:
        index = text.find(stop)
        if 0 <= index < cut:
            cut = index
    return text[:cut]


_WHITESPACE = re.compile(r"\s+")


def normalize_answer(answer: str, *, case_sensitive: bool = True) -> str:
    """Strip whitespace and one pair of surrounding ``$``, collapse inner whitespace runs, drop a trailing period.

    >>> normalize_answer("  $ 42 $. ")
    '42'
    >>> normalize_answer("New   York", case_sensitive=False)
    'new york'
    """
    answer = answer.strip()
    if answer.endswith("."):
        answer = answer[:-1].rstrip()
    if len(answer) >= 2 and answer[0] == "$" and answer[-1] == "$":
        answer = answer.strip("$").strip()
    answer = _WHITESPACE.sub(" ", answer)
    return answer if case_sensitive else answer.lower()


def _boxed_or_last_line(text: str) -> str | None:
    boxed = extract_boxed(text)
    return boxed if boxed is not None else extract_last_line(text)


EXTRACTORS = {
    "boxed": extract_boxed,
    "last_line": extract_last_line,
    "answer_tag": extract_answer_tag,
    "full": lambda text: text,
    "auto": lambda text: _boxed_or_last_line(text),
}
"""How the ``exact`` verifier finds the final answer: ``auto`` is the last box if any, else the last line."""


def extract(text: str, how: str) -> str | None:
    """Apply the extractor named ``how`` (a key of :data:`EXTRACTORS`)."""
    try:
        extractor = EXTRACTORS[how]
    except KeyError:
        raise ValueError(f"unknown answer extraction {how!r}; choose one of {', '.join(EXTRACTORS)}") from None
    return extractor(text)
