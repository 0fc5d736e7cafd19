"""DAPO's dynamic sampling configuration (:class:`DynamicSamplingConfig`): fresh prompts a GRPO round at a time until a
batch of groups with signal is collected; its round is a :class:`~reinforce_ada.config.SamplerConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.config.checks import _check_types, check_positive_ints
from reinforce_ada.config.sampler import SamplerConfig
from reinforce_ada.errors import ConfigError

__all__ = ["DynamicSamplingConfig"]


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
        _check_types(self)
        check_positive_ints(self, ("batch_size", "group_size", "max_generation_batches"))
        if self.group_size < 2:
            raise ConfigError(f"group_size must be >= 2 (got {self.group_size})")
        if self.generation_batch_size is None:
            self.generation_batch_size = self.batch_size
        elif (not isinstance(self.generation_batch_size, int) or isinstance(self.generation_batch_size, bool)
              or self.generation_batch_size <= 0):
            raise ConfigError(f"generation_batch_size must be a positive integer (got {self.generation_batch_size!r})")
        self.round_config()  # checks positive_threshold, epsilon, on_verifier_failure, generation_retries

    def round_config(self) -> SamplerConfig:
        """The single GRPO round this strategy runs on each generation batch."""
        return SamplerConfig.grpo(
            self.group_size, positive_threshold=self.positive_threshold, normalize_std=self.normalize_std,
            epsilon=self.epsilon, on_verifier_failure=self.on_verifier_failure,
            generation_retries=self.generation_retries, seed=self.seed,
        )
