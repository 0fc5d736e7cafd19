"""Difficulty strata of held-out prompts: where a gain lands (Reinforce-Ada, arXiv 2510.04996v3, Table 5 and App. C.1).

The paper splits its held-out prompts by the *base* model's pass rate over 16 samples into four strata -- extremely
hard (0 of 16), hard ((0, 0.2]), medium ((0.2, 0.5]) and easy ((0.5, 1]) -- and reports the accuracy gain of each
strategy per stratum: adaptive sampling gains most on the extremely hard and hard prompts. Here the strata are fixed
once, before training, from ``k`` samples per held-out prompt under the start model (:meth:`Strata.fix`), with the two
inner bounds settable (``bounds = (hard_max, medium_max)``, the paper's ``(0.2, 0.5)``); every later evaluation then
reports its accuracy per stratum (:func:`stratum_metrics`). The assignment is kept in the run folder's
``strata.json`` (and in every checkpoint, so a resumed run keeps it) and looked up by each prompt's content
(:func:`reinforce_ada.sampling.memory.prompt_key`), so an evaluation of the same prompts finds them whatever their ids.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from reinforce_ada.errors import DataError
from reinforce_ada.evaluation import pass_at_k_curve
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.types import Prompt

__all__ = ["PAPER_BOUNDS", "STRATA", "STRATA_FILE", "Strata", "check_bounds", "stratum_metrics", "stratum_of"]

STRATA = ("extremely_hard", "hard", "medium", "easy")
"""The four strata, hardest first (the metric names ``eval/accuracy/<stratum>``)."""
PAPER_BOUNDS = (0.2, 0.5)
"""The paper's upper pass rates of *hard* and *medium* (App. C.1); *extremely hard* is a pass rate of exactly 0."""
STRATA_FILE = "strata.json"
"""The run folder's record of its strata."""
FORMAT = 1


def check_bounds(bounds: Sequence[float]) -> tuple[float, float]:
    """``(hard_max, medium_max)`` with ``0 < hard_max < medium_max < 1``, or a ValueError saying what is wrong."""
    if len(bounds) != 2 or not all(isinstance(b, (int, float)) and math.isfinite(b) for b in bounds):
        raise ValueError(f"strata bounds must be two numbers (hard's and medium's upper pass rate), got {bounds!r}")
    hard, medium = float(bounds[0]), float(bounds[1])
    if not 0 < hard < medium < 1:
        raise ValueError(f"strata bounds need 0 < hard's upper pass rate < medium's < 1 (got {hard:g}, {medium:g})")
    return hard, medium


def stratum_of(num_correct: int, num_samples: int, bounds: Sequence[float] = PAPER_BOUNDS) -> str:
    """The stratum of a prompt with ``num_correct`` of ``num_samples`` samples correct.

    >>> [stratum_of(c, 16) for c in (0, 1, 3, 4, 8, 9, 16)]  # 3/16 = 0.19, 4/16 = 0.25, 8/16 = 0.5, 9/16 = 0.56
    ['extremely_hard', 'hard', 'hard', 'medium', 'medium', 'easy', 'easy']
    """
    if not 0 <= num_correct <= num_samples or num_samples < 1:
        raise ValueError(f"need 0 <= correct <= samples and samples >= 1, got {num_correct} of {num_samples}")
    hard, medium = check_bounds(bounds)
    rate = num_correct / num_samples
    if num_correct == 0:
        return "extremely_hard"
    return "hard" if rate <= hard else "medium" if rate <= medium else "easy"


@dataclass
class Strata:
    """Each held-out prompt's stratum, fixed from ``num_samples`` samples per prompt under the start model."""

    num_samples: int
    """k: the samples per prompt the pass rates were measured with."""
    bounds: tuple[float, float]
    """The upper pass rates of *hard* and *medium*."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Per prompt: ``prompt_id``, ``key`` (content hash), ``num_samples``, ``num_correct``, ``stratum``."""
    seed: int | None = None
    """The seed the samples were drawn with (None: not recorded)."""
    num_verifier_failures: int = 0
    """Samples the verifier could not score (counted as incorrect)."""
    seconds: float | None = None
    """How long drawing and scoring the samples took (what fixing the strata cost)."""

    @classmethod
    def fix(cls, prompts: Sequence[Prompt], counts: Sequence[tuple[int, int]], num_samples: int,
            bounds: Sequence[float] = PAPER_BOUNDS, seed: int | None = None,
            num_verifier_failures: int = 0) -> Strata:
        """The strata of ``prompts`` from their ``(samples, correct)`` counts (a prompt that got no sample back is
        *extremely hard*: nothing it produced was correct)."""
        if len(prompts) != len(counts):
            raise ValueError(f"{len(prompts)} prompts but {len(counts)} counts")
        bounds = check_bounds(bounds)
        rows = [{"prompt_id": p.prompt_id, "key": prompt_key(p), "num_samples": n, "num_correct": c,
                 "stratum": stratum_of(c, n, bounds) if n else "extremely_hard"} for p, (n, c) in zip(prompts, counts)]
        return cls(num_samples, bounds, rows, seed, num_verifier_failures)

    def counts(self) -> dict[str, int]:
        """Prompts per stratum, every stratum named (hardest first)."""
        out = dict.fromkeys(STRATA, 0)
        for row in self.rows:
            out[row["stratum"]] += 1
        return out

    def of(self, prompts: Sequence[Prompt]) -> list[str | None]:
        """Each prompt's stratum, found by its content (``None``: not among the prompts the strata were fixed on)."""
        return list(map(self.lookup(), prompts))

    def lookup(self) -> Callable[[Prompt], str | None]:
        """A function giving a prompt's stratum by its content (``None``: not among the strata's prompts)."""
        by_key = {row["key"]: row["stratum"] for row in self.rows}
        return lambda prompt: by_key.get(prompt_key(prompt))

    def pass_curve(self) -> dict[int, float]:
        """The start model's pass@k curve (k = 1, 2, 4, ... up to ``num_samples``) from the samples that fixed the
        strata."""
        return pass_at_k_curve([(row["num_samples"], row["num_correct"]) for row in self.rows])

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "num_samples": self.num_samples, "bounds": list(self.bounds), "seed": self.seed,
                "num_verifier_failures": self.num_verifier_failures, "seconds": self.seconds,
                "counts": self.counts(),
                "pass_curve": {str(k): v for k, v in self.pass_curve().items()},
                "definition": describe(self.bounds), "prompts": self.rows}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "strata") -> Strata:
        try:
            return cls(int(data["num_samples"]), check_bounds(data["bounds"]), list(data["prompts"]),
                       data.get("seed"), int(data.get("num_verifier_failures", 0)), data.get("seconds"))
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{where}: not a record of difficulty strata ({type(err).__name__}: {err})") from None

    @classmethod
    def read(cls, path: str | Path) -> Strata:
        """The strata recorded in ``path`` (a run's ``strata.json``); a file that is not one is named."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise DataError(f"{path}: cannot read the difficulty strata ({err})") from None
        return cls.from_json(data, str(path))


def describe(bounds: Sequence[float]) -> str:
    """The strata in words, e.g. ``extremely_hard: 0; hard: (0, 0.2]; medium: (0.2, 0.5]; easy: (0.5, 1]``."""
    hard, medium = bounds
    return f"extremely_hard: 0; hard: (0, {hard:g}]; medium: ({hard:g}, {medium:g}]; easy: ({medium:g}, 1]"


def stratum_metrics(strata: Sequence[str | None], counts: Sequence[tuple[int, int]],
                    prefix: str = "eval") -> dict[str, float]:
    """An evaluation's accuracy per stratum: ``{prefix}/accuracy/<stratum>`` (the mean over the stratum's prompts of
    their share of correct samples; left out for an empty stratum) and ``{prefix}/num_prompts/<stratum>`` (every
    stratum), from each prompt's stratum and ``(samples, correct)``.

    >>> stratum_metrics(["hard", "hard", "easy"], [(4, 1), (4, 2), (4, 4)])["eval/accuracy/hard"]  # (1/4 + 2/4) / 2
    0.375
    """
    sums, sizes = dict.fromkeys(STRATA, 0.0), dict.fromkeys(STRATA, 0)
    for name, (n, c) in zip(strata, counts):
        if name is not None:
            sums[name] += c / n if n else 0.0
            sizes[name] += 1
    metrics: dict[str, float] = {}
    for name in STRATA:
        if sizes[name]:
            metrics[f"{prefix}/accuracy/{name}"] = sums[name] / sizes[name]
        metrics[f"{prefix}/num_prompts/{name}"] = float(sizes[name])
    return metrics
