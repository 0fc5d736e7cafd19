"""Selection apart from reporting: which held-out prompts choose a strategy's learning rate and which judge it.

Choosing each strategy's best lr by its held-out accuracy and then reporting that same accuracy favours whichever
lr was luckiest on those prompts; where the lrs nearly tie, the choice alone moves the reported difference by as
much as the difference. With ``selection="split"`` a comparison splits every seed's held-out prompts in two halves
fixed by the seed: the **selection** half chooses the lrs (the baseline's and every other strategy's, by the best-lr
rule), the **report** half gives every number the report states at those lrs. With ``"same"`` (today's rule before
this split existed, and the only sensible one for a one-lr grid, where nothing is selected) every held-out prompt does
both.

**The split** (:func:`split_keys`): each prompt's content hash (:func:`reinforce_ada.sampling.memory.prompt_key`)
hashed again with the seed, sorted; the first half (rounded down) selects, the rest reports. Every run of a seed
evaluates the same held-out prompts (the digest of the strata checks it), so they share the split.

**A run restricted to one half** (:func:`restrict`): its held-out accuracy at each evaluation is the share of correct
samples among that half's prompts, its accuracy and prompt count per difficulty stratum and its pass@k recomputed on
them, all from the per-prompt results each evaluation logs (the run folder's ``held_out.jsonl``). The token entropy
is a mean over every sampled token and is not logged per prompt: it stays the whole held-out set's.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from reinforce_ada.difficulty import stratum_metrics
from reinforce_ada.evaluation import pass_at_k_curve

__all__ = ["SELECTION_RULES", "restrict", "split_keys"]

SELECTION_RULES = ("split", "same")
"""``split``: choose on one half of the held-out prompts, report on the other; ``same``: every prompt does both."""
_ACCURACY = 3  # the history column restrict() rewrites


def split_keys(seed: int, keys: Sequence[str]) -> tuple[set[str], set[str]]:
    """``(selection, report)``: the held-out prompts (by content hash) that choose the lr and those that judge it,
    halves fixed by ``seed`` (see the module docstring).

    >>> chose, judged = split_keys(0, [f"k{i}" for i in range(5)])
    >>> len(chose), len(judged), chose & judged
    (2, 3, set())
    """
    ranked = sorted(dict.fromkeys(keys), key=lambda key: hashlib.sha256(f"{seed}:{key}".encode()).hexdigest())
    half = len(ranked) // 2
    return set(ranked[:half]), set(ranked[half:])


def restrict(run: dict[str, Any], keep: set[str]) -> dict[str, Any]:
    """``run`` (:func:`~reinforce_ada.research.compare.runs.read_run`'s dict) as if only the held-out prompts in
    ``keep`` had been evaluated: accuracy, accuracy and prompts per stratum, and pass@k recomputed from its per-prompt
    results at every evaluation (the module docstring); raises ValueError for a run without them."""
    per_prompt = run.get("per_prompt")
    if not per_prompt or any(row is None for row in per_prompt["counts"]):
        raise ValueError("a run without per-prompt held-out results (held_out.jsonl) cannot be split")
    keys, strata = per_prompt["keys"], per_prompt["strata"]
    mine = [i for i, key in enumerate(keys) if key in keep]
    history, evals = [], {name: list(values) for name, values in run["evals"].items()}
    ks = [int(name.removeprefix("eval/pass@")) for name in evals if name.startswith("eval/pass@")]
    for row_index, (row, counts) in enumerate(zip(run["history"], per_prompt["counts"])):
        kept = [tuple(counts[i]) for i in mine]
        samples = sum(n for n, _ in kept)
        history.append([*row[:_ACCURACY], sum(c for _, c in kept) / samples if samples else 0.0])
        if strata is not None:
            for name, value in stratum_metrics([strata[i] for i in mine], kept).items():
                evals.setdefault(name, [None] * len(run["history"]))[row_index] = value
            # a stratum with no prompt in this half has no accuracy (not the whole set's)
            for name in [n for n in evals if n.startswith("eval/accuracy/")]:
                count = evals.get(f"eval/num_prompts/{name.removeprefix('eval/accuracy/')}")
                if count is not None and not count[row_index]:
                    evals[name][row_index] = None
        logged = [k for k in ks if evals[f"eval/pass@{k}"][row_index] is not None]
        for k, value in pass_at_k_curve(kept, logged).items() if logged and kept else ():
            evals[f"eval/pass@{k}"][row_index] = value
    strata_brief = run["strata"]
    if strata_brief is not None and strata is not None:
        counts = {name: sum(1 for i in mine if strata[i] == name) for name in strata_brief["counts"]}
        strata_brief = {**strata_brief, "counts": counts}
    return {**run, "history": history, "evals": evals, "strata": strata_brief}
