"""The strategy table of the learning benchmark (``benchmarks/learning.py``): every strategy it can run, by name,
as the ``train`` settings that make it, by dotted name: ``reinforce-ada compare``'s named strategies
(:data:`reinforce_ada.research.compare.strategies.STRATEGIES`) and the variants this benchmark explored.

The paper's three (GRPO, Ada-positive, Ada-balanced) come first; the rest go beyond the paper
(docs/beyond_the_paper.md) and each carries a comment saying what it tries. A new strategy is one row here.
"""

from __future__ import annotations

from reinforce_ada.research.compare.strategies import STRATEGIES as COMPARE_STRATEGIES
from reinforce_ada.research.compare.strategies import STREAM_ONE_AT_A_TIME

PAPER_STRATEGIES = ("grpo", "ada-positive", "ada-balanced")


def _stream(strategy: str, max_rounds: int, **settings) -> dict:
    return {"strategy": strategy, **STREAM_ONE_AT_A_TIME, "sampler.max_rounds": max_rounds, **settings}


def _budget(**sampler) -> dict:
    return {"strategy": "ada-budget", **{f"sampler.{k}": v for k, v in sampler.items()}}


STRATEGIES: dict[str, dict] = {  # name -> train settings by dotted name
    **COMPARE_STRATEGIES,  # grpo, grpo-n8, the ada-* strategies, stream-balanced/-positive/-mixed
    # beyond the paper (docs/beyond_the_paper.md)
    # the same with at most 8 samples per prompt (2x GRPO's): hopeless prompts cost 8, not 32
    "stream-mixed-cap8": _stream("ada-mixed", 8),
    "stream-mixed-cap6": _stream("ada-mixed", 6),
    # budget mode (branch budget): GRPO's samples per step (or --budget), spread by predicted value, mixed exit rule
    "ada-budget-probe2": _budget(budget_probe=2),  # 2 samples first, re-planned once scored
    "ada-budget-2x": _budget(sample_budget_per_step="2x"),  # twice GRPO's samples per step
    # a 2-sample probe that already holds both classes stops there, as a short group with signal
    "ada-budget-probe2-min2": _budget(budget_probe=2, budget_min_group=2),
    # over-draw: k x --batch-size candidate prompts per step, GRPO's samples for --batch-size of them, given to the
    # candidates the cross-step memory rates most likely to give signal (needs a recurring set: --train-prompts)
    "ada-budget-od1.5": _budget(budget_overdraw=1.5),
    "ada-budget-od2": _budget(budget_overdraw=2.0),
    "ada-budget-od3": _budget(budget_overdraw=3.0),
    "ada-budget-od2-probe2": _budget(budget_overdraw=2.0, budget_probe=2),
    "ada-budget-od2-mg2": _budget(budget_overdraw=2.0, budget_probe=2, budget_min_group=2),
    "ada-budget-od2-hl8": _budget(budget_overdraw=2.0, budget_half_life=8.0),  # slower forgetting
    "ada-budget-od3-hl8": _budget(budget_overdraw=3.0, budget_half_life=8.0),
    "ada-budget-od2-hlinf": _budget(budget_overdraw=2.0, budget_half_life=None),  # never forgets
    # train on the whole pool (selection="all"): every generated sample gets a gradient, as in GRPO, instead of n of
    # the pool (docs/benchmarks.md, "Training on the whole pool")
    "stream-mixed-all": _stream("ada-mixed", 32, **{"sampler.selection": "all"}),
    "stream-mixed-cap8-all": _stream("ada-mixed", 8, **{"sampler.selection": "all"}),
    "stream-mixed-cap6-all": _stream("ada-mixed", 6, **{"sampler.selection": "all"}),
    "ada-mixed-all": {"strategy": "ada-mixed", "sampler.selection": "all"},
    "ada-balanced-all": {"strategy": "ada-balanced", "sampler.selection": "all"},
    # price of signal: skip what the memory rates below r signal groups per sample and leave its samples unspent
    # (GRESO's skipping), so a step costs fewer tokens and GRPO's token budget buys more steps; run with more
    # --steps than GRPO (needs a recurring set: --train-prompts)
    "ada-budget-price0.08": _budget(budget_min_signal_rate=0.08),
    "ada-budget-price0.10": _budget(budget_min_signal_rate=0.10),
    "ada-budget-price0.11": _budget(budget_min_signal_rate=0.11),
    "ada-budget-price0.12": _budget(budget_min_signal_rate=0.12),
    "ada-budget-price0.10-hl8": _budget(budget_min_signal_rate=0.10, budget_half_life=8.0),
    "ada-budget-price0.12-hl8": _budget(budget_min_signal_rate=0.12, budget_half_life=8.0),
    # higher prices: 0.08-0.12 skipped nothing on addition (the memory rates every prompt there at 0.18-0.21)
    "ada-budget-price0.13": _budget(budget_min_signal_rate=0.13),
    "ada-budget-price0.14": _budget(budget_min_signal_rate=0.14),
    "ada-budget-price0.14-hl8": _budget(budget_min_signal_rate=0.14, budget_half_life=8.0),
    # the mixed rule sampled one at a time without a round barrier, with the price of signal and memory
    "stream-mixed-priced": _stream("ada-mixed", 32, **{"sampler.streaming.min_signal_rate": 0.015,
                                                       "sampler.streaming.budget": 128,
                                                       "sampler.memory.enabled": True, "sampler.memory.half_life": 8.0}),
}
GROUP_SIZE = 4
"""n: every strategy here keeps groups of 4 (TrainConfig's default), GRPO draws exactly that per prompt."""
