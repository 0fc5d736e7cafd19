"""The trainer's sampling strategies as one table of :class:`~reinforce_ada.config.SamplerConfig` settings, applied
by one rule (:func:`strategy_sampler_values`), and the old flat spellings of the sampler's settings."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from reinforce_ada.config.sampler import BUDGET_ONLY_SETTINGS, EST_COMPANIONS, SamplerConfig
from reinforce_ada.errors import ConfigError

__all__ = ["GROUP_SIZE", "STRATEGIES", "STRATEGY_SAMPLER_SETTINGS", "check_strategy_sampler", "strategies_text",
           "strategy_sampler_values"]

GROUP_SIZE = "<group_size>"
"""A table value meaning "the sampler's ``group_size``" (GRPO draws one round of n)."""

_ONE_GRPO_ROUND: dict[str, Any] = dict(samples_per_round=GROUP_SIZE, max_rounds=1, exit_rule="once",
                                       selection="random", advantage="group")

STRATEGY_SAMPLER_SETTINGS: dict[str, dict[str, Any]] = {
    "ada-balanced": dict(exit_rule="balanced"),
    "ada-positive": dict(exit_rule="positive"),
    "ada-mixed": dict(exit_rule="mixed"),
    "ada-budget": dict(exit_rule="mixed", allocation="budget"),
    "ada-est": dict(mode="est", **EST_COMPANIONS),
    "grpo": _ONE_GRPO_ROUND,
    "dapo": _ONE_GRPO_ROUND,  # each generation batch is one GRPO round (DynamicSamplingConfig.round_config)
}
"""What each trainer ``strategy`` sets in the sampler tree; every other sampler field is the user's.

``ada-<rule>`` is Reinforce-Ada with that exit rule (``mixed``: exit once the pool has one positive and one negative,
see docs/beyond_the_paper.md). ``ada-budget`` is budget mode: a fixed number of samples per step
(``sample_budget_per_step``, default GRPO's ``group_size x batch_size``) allocated over the batch's prompts by a
cross-step pass-rate memory, in rounds. ``ada-est`` is Reinforce-Ada-Est (arXiv 2510.04996v3 Alg. 1): per step one
generation call, each prompt's samples proportional to ``1 / sqrt(p_hat)`` from a per-visit-decayed pass-rate
memory (``sampler.est``; default budget 8 x prompts, GRPO-n8's), every sample trained on with advantages
``(r - rbar) / sqrt(rbar)`` (``sampler.objective``, ``sampler.sample_share``). ``grpo`` is one round of n with a
group-local baseline; ``dapo`` repeats
that round on fresh prompts, keeping groups with signal (:class:`~reinforce_ada.config.DynamicSamplingConfig`).
A field the strategy sets may be given only with the strategy's value (anything else is a ConfigError naming both).
"""

STRATEGIES = tuple(STRATEGY_SAMPLER_SETTINGS)
"""The trainer's sampling strategies (the keys of :data:`STRATEGY_SAMPLER_SETTINGS`)."""


def strategies_text() -> str:
    """:data:`STRATEGY_SAMPLER_SETTINGS` in words, for the command line's help: each strategy and what it sets in
    ``sampler`` (strategies that set the same, together).

    >>> strategies_text().split("; ")[0]
    'ada-balanced (exit_rule=balanced)'
    """
    def value(item: Any) -> str:
        return "group_size" if item == GROUP_SIZE else str(item)

    alike: dict[str, list[str]] = {}
    for name, settings in STRATEGY_SAMPLER_SETTINGS.items():
        alike.setdefault(", ".join(f"{key}={value(item)}" for key, item in settings.items()), []).append(name)
    return "; ".join(f"{' and '.join(names)} ({sets})" for sets, names in alike.items())


def given_sampler_values(sampler: SamplerConfig | dict[str, Any]) -> dict[str, Any]:
    """The fields given: a mapping as it is; for a built :class:`SamplerConfig`, the fields that differ from their
    defaults (a default value given explicitly cannot be told apart; give a mapping to have it checked)."""
    if isinstance(sampler, dict):
        return dict(sampler)
    given = {}
    for f in fields(SamplerConfig):
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        if getattr(sampler, f.name) != default:
            given[f.name] = getattr(sampler, f.name)
    return given


def strategy_sampler_values(strategy: str, seed: int, sampler: SamplerConfig | dict[str, Any]) -> dict[str, Any]:
    """The :class:`SamplerConfig` keyword arguments of the trainer's ``sampler`` under ``strategy``: what was given,
    plus the strategy's settings (:data:`STRATEGY_SAMPLER_SETTINGS`) and the trainer's ``seed``.

    >>> strategy_sampler_values("grpo", 3, {"group_size": 8})["samples_per_round"]
    8
    """
    values = given_sampler_values(sampler)
    if strategy != "ada-budget":
        for name, off in BUDGET_ONLY_SETTINGS.items():
            if name in values and values[name] != off:
                raise ConfigError(f"sampler.{name} is a setting of strategy='ada-budget' (got strategy={strategy!r})")
    group_size = values.get("group_size", SamplerConfig.__dataclass_fields__["group_size"].default)
    wanted_values = {name: group_size if value == GROUP_SIZE else value
                     for name, value in STRATEGY_SAMPLER_SETTINGS[strategy].items()}
    for name, wanted in {**wanted_values, "seed": seed}.items():
        if name in values and values[name] != wanted:
            owner = f"strategy={strategy!r}" if name != "seed" else "the trainer's seed"
            raise ConfigError(f"sampler.{name}={values[name]!r} contradicts {owner}, which sets "
                              f"sampler.{name}={wanted!r}" + (" (give seed instead)" if name == "seed" else ""))
        values[name] = wanted
    if strategy != "ada-est" and values.get("mode") == "est":
        raise ConfigError(f"sampler.mode='est' is strategy='ada-est' (got strategy={strategy!r})")
    if strategy != "ada-budget" and values.get("allocation") == "budget":
        raise ConfigError(f"sampler.allocation='budget' is strategy='ada-budget' (got strategy={strategy!r})")
    return values


def check_strategy_sampler(strategy: str, sampler: SamplerConfig, batch_size: int | None) -> None:
    """The trainer's sampler settings that only one strategy runs: ``dapo`` carries
    no objective weight (its rounds are plain GRPO's); ``ada-est``'s budget must be spendable for ``batch_size``
    prompts (checked now, before anything loads)."""
    if strategy == "dapo" and sampler.objective_in_use != "linear":
        raise ConfigError(f"sampler.objective={sampler.objective!r} is not applied by strategy='dapo' (its dynamic "
                          f"sampling trains plain GRPO groups); use it with grpo, ada-* or ada-est")
    if strategy == "ada-est" and batch_size is not None:
        sampler.est.step_budget(batch_size)
