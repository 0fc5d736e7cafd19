"""The strategies ``reinforce-ada compare`` knows by name, each as the ``train`` settings that make it, and the
``NAME=SETTINGS`` form that defines one on the command line.

A strategy here is what one arm of a comparison runs: every ``TrainConfig.strategy`` under its own name (GRPO, DAPO,
the three Reinforce-Ada exit rules, budget mode, Reinforce-Ada-Est), plus a few variants that need more than one
setting (GRPO with 8 or 16 completions per prompt, the Est presets of arXiv 2510.04996v3 App. C.2 and of the upstream
``hanze`` branch). The streaming
sampler one sample at a time (``stream-<rule>``) is the paper's rule without the round barrier
(docs/beyond_the_paper.md). A new named strategy is one row of :data:`STRATEGIES`.

On the command line ``NAME=SETTINGS`` defines a strategy for one comparison: ``SETTINGS`` are ``train`` options,
optionally after the name of a strategy to start from, e.g. ``grpo8="grpo --group-size 8"`` or
``stream-mem="stream-mixed --sampler.memory.enabled"``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Callable

__all__ = ["STRATEGIES", "STREAM_ONE_AT_A_TIME", "parse_strategy"]

STREAM_ONE_AT_A_TIME = {"sampler.mode": "streaming", "sampler.streaming.allocation": "fixed",
                        "sampler.samples_per_round": 1, "sampler.max_rounds": 32}
"""The streaming sampler asking for one sample per request, at most 32 per prompt (M x N of the paper's 8 x 4)."""

STRATEGIES: dict[str, dict[str, Any]] = {  # name -> train settings by dotted name
    "grpo": {"strategy": "grpo"},
    "dapo": {"strategy": "dapo"},
    "ada-balanced": {"strategy": "ada-balanced"},
    "ada-positive": {"strategy": "ada-positive"},
    "ada-mixed": {"strategy": "ada-mixed"},  # exit at one positive and one negative
    "ada-budget": {"strategy": "ada-budget"},  # GRPO's samples per step, spread by a cross-step pass-rate memory
    "grpo-n8": {"strategy": "grpo", "sampler.group_size": 8},  # twice GRPO's completions per prompt
    "grpo-n16": {"strategy": "grpo", "sampler.group_size": 16},
    # Reinforce-Ada-Est (v3 Alg. 1): 8 x prompts samples per step (GRPO-n8's), 1/sqrt(p_hat) in samples and in the
    # gradient, from a per-visit-decayed memory; then two presets of it
    "ada-est": {"strategy": "ada-est"},
    # v3 App. C.2's ablation: the whole 1/p weight in samples, none in the gradient ("overly aggressive")
    "ada-est-sample-only": {"strategy": "ada-est", "sampler.sample_share": 1.0},
    # the upstream `hanze` branch (ray_trainer_ema.py): Beta(1, 16) prior, decay 0.9 per visit, samples
    # proportional to 1/p_hat with at least one per prompt and no upper clip, no gradient weight
    "ada-est-hanze": {"strategy": "ada-est", "sampler.sample_share": 1.0, "sampler.est.prior_alpha": 1.0,
                      "sampler.est.prior_beta": 16.0, "sampler.est.decay": 0.9, "sampler.est.min_samples": 1,
                      "sampler.est.max_samples": None},
    "stream-balanced": {"strategy": "ada-balanced", **STREAM_ONE_AT_A_TIME},
    "stream-positive": {"strategy": "ada-positive", **STREAM_ONE_AT_A_TIME},
    "stream-mixed": {"strategy": "ada-mixed", **STREAM_ONE_AT_A_TIME},
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def _did_you_mean(name: str, known: dict[str, Any]) -> str:
    """`` (did you mean 'grpo'?)`` for the known strategy closest to ``name``, else nothing (as ``train --strategy``
    says it)."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_strategy(spec: str, known: dict[str, dict[str, Any]],
                   parse_options: Callable[[list[str]], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """``(name, settings)`` of one ``--strategies`` entry: a name of ``known``, or ``NAME=[BASE] OPTIONS``.

    ``parse_options`` turns ``train`` options into ``{dotted name: value}`` (raising a UsageError for a bad one).
    Errors are :class:`~reinforce_ada.errors.UsageError`\\ s naming the entry.
    """
    from reinforce_ada.errors import UsageError

    name, sep, rest = spec.partition("=")
    if not _NAME.fullmatch(name):
        raise UsageError(f"--strategies {spec!r}: a strategy name is letters, digits and . _ + - (it names the run "
                         f"folders)")
    if not sep:
        if name not in known:
            raise UsageError(f"--strategies: unknown strategy {name!r}{_did_you_mean(name, known)}; choose from "
                             f"{', '.join(known)}, or define one as NAME=\"[BASE] --train-option VALUE ...\"")
        return name, dict(known[name])
    words = shlex.split(rest)
    settings: dict[str, Any] = {}
    if words and not words[0].startswith("-"):
        base = words.pop(0)
        if base not in known:
            raise UsageError(f"--strategies {spec!r}: unknown strategy {base!r} to start from"
                             f"{_did_you_mean(base, known)}; choose from {', '.join(known)}")
        settings.update(known[base])
    if not words and not settings:
        raise UsageError(f"--strategies {spec!r}: give a strategy to start from and/or train options after '='")
    try:
        settings.update(parse_options(words))
    except UsageError as err:
        raise UsageError(f"--strategies {name}: {err}") from None
    return name, settings
