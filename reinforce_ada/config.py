"""Typed configuration. Every field is documented; cross-field checks run in ``__post_init__`` so bad values fail
before any model is loaded or any completion generated, with a message naming the field."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

from reinforce_ada.core.advantages import ADVANTAGES
from reinforce_ada.core.allocation import ALLOCATION_RULES
from reinforce_ada.core.exits import EXIT_RULES
from reinforce_ada.core.selection import SELECTION_RULES


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


def _check_choice(field_name: str, value: Any, choices: list[str]) -> None:
    if not callable(value) and value not in choices:
        raise ConfigError(f"{field_name}={value!r} is not one of {choices} (or a callable)")


@dataclass
class SamplerConfig:
    """How completions are drawn, when prompts exit, and how groups and advantages are formed.

    Defaults are the paper's Reinforce-Ada-balance setup (arXiv 2510.04996): M=8, N=4, n=4.
    """

    samples_per_round: int = 8
    """M: completions drawn per still-active prompt in each round."""
    max_rounds: int = 4
    """N: the most rounds a prompt is sampled for; a prompt never gets more than M * N completions per step."""
    group_size: int = 4
    """n: completions kept per prompt for training (TRL's ``num_generations``, verl's ``rollout.n``)."""
    exit_rule: str | Callable[[int, int, int], bool] = "balanced"
    """When a prompt stops being sampled: ``"balanced"``, ``"positive"``, ``"once"`` (GRPO) or a callable
    ``(num_positive, num_negative, group_size) -> bool``."""
    min_positive: int = 1
    """k for the ``"positive"`` exit rule: exit after this many positives."""
    positive_threshold: float = 0.5
    """A completion is positive when ``reward > positive_threshold``. The reference code used 0.7; with 0/1 rewards
    any value in [0, 1) gives the same classes."""
    selection: str | Callable = "balanced"
    """How a pool is downsampled to ``group_size``: ``"balanced"``, ``"positive_focused"``, ``"random"`` or a
    callable ``(is_positive, group_size, rng) -> indices``."""
    unexited: str = "keep"
    """Prompts that never met the exit rule within ``max_rounds``: ``"keep"`` a group selected from their pool
    (the reference behaviour; usually zero-variance) or ``"drop"`` them. Either way the count is reported."""
    advantage: str | Callable = "pool"
    """Baseline: ``"pool"`` (Reinforce-Ada: mean over every completion drawn for the prompt) or ``"group"``
    (GRPO: mean over the kept group)."""
    normalize_std: bool = False
    """Divide advantages by (std + epsilon) of the same pool or group (GRPO's normalisation)."""
    epsilon: float = 1e-6
    """Added once to the std in the denominator."""
    importance_weights: bool = False
    """Return per-completion weights that undo the class re-balancing of downsampling, so the group estimate has
    the whole pool's expectation (see :func:`reinforce_ada.core.advantages.pool_importance_weights`)."""
    allocation: str | Callable = "fixed"
    """How many completions an active prompt gets next round (``"fixed"``: M)."""
    on_verifier_failure: str = "zero"
    """A completion whose verifier returned None or raised: ``"zero"`` scores it 0 (and counts it), ``"drop"``
    removes it from the pool (and counts it). Neither loses the prompt."""
    generation_retries: int = 2
    """Times a failed generator call is retried before the step ends early with the work already done."""
    seed: int = 0
    """Seed for the random choices of selection."""

    def __post_init__(self) -> None:
        for name in ("samples_per_round", "max_rounds", "group_size", "min_positive"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
        if self.group_size < 2:
            raise ConfigError(
                f"group_size must be >= 2 (got {self.group_size}): a group of one has no baseline and no signal"
            )
        if self.group_size > self.max_samples:
            raise ConfigError(
                f"group_size={self.group_size} exceeds samples_per_round * max_rounds = {self.max_samples}: "
                "no prompt could ever fill its group"
            )
        if not math.isfinite(self.positive_threshold):
            raise ConfigError(f"positive_threshold must be finite (got {self.positive_threshold})")
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number >= 0 (got {self.epsilon})")
        if self.generation_retries < 0:
            raise ConfigError(f"generation_retries must be >= 0 (got {self.generation_retries})")
        _check_choice("exit_rule", self.exit_rule, EXIT_RULES.names())
        _check_choice("selection", self.selection, SELECTION_RULES.names())
        _check_choice("advantage", self.advantage, ADVANTAGES.names())
        _check_choice("allocation", self.allocation, ALLOCATION_RULES.names())
        _check_choice("unexited", self.unexited, ["keep", "drop"])
        _check_choice("on_verifier_failure", self.on_verifier_failure, ["zero", "drop"])
        if callable(self.unexited) or callable(self.on_verifier_failure):
            raise ConfigError("unexited and on_verifier_failure take a name, not a callable")

    @property
    def max_samples(self) -> int:
        """The per-prompt budget of one step, M * N."""
        return self.samples_per_round * self.max_rounds

    @classmethod
    def grpo(cls, group_size: int = 4, **overrides: Any) -> "SamplerConfig":
        """Plain GRPO through the same sampler: one round of ``group_size`` samples, group-local baseline."""
        params = dict(samples_per_round=group_size, max_rounds=1, group_size=group_size, exit_rule="once",
                      selection="random", advantage="group")
        params.update(overrides)
        return cls(**params)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (getattr(self, f.name) if not callable(getattr(self, f.name)) else repr(getattr(self, f.name)))
                for f in fields(self)}


@dataclass
class DynamicSamplingConfig:
    """DAPO-style dynamic sampling (Yu et al., 2025): draw fresh prompts, ``group_size`` samples each, and keep only
    groups with non-zero reward variance until ``batch_size`` groups are collected."""

    batch_size: int = 512
    """B: groups with signal to collect."""
    group_size: int = 4
    """n: completions per prompt."""
    generation_batch_size: int | None = None
    """Prompts drawn per generation call (defaults to ``batch_size``)."""
    max_generation_batches: int = 8
    """Give up after this many generation calls and return the groups collected so far (verl's
    ``max_num_gen_batches``)."""
    positive_threshold: float = 0.5
    """As in :class:`SamplerConfig`."""
    normalize_std: bool = False
    """Divide advantages by the group std (+ epsilon)."""
    epsilon: float = 1e-6
    on_verifier_failure: str = "zero"
    generation_retries: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "group_size", "max_generation_batches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
        if self.group_size < 2:
            raise ConfigError(f"group_size must be >= 2 (got {self.group_size})")
        if self.generation_batch_size is None:
            self.generation_batch_size = self.batch_size
        elif self.generation_batch_size <= 0:
            raise ConfigError(f"generation_batch_size must be positive (got {self.generation_batch_size})")
        _check_choice("on_verifier_failure", self.on_verifier_failure, ["zero", "drop"])

    def round_config(self) -> SamplerConfig:
        """The single GRPO round this strategy runs on each generation batch."""
        return SamplerConfig.grpo(
            self.group_size, positive_threshold=self.positive_threshold, normalize_std=self.normalize_std,
            epsilon=self.epsilon, on_verifier_failure=self.on_verifier_failure,
            generation_retries=self.generation_retries, seed=self.seed,
        )
