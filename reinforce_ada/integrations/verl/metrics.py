"""The metrics one Reinforce-Ada step reports to verl: pool vs kept rows, per-round timing, all generated tokens.

verl's legacy trainer computes its data metrics (``critic/score/*``, ``response_length/*``, ``perf/total_num_tokens``)
on the training batch only: the ``n`` kept rows per prompt plus any masked padding rows. With adaptive sampling that
batch is a selection-biased subset of what was generated, so this module reports, next to verl's numbers and with
verl's own definitions (:func:`verl.trainer.ppo.metric_utils.compute_data_metrics`):

* ``reinforce_ada/pool/...``: every completion generated this step (all rounds);
* ``reinforce_ada/kept/...``: the real rows handed to the trainer (padding rows never counted);
* ``reinforce_ada/round_s/{max,mean}`` and verl's agent-loop timing combined over rounds as max / min / mean, never
  summed (a round's ``.../max`` is a maximum; adding four of them means nothing);
* ``reinforce_ada/pool/num_tokens`` and ``reinforce_ada/perf/gen_throughput``: all generated tokens, so compute is
  not under-reported by counting only the kept rows.

Definitions (verl's): a row's score is its reward (``rm_scores`` summed); ``score/*`` is over rows with a non-empty
response (verl leaves out aborted rows); ``response_length`` counts valid response tokens (the response part of
``attention_mask``), ``clip_ratio`` is the fraction at the maximum length; ``num_tokens`` counts prompt + response
tokens (verl's ``global_token_num``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def sequence_metrics(prefix: str, scores: Sequence[float], response_lengths: Sequence[int],
                     prompt_lengths: Sequence[int], max_response_length: int) -> dict[str, float]:
    """Score, length and token-count metrics of some rows, named ``<prefix>/...``.

    Args:
        scores: ``(R,)`` one reward per row (NaN: the row was never scored; left out of ``score/*``).
        response_lengths: ``(R,)`` valid response tokens per row.
        prompt_lengths: ``(R,)`` valid prompt tokens per row.
        max_response_length: the response width (for ``clip_ratio``).

    >>> m = sequence_metrics("kept", [1.0, 0.0, 0.5], [4, 0, 2], [3, 3, 3], 4)  # row 2 is empty: no score
    >>> m["kept/score/mean"], m["kept/response_length/mean"], m["kept/response_length/clip_ratio"], m["kept/num_tokens"]
    (0.75, 2.0, 0.3333333333333333, 15.0)
    """
    scores = np.asarray(scores, dtype=np.float64)  # (R,)
    lengths = np.asarray(response_lengths, dtype=np.float64)  # (R,)
    prompts = np.asarray(prompt_lengths, dtype=np.float64)  # (R,)
    if not len(scores) == len(lengths) == len(prompts):
        raise ValueError(f"{len(scores)} scores, {len(lengths)} response lengths and {len(prompts)} prompt lengths")
    metrics = {f"{prefix}/num_rows": float(len(lengths)),
               f"{prefix}/num_tokens": float(lengths.sum() + prompts.sum()),
               f"{prefix}/num_response_tokens": float(lengths.sum())}
    scored = scores[(lengths > 0) & ~np.isnan(scores)]  # verl leaves aborted (empty) responses out of score/*
    for name, values in (("score", scored), ("response_length", lengths)):
        metrics.update({f"{prefix}/{name}/mean": float(values.mean()) if len(values) else float("nan"),
                        f"{prefix}/{name}/max": float(values.max()) if len(values) else float("nan"),
                        f"{prefix}/{name}/min": float(values.min()) if len(values) else float("nan")})
    metrics[f"{prefix}/response_length/clip_ratio"] = (
        float((lengths == max_response_length).mean()) if len(lengths) else float("nan"))
    return metrics


def combine_round_timing(rounds: Sequence[Mapping[str, float]], round_rows: Sequence[int],
                         round_seconds: Sequence[float]) -> dict[str, float]:
    """One step's timing from its rounds' ``meta_info["timing"]`` dicts, never summed across rounds.

    A key ending in ``/max`` takes the maximum over rounds, ``/min`` the minimum, ``/mean`` the mean over every row
    of every round (each round's mean weighted by its rows). Any other key (verl's ``agent_loop/slowest/*``, a
    rollout's own ``gen``) describes one call as a whole; it is taken from the slowest round, so the entries that
    belong together (e.g. the slowest sample's time and lengths) stay together. ``reinforce_ada/round_s/{max,mean}``
    is the wall-clock time of a round's generation call.

    >>> t = combine_round_timing([{"a/max": 2.0, "a/mean": 1.0, "gen": 3.0}, {"a/max": 5.0, "a/mean": 4.0, "gen": 6.0}],
    ...                          round_rows=[3, 1], round_seconds=[1.0, 2.0])
    >>> t["a/max"], t["a/mean"], t["gen"], t["reinforce_ada/round_s/max"], t["reinforce_ada/round_s/mean"]
    (5.0, 1.75, 6.0, 2.0, 1.5)
    """
    if not len(rounds) == len(round_rows) == len(round_seconds):
        raise ValueError(f"{len(rounds)} timing dicts for {len(round_rows)} row counts and {len(round_seconds)} times")
    if not rounds:
        return {}
    slowest = int(np.argmax(round_seconds))
    combined: dict[str, float] = {}
    keys = dict.fromkeys(k for timing in rounds for k in timing)
    for key in keys:
        present = [(float(t[key]), rows) for t, rows in zip(rounds, round_rows) if key in t]
        values = [v for v, _ in present]
        if key.endswith("/max"):
            combined[key] = max(values)
        elif key.endswith("/min"):
            combined[key] = min(values)
        elif key.endswith("/mean"):
            weights = [rows for _, rows in present]
            combined[key] = float(np.average(values, weights=weights)) if sum(weights) else float(np.mean(values))
        elif key in rounds[slowest]:
            combined[key] = float(rounds[slowest][key])
        else:
            combined[key] = max(values)
    combined["reinforce_ada/round_s/max"] = float(max(round_seconds))
    combined["reinforce_ada/round_s/mean"] = float(np.mean(round_seconds))
    return combined
