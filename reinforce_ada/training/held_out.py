"""The trainer's held-out evaluation beyond its accuracy: the difficulty strata fixed before training, and what every
evaluation measures from the samples it draws anyway.

* :func:`fix_strata` -- before training, ``eval_strata_samples`` (k) samples of every held-out prompt under the start
  model fix its stratum (:mod:`reinforce_ada.difficulty`). They are drawn with the random generators (Python, numpy,
  torch) seeded from the run's seed and restored afterwards, so training samples exactly what it would have without
  them (with the ``hf`` generator, which samples from torch's generator; an engine with a random state of its own --
  vLLM, a server -- gives different training samples with strata than without, still the same for the same settings).
* :func:`evaluation_metrics` -- from one evaluation's samples: ``eval/accuracy/<stratum>`` and
  ``eval/num_prompts/<stratum>``, ``eval/pass@k`` for k = 1, 2, 4, ... up to ``eval_samples``, and ``eval/entropy``
  (the policy's mean token entropy over the sampled completion tokens). None of them draws a sample or a random
  number.
* :func:`held_out_record` -- one evaluation's per-prompt results, a line of the run folder's :data:`HELD_OUT_FILE`:
  what ``compare --lr-selection split`` needs to choose a learning rate on some held-out prompts and report on others.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from reinforce_ada.difficulty import Strata, stratum_metrics
from reinforce_ada.evaluation import SampledAccuracy, pass_at_k_curve, pass_at_k_ks, sampled_accuracy
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)

__all__ = ["HELD_OUT_FILE", "evaluation_metrics", "fix_strata", "held_out_record", "strata_seed"]

HELD_OUT_FILE = "held_out.jsonl"
"""One line per held-out evaluation (:func:`held_out_record`). A resumed run appends again from its checkpoint's
step, so a reader keeps the last line of each step."""


def strata_seed(seed: int) -> int:
    """The seed the strata's samples are drawn with: the run's seed moved to a stream of its own (in 0..2**32-1)."""
    return (seed + 0x5EED5) % 2**32


def fix_strata(generator: Any, verifier: Any, prompts: Sequence[Prompt], config: Any) -> tuple[Strata, dict[str, int]]:
    """The difficulty strata of ``prompts``: ``config.eval_strata_samples`` samples each under the current (start)
    model, drawn under :func:`strata_seed` with every random generator restored afterwards (see the module
    docstring), and checked like an evaluation (a verifier that could not score enough of them stops the run rather
    than fix made-up strata). Returns the strata and how much each of the (watched) verifier's counters grew while
    scoring them, which the trainer keeps out of ``verifier/*``."""
    from reinforce_ada.runs.checkpoint import rng_state, set_rng_state
    from reinforce_ada.training.guards import check_verifier_failures
    from reinforce_ada.training.setup import seed_everything
    from reinforce_ada.verifiers.registry import verifier_stats

    seed = strata_seed(config.seed)
    before = verifier_stats(verifier)
    verifier.start_window()
    saved = rng_state()
    started = time.perf_counter()
    try:
        seed_everything(seed)
        counts = sampled_accuracy(generator, verifier, prompts, config.eval_strata_samples,
                                  config.positive_threshold)
    finally:
        set_rng_state(saved)
    check_verifier_failures("difficulty strata before training", counts.num_verifier_failures, counts.num_samples,
                            config.max_verifier_failure_rate, verifier)
    strata = Strata.fix(prompts, counts.counts, config.eval_strata_samples,
                        (config.eval_strata_hard_max, config.eval_strata_medium_max), seed,
                        counts.num_verifier_failures)
    strata.seconds = time.perf_counter() - started
    logger.info("difficulty strata of %d held-out prompts from %d samples each (%.1f s): %s", len(prompts),
                config.eval_strata_samples, strata.seconds,
                ", ".join(f"{name} {num}" for name, num in strata.counts().items()))
    return strata, {k: v - before.get(k, 0) for k, v in verifier_stats(verifier).items()}


def evaluation_metrics(counts: SampledAccuracy, num_samples: int, strata: Sequence[str | None] | None,
                       entropy: tuple[float, int]) -> dict[str, float]:
    """What one evaluation reports beyond ``eval/accuracy`` (see the module docstring): ``counts`` its samples,
    ``num_samples`` per prompt (``eval_samples``), ``strata`` each prompt's stratum (``None``: the run has none),
    ``entropy`` the (sum, tokens) of :func:`reinforce_ada.training.update.token_entropy`."""
    metrics: dict[str, float] = {}
    if strata is not None:
        metrics.update(stratum_metrics(strata, counts.counts))
    metrics.update({f"eval/pass@{k}": value for k, value in
                    pass_at_k_curve(counts.counts, pass_at_k_ks(num_samples)).items()})
    total, tokens = entropy
    if tokens:
        metrics["eval/entropy"] = total / tokens
    return metrics


def held_out_record(step: int, keys: Sequence[str], counts: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """One evaluation's per-prompt results: ``{"step", "keys", "samples", "correct"}``, the held-out prompts' content
    hashes (:func:`reinforce_ada.sampling.memory.prompt_key`) in order with each one's samples scored and correct.

    >>> held_out_record(32, ["a1", "b2"], [(4, 1), (4, 0)])
    {'step': 32, 'keys': ['a1', 'b2'], 'samples': [4, 4], 'correct': [1, 0]}
    """
    return {"step": int(step), "keys": list(keys), "samples": [n for n, _ in counts],
            "correct": [c for _, c in counts]}
