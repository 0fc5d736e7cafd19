"""``math`` verifier: symbolic equivalence of a completion's final answer with ``Prompt.answer`` (via ``math-verify``).

Algorithm, per completion:

1. Take the content of the completion's last ``\\boxed{...}`` (linear scan, :func:`~.extract.extract_boxed`). With no
   box, the whole completion goes to ``math-verify``'s own extraction (or scores 0 with ``require_boxed=True``).
2. Fast path, in the calling process: if the boxed answer equals the reference after whitespace/``$`` normalisation,
   reward 1; if both are plain integers, reward ``int(a) == int(b)``. Most correct answers in training end here.
3. Otherwise ``math_verify.parse`` both sides (the reference wrapped in ``$...$`` unless it already has ``$`` or a
   box; parsed references are cached per worker) and ``math_verify.verify`` them: reward 1 if equivalent, else 0. A
   reference that does not parse gives ``None`` ("could not score").

Step 3 runs in a persistent pool of worker processes (:class:`~.pool.WorkerPool`) with a hard per-completion
``timeout``: ``math-verify``'s own ``signal.alarm`` timeout works only in a main thread, and sympy can hang on short
adversarial strings (sixty nested parentheses take ``math-verify`` more than 20 s). A completion that runs past the
timeout scores 0 and its worker is killed and replaced; an exception or a dead worker also scores 0. Counters in
``verifier.stats``: ``completions``, ``fast_path``, ``checked`` (sent to a worker), ``timeouts``, ``failures``,
``no_answer`` (``require_boxed`` and no box) and ``no_reference`` (reference missing or unparsable).

Workers start on first use (about a second: they import sympy); call :meth:`MathVerifier.close` or use the verifier
as a context manager to stop them. With the default ``forkserver`` start method the training script's top level must
be guarded by ``if __name__ == "__main__":`` (as for any ``multiprocessing`` code).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
from typing import Any, Sequence

from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers.base import check_lengths
from reinforce_ada.verifiers.extract import extract_boxed, normalize_answer
from reinforce_ada.verifiers.pool import WorkerPool
from reinforce_ada.verifiers.registry import register_verifier

logger = logging.getLogger(__name__)

_INTEGER = re.compile(r"[+-]?\d{1,200}")


def require_math_verify() -> None:
    """Raise a clear ``ImportError`` when ``math-verify`` is not installed."""
    if importlib.util.find_spec("math_verify") is None:
        raise ImportError("the 'math' verifier needs math-verify: pip install 'reinforce-ada[math]' "
                          "(or pip install 'math-verify>=0.9')")


def reference_text(answer: Any) -> str | None:
    """The reference answer as ``math-verify`` should parse it: ``$...$``-wrapped unless it has ``$`` or a box."""
    if answer is None:
        return None
    text = str(answer).strip()
    if not text:
        return None
    if "$" in text or "\\boxed" in text:
        return text
    return f"${text}$"


@functools.lru_cache(maxsize=4096)
def _parse_reference(text: str) -> list:
    from math_verify import parse

    return parse(text, parsing_timeout=None)


def score_math(reference: str, prediction: str, float_rounding: int = 6, strict: bool = True) -> float | None:
    """Worker side: 1.0 if ``prediction``'s answer is equivalent to ``reference``, 0.0 if not, ``None`` when the
    reference does not parse. Runs without ``math-verify``'s signal timeouts (the pool enforces the timeout)."""
    from math_verify import parse, verify

    gold = _parse_reference(reference)
    if not gold:
        return None
    predicted = parse(prediction, parsing_timeout=None)
    if not predicted:
        return 0.0
    return 1.0 if verify(gold, predicted, float_rounding=float_rounding, strict=strict, timeout_seconds=None) else 0.0


def _fast_path(reference: Any, candidate: str) -> float | None:
    """1.0 / 0.0 when a cheap comparison settles it, else ``None``."""
    gold = normalize_answer(str(reference))
    answer = normalize_answer(candidate)
    if answer == gold:
        return 1.0
    if _INTEGER.fullmatch(gold) and _INTEGER.fullmatch(answer):
        return 1.0 if int(gold) == int(answer) else 0.0
    return None


@register_verifier("math")
class MathVerifier:
    """Reward 1.0 when the completion's final answer is mathematically equivalent to ``Prompt.answer``, else 0.0.

    >>> from reinforce_ada.types import Completion, Prompt
    >>> prompt = Prompt("p0", "What is 2/4?", answer="\\\\frac{1}{2}")
    >>> texts = ["so the answer is \\\\boxed{0.5}", "\\\\boxed{\\\\dfrac{2}{4}}", "\\\\boxed{2}", "I don't know"]
    >>> with MathVerifier(num_workers=1, timeout=30.0) as verifier:
    ...     verifier([prompt] * 4, [Completion("p0", text) for text in texts])
    [1.0, 1.0, 0.0, 0.0]
    """

    def __init__(self, *, timeout: float = 5.0, num_workers: int | None = None, require_boxed: bool = False,
                 float_rounding: int = 6, strict: bool = True, fast_path: bool = True,
                 start_method: str | None = None):
        """
        Args:
            timeout: Seconds one completion may take in a worker before it scores 0 and the worker is replaced.
            num_workers: Worker processes (default ``min(4, os.cpu_count())``).
            require_boxed: Score 0 a completion with no ``\\boxed{}`` instead of letting ``math-verify`` search it.
            float_rounding: Decimal places ``math-verify`` rounds floats to before comparing.
            strict: ``math-verify``'s strict mode (variables must match; no set/relation leniency).
            fast_path: Settle exact string / integer matches in this process without a worker.
            start_method: ``multiprocessing`` start method (default ``forkserver`` where available, else ``spawn``).
        """
        require_math_verify()
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds (got {timeout})")
        num_workers = min(4, os.cpu_count() or 1) if num_workers is None else num_workers
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1 (got {num_workers})")
        self.timeout = float(timeout)
        self.require_boxed = require_boxed
        self.float_rounding = float_rounding
        self.strict = strict
        self.fast_path = fast_path
        self._pool = WorkerPool(score_math, num_workers=num_workers, timeout=self.timeout, start_method=start_method,
                                preload=["math_verify"])
        self.stats: dict[str, int] = dict.fromkeys(
            ("completions", "fast_path", "checked", "timeouts", "failures", "no_answer", "no_reference"), 0)

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        check_lengths(prompts, completions)
        rewards: list[float | None] = [None] * len(completions)
        jobs: list[tuple[int, tuple]] = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            self.stats["completions"] += 1
            reference = reference_text(prompt.answer)
            if reference is None:
                self.stats["no_reference"] += 1
                continue
            boxed = extract_boxed(completion.text)
            if boxed is None and self.require_boxed:
                self.stats["no_answer"] += 1
                rewards[i] = 0.0
                continue
            if self.fast_path:
                quick = _fast_path(prompt.answer, boxed if boxed is not None else completion.text)
                if quick is not None:
                    self.stats["fast_path"] += 1
                    rewards[i] = quick
                    continue
            prediction = f"\\boxed{{{boxed}}}" if boxed is not None else completion.text
            jobs.append((i, (reference, prediction, self.float_rounding, self.strict)))
        if jobs:
            self.stats["checked"] += len(jobs)
            outcomes = self._pool.map([args for _, args in jobs], timeout=self.timeout)
            for (i, _), outcome in zip(jobs, outcomes):
                if outcome.status == "ok":
                    rewards[i] = outcome.value
                    if outcome.value is None:
                        self.stats["no_reference"] += 1
                elif outcome.status == "timeout":
                    self.stats["timeouts"] += 1
                    rewards[i] = 0.0
                else:
                    self.stats["failures"] += 1
                    logger.debug("math verifier %s on completion %d: %s", outcome.status, i, outcome.value)
                    rewards[i] = 0.0
        return rewards

    def close(self) -> None:
        """Stop the worker processes (they restart on the next call)."""
        self._pool.close()

    def __enter__(self) -> MathVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
