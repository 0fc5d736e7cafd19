"""Evaluation: sample ``k`` completions per prompt, score them, report Ave@k, pass@1 and pass@k per dataset.

For a prompt with ``n`` scored samples of which ``c`` are correct (reward above ``threshold``):

* **Ave@k** is the accuracy ``c / n`` averaged over prompts -- the metric of the Reinforce-Ada paper (Ave@32).
* **pass@k** is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on Code",
  eq. 1): ``1 - C(n - c, k) / C(n, k)``, averaged over prompts. It is computed in the product form
  ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)``, which never forms the huge binomials.
* **pass@1** from the same samples is ``c / n`` again, so it equals Ave@k by construction; both are reported because
  papers name it either way.

A failed verification (``None``) counts as incorrect and is counted in ``num_verifier_failures``. The overall row
averages each metric over datasets weighted by their number of prompts. ``evaluate`` can write every generation to a
jsonl file (dataset, prompt id, prompt, reference answer, completion text, reward, correct, finish reason).

The ``reinforce-ada eval`` command around it lives in :mod:`reinforce_ada.commands.eval`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import sample_and_score, validate_prompts
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

__all__ = ["SampledAccuracy", "evaluate", "format_results", "pass_at_k", "sampled_accuracy"]

METRICS = ("ave@k", "pass@1", "pass@k")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct: ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021).

    >>> pass_at_k(4, 1, 2)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    0.5
    >>> pass_at_k(10, 0, 5), pass_at_k(10, 6, 5)  # nothing correct; fewer than k incorrect
    (0.0, 1.0)
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"pass_at_k: {name} must be an int, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    failure = 1.0  # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    for i in range(n - c + 1, n + 1):
        failure *= 1.0 - k / i
    return 1.0 - failure


@dataclass
class SampledAccuracy:
    """Counts of one :func:`sampled_accuracy`: samples scored, correct ones, and verifier failures among them."""

    num_samples: int = 0
    num_correct: int = 0
    num_verifier_failures: int = 0
    outputs: list[list[Completion]] = field(default_factory=list, repr=False, compare=False)
    """The completions, one list per prompt (the trainer checks their log-probabilities against its weights)."""

    @property
    def accuracy(self) -> float:
        """The share of samples that are correct (0 when there are none)."""
        return self.num_correct / max(self.num_samples, 1)


def sampled_accuracy(generator: Generator, verifier: Verifier, prompts: Sequence[Prompt], samples: int = 1,
                     threshold: float = 0.5) -> SampledAccuracy:
    """``samples`` completions of every prompt in one generator call, scored: how many, how many correct (reward
    above ``threshold``), how many the verifier could not score (they count as incorrect). The trainer's held-out
    accuracy and the warm start's stopping test."""
    outputs, rewards = sample_and_score(generator, verifier, [GenerationRequest(p, samples) for p in prompts])
    flat = [r for prompt_rewards in rewards for r in prompt_rewards]
    return SampledAccuracy(len(flat), sum(1 for r in flat if r is not None and r > threshold),
                           sum(r is None for r in flat), outputs)


def evaluate(generator: Generator, verifier: Verifier | Mapping[str, Verifier], datasets: Mapping[str, Sequence[Prompt]],
             k: int, *, out_jsonl: str | Path | None = None, batch_size: int = 64, threshold: float = 0.5,
             progress: bool = True) -> dict[str, Any]:
    """Ave@k, pass@1 and pass@k per dataset and overall (weighted by number of prompts).

    Args:
        generator: asked for ``k`` completions of each prompt, ``batch_size`` prompts per call.
        verifier: one verifier for every dataset, or a mapping from dataset name to its verifier.
        datasets: dataset name -> prompts (ids unique within a dataset).
        k: samples per prompt.
        out_jsonl: when set, every generation is written there, one JSON object per line.
        threshold: a completion is correct when its reward is above this.
        progress: show a tqdm bar over prompt batches (on a terminal only).

    Returns:
        ``{"k": k, "datasets": {name: {"num_prompts", "num_samples", "num_verifier_failures", "ave@k", "pass@1",
        "pass@k"}}, "average": {"num_prompts", "ave@k", "pass@1", "pass@k"}}``.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not datasets:
        raise ValueError("datasets is empty: nothing to evaluate")
    verifiers = dict(verifier) if isinstance(verifier, Mapping) else {name: verifier for name in datasets}
    missing = [name for name in datasets if name not in verifiers]
    if missing:
        raise ValueError(f"no verifier given for dataset(s) {missing}")
    checked = {}
    for name, prompts in datasets.items():
        try:
            checked[name] = validate_prompts(prompts)
        except (TypeError, ValueError) as err:
            raise type(err)(f"dataset {name!r}: {err}") from None

    from tqdm.auto import tqdm

    sink = open(out_jsonl, "w", encoding="utf-8") if out_jsonl is not None else None
    results: dict[str, Any] = {"k": k, "datasets": {}, "average": {}}
    try:
        for name, prompts in checked.items():
            sums = dict.fromkeys(METRICS, 0.0)
            num_samples = num_failures = 0
            starts = range(0, len(prompts), batch_size)
            for start in tqdm(starts, desc=f"eval {name}", unit="batch", disable=None if progress else True):
                batch = prompts[start:start + batch_size]
                outputs, rewards = sample_and_score(generator, verifiers[name],
                                                    [GenerationRequest(p, k) for p in batch])
                for prompt, completions, prompt_rewards in zip(batch, outputs, rewards):
                    correct = [r is not None and r > threshold for r in prompt_rewards]
                    num_failures += sum(r is None for r in prompt_rewards)
                    num_samples += len(completions)
                    for metric, value in _prompt_metrics(prompt, len(correct), sum(correct), k).items():
                        sums[metric] += value
                    if sink is not None:
                        for completion, reward, ok in zip(completions, prompt_rewards, correct):
                            sink.write(json.dumps({
                                "dataset": name, "prompt_id": prompt.prompt_id, "prompt": prompt.prompt,
                                "answer": prompt.answer, "completion": completion.text, "reward": reward,
                                "correct": ok, "finish_reason": completion.finish_reason}, default=str) + "\n")
            row = {"num_prompts": len(prompts), "num_samples": num_samples, "num_verifier_failures": num_failures}
            row.update({metric: sums[metric] / len(prompts) for metric in METRICS})
            results["datasets"][name] = row
            logger.info("%s: %d prompts, Ave@%d %.4f, pass@%d %.4f", name, len(prompts), k, row["ave@k"], k,
                        row["pass@k"])
    finally:
        if sink is not None:
            sink.close()
    rows = results["datasets"].values()
    total = sum(row["num_prompts"] for row in rows)
    results["average"] = {"num_prompts": total}
    results["average"].update({metric: sum(row[metric] * row["num_prompts"] for row in rows) / total
                               for metric in METRICS})
    return results


def _prompt_metrics(prompt: Prompt, n: int, c: int, k: int) -> dict[str, float]:
    if n == 0:
        logger.warning("prompt %r got no completion; it counts as wrong", prompt.prompt_id)
        return dict.fromkeys(METRICS, 0.0)
    if n < k:
        logger.warning("prompt %r got %d completions for k=%d; its pass@k is pass@%d", prompt.prompt_id, n, k, n)
    return {"ave@k": c / n, "pass@1": c / n, "pass@k": pass_at_k(n, c, min(k, n))}


def format_results(results: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`evaluate`'s results, one row per dataset plus the weighted average."""
    k = results["k"]
    header = ("dataset", "prompts", f"Ave@{k}", "pass@1", f"pass@{k}")
    rows = [(name, str(row["num_prompts"]), *(f"{100 * row[m]:.2f}" for m in METRICS))
            for name, row in results["datasets"].items()]
    average = results["average"]
    rows.append(("average (by prompts)", str(average["num_prompts"]), *(f"{100 * average[m]:.2f}" for m in METRICS)))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)])
