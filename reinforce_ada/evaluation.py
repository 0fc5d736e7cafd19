"""Evaluation: sample ``k`` completions per prompt, score them, report Ave@k, pass@1 and pass@k per dataset.

For a prompt with ``n`` scored samples of which ``c`` are correct (reward above ``threshold``):

* **Ave@k** is the accuracy ``c / n`` averaged over prompts -- the metric of the Reinforce-Ada paper (Ave@32).
* **pass@k** is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on Code",
  eq. 1): ``1 - C(n - c, k) / C(n, k)``, averaged over prompts. It is computed in the product form
  ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)``, which never forms the huge binomials.
* **pass@1** from the same samples is ``c / n`` again, so it equals Ave@k by construction; both are reported because
  papers name it either way.
* **the pass@k curve** is pass@k for k = 1, 2, 4, ... up to the samples drawn (and the samples drawn themselves),
  each from the same ``n`` samples by the same estimator (:func:`pass_at_k_curve`).
* **entropy**, when :func:`evaluate` is given a way to measure it: the mean over the sampled completion tokens of the
  entropy of the policy's next-token distribution there (at the sampling temperature).

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
from typing import Any, Callable, Mapping, Sequence

from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import sample_and_score, validate_prompts
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

__all__ = ["SampledAccuracy", "evaluate", "format_results", "pass_at_k", "pass_at_k_curve", "pass_at_k_ks",
           "sampled_accuracy"]

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


def pass_at_k_ks(num_samples: int) -> list[int]:
    """The k of a pass@k curve from ``num_samples`` samples per prompt: 1, 2, 4, ... below it, and itself.

    >>> pass_at_k_ks(16), pass_at_k_ks(6), pass_at_k_ks(1)
    ([1, 2, 4, 8, 16], [1, 2, 4, 6], [1])
    """
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"pass_at_k_ks: need a positive number of samples, got {num_samples!r}")
    ks = [1 << i for i in range(num_samples.bit_length()) if 1 << i < num_samples]
    return ks + [num_samples]


def pass_at_k_curve(counts: Sequence[tuple[int, int]], ks: Sequence[int] | None = None) -> dict[int, float]:
    """pass@k averaged over prompts, for each k of ``ks`` (default :func:`pass_at_k_ks` of the fewest samples any
    prompt got), from each prompt's ``(samples, correct)``; a prompt with fewer than k samples counts at pass@samples,
    one with none at 0.

    >>> pass_at_k_curve([(4, 1), (4, 0)])  # prompt 1: 1/4, 1 - C(3,2)/C(4,2) = 1/2, 1; prompt 2: 0
    {1: 0.125, 2: 0.25, 4: 0.5}
    """
    if not counts:
        return {}
    if ks is None:
        fewest = min(n for n, _ in counts)
        ks = pass_at_k_ks(fewest) if fewest else [1]
    return {k: sum(pass_at_k(n, c, min(k, n)) if n else 0.0 for n, c in counts) / len(counts) for k in ks}


@dataclass
class SampledAccuracy:
    """Counts of one :func:`sampled_accuracy`: samples scored, correct ones, and verifier failures among them."""

    num_samples: int = 0
    num_correct: int = 0
    num_verifier_failures: int = 0
    outputs: list[list[Completion]] = field(default_factory=list, repr=False, compare=False)
    """The completions, one list per prompt (the trainer checks their log-probabilities against its weights)."""
    counts: list[tuple[int, int]] = field(default_factory=list, repr=False, compare=False)
    """Per prompt, in order: ``(samples scored, correct)`` (the strata's accuracies and the pass@k curve)."""

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
    counts = [(len(mine), sum(1 for r in mine if r is not None and r > threshold)) for mine in rewards]
    return SampledAccuracy(sum(n for n, _ in counts), sum(c for _, c in counts),
                           sum(r is None for mine in rewards for r in mine), outputs, counts)


EntropyMeter = Callable[[Sequence[Prompt], Sequence[Sequence[Completion]]], tuple[float, int]]
"""Given prompts and their completions: ``(sum of the token entropies over the completion tokens, number of
tokens)`` (:func:`reinforce_ada.training.update.token_entropy` measures it with a model)."""


def evaluate(generator: Generator, verifier: Verifier | Mapping[str, Verifier], datasets: Mapping[str, Sequence[Prompt]],
             k: int, *, out_jsonl: str | Path | None = None, batch_size: int = 64, threshold: float = 0.5,
             progress: bool = True, groups: Mapping[str, Callable[[Prompt], str | None]] | None = None,
             entropy: EntropyMeter | None = None) -> dict[str, Any]:
    """Ave@k, pass@1 and pass@k per dataset and overall (weighted by number of prompts), the pass@k curve per
    dataset, and optionally Ave@k per group of prompts (e.g. difficulty strata) and the mean token entropy.

    Args:
        generator: asked for ``k`` completions of each prompt, ``batch_size`` prompts per call.
        verifier: one verifier for every dataset, or a mapping from dataset name to its verifier.
        datasets: dataset name -> prompts (ids unique within a dataset).
        k: samples per prompt.
        out_jsonl: when set, every generation is written there, one JSON object per line.
        threshold: a completion is correct when its reward is above this.
        progress: show a tqdm bar over prompt batches (on a terminal only).
        groups: dataset name -> a function naming each prompt's group (``None``: in none); that dataset's row then
            gets ``"groups": {group: {"num_prompts", "ave@k"}}``, in the order the groups are first met.
        entropy: measures the completions' token entropy, batch by batch; each row then gets ``"entropy"`` (mean
            over all completion tokens of the dataset) and ``"num_tokens"``.

    Returns:
        ``{"k": k, "datasets": {name: {"num_prompts", "num_samples", "num_verifier_failures", "ave@k", "pass@1",
        "pass@k", "pass_curve": {"1": ..., "2": ..., ..., "<k>": ...}}}, "average": {"num_prompts", "ave@k", "pass@1",
        "pass@k"}}`` (the curve's keys are strings, as JSON has them).
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

    from reinforce_ada.progress import progress_bar

    sink = open(out_jsonl, "w", encoding="utf-8") if out_jsonl is not None else None
    results: dict[str, Any] = {"k": k, "datasets": {}, "average": {}}
    try:
        for name, prompts in checked.items():
            sums = dict.fromkeys(METRICS, 0.0)
            num_samples = num_failures = 0
            counts: list[tuple[int, int]] = []
            entropy_sum, num_tokens = 0.0, 0
            starts = range(0, len(prompts), batch_size)
            for start in progress_bar(iterable=starts, desc=f"eval {name}", unit="batch",
                                      disable=None if progress else True):
                batch = prompts[start:start + batch_size]
                outputs, rewards = sample_and_score(generator, verifiers[name],
                                                    [GenerationRequest(p, k) for p in batch])
                if entropy is not None:
                    batch_sum, batch_tokens = entropy(batch, outputs)
                    entropy_sum, num_tokens = entropy_sum + batch_sum, num_tokens + batch_tokens
                for prompt, completions, prompt_rewards in zip(batch, outputs, rewards):
                    correct = [r is not None and r > threshold for r in prompt_rewards]
                    counts.append((len(correct), sum(correct)))
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
            row["pass_curve"] = {str(i): value for i, value in pass_at_k_curve(counts, pass_at_k_ks(k)).items()}
            if groups is not None and name in groups:
                row["groups"] = _by_group([groups[name](p) for p in prompts], counts)
            if entropy is not None:
                row["entropy"] = entropy_sum / num_tokens if num_tokens else None
                row["num_tokens"] = num_tokens
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


def _by_group(names: Sequence[str | None], counts: Sequence[tuple[int, int]]) -> dict[str, dict[str, Any]]:
    """Ave@k per group: the mean over the group's prompts of their share of correct samples."""
    out: dict[str, dict[str, Any]] = {}
    for name, (n, c) in zip(names, counts):
        if name is not None:
            cell = out.setdefault(name, {"num_prompts": 0, "sum": 0.0})
            cell["num_prompts"] += 1
            cell["sum"] += c / n if n else 0.0
    return {name: {"num_prompts": cell["num_prompts"], "ave@k": cell["sum"] / cell["num_prompts"]}
            for name, cell in out.items()}


def _prompt_metrics(prompt: Prompt, n: int, c: int, k: int) -> dict[str, float]:
    if n == 0:
        logger.warning("prompt %r got no completion; it counts as wrong", prompt.prompt_id)
        return dict.fromkeys(METRICS, 0.0)
    if n < k:
        logger.warning("prompt %r got %d completions for k=%d; its pass@k is pass@%d", prompt.prompt_id, n, k, n)
    return {"ave@k": c / n, "pass@1": c / n, "pass@k": pass_at_k(n, c, min(k, n))}


def format_results(results: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`evaluate`'s results, one row per dataset plus the weighted average; then per
    dataset its pass@k curve, its Ave@k by group (stratum) and its mean token entropy, when the results hold them."""
    k = results["k"]
    header = ("dataset", "prompts", f"Ave@{k}", "pass@1", f"pass@{k}")
    rows = [(name, str(row["num_prompts"]), *(f"{100 * row[m]:.2f}" for m in METRICS))
            for name, row in results["datasets"].items()]
    average = results["average"]
    rows.append(("average (by prompts)", str(average["num_prompts"]), *(f"{100 * average[m]:.2f}" for m in METRICS)))
    lines = _table(header, rows)
    for name, row in results["datasets"].items():
        curve = row.get("pass_curve")
        if curve:
            lines += ["", f"pass@k of {name} (unbiased estimator, from the {k} samples per prompt):",
                      *_table(("k", *curve), [("pass@k", *(f"{100 * v:.2f}" for v in curve.values()))])]
        if row.get("groups"):
            lines += ["", f"Ave@{k} of {name} by stratum:",
                      *_table(("stratum", "prompts", f"Ave@{k}"),
                              [(group, str(cell["num_prompts"]),
                                f"{100 * cell['ave@k']:.2f}" if cell["ave@k"] is not None else "- (no prompt)")
                               for group, cell in row["groups"].items()])]
        if row.get("entropy") is not None:
            lines += ["", f"mean token entropy of {name}'s samples: {row['entropy']:.4f} nats over "
                          f"{row['num_tokens']:,} completion tokens"]
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]
