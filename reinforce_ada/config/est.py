"""The ``est`` section of :class:`~reinforce_ada.config.SamplerConfig`: the settings of Reinforce-Ada-Est
(``mode="est"``, strategy ``ada-est``; arXiv 2510.04996v3, Algorithm 1).

Est keeps a per-prompt pass-rate estimate across visits (the library's one
:class:`~reinforce_ada.sampling.memory.PassRateMemory`, decayed per visit by ``decay``), gives each prompt of a step a
sample count proportional to the objective's sample weight at its estimate (``1 / sqrt(p_hat)`` under the log
objective with ``sample_share = 1/2``), clipped to ``[min_samples, max_samples]`` and summing to ``budget``, draws them
all in one generation call and trains on every sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reinforce_ada.config.checks import _check_choice, _check_types
from reinforce_ada.errors import ConfigError

__all__ = ["EST_ALLOCATIONS", "EstConfig"]

EST_ALLOCATIONS = ("objective", "variance-optimal")
"""How Est turns an estimated pass rate into a share of the budget (see :attr:`EstConfig.allocation`)."""


@dataclass
class EstConfig:
    """Reinforce-Ada-Est's settings (``sampler.mode="est"``; ignored by the other samplers, and refused there when
    changed from their defaults)."""

    min_samples: int = 2
    """N_min, the fewest samples a prompt gets in a step. At least 1; with 1 a prompt cannot show signal."""
    max_samples: int | None = 32
    """N_max, the most samples a prompt gets in a step. None: no cap but the budget."""
    samples_per_prompt: int = 8
    """The budget per prompt. A step of B prompts draws ``N_total = samples_per_prompt x B`` samples in all (8:
    GRPO-n8's budget, the comparison the paper makes; 16 matches GRPO-n16)."""
    budget: int | None = None
    """N_total per step, given directly. Samples per step over all of the step's prompts, whatever their number (None:
    ``samples_per_prompt x prompts``; give one or the other). The allocation spends it exactly whenever
    ``prompts x min_samples <= N_total <= prompts x max_samples``; outside that range the run is refused before any
    generation."""
    decay: float = 0.9
    """lam, the memory's decay per visit. On each visit of a prompt its remembered counts are multiplied by ``decay``
    in (0, 1] before the visit's are added (the paper's Ada-EMA: ``N_tot <- lam N_tot + n_t``,
    ``N_pos <- lam N_pos + k_t``). 1: never forgets."""
    prior_alpha: float = 1.0
    """alpha of the Beta prior. ``p_hat = (N_pos + alpha) / (N_tot + alpha + beta)``; > 0."""
    prior_beta: float = 1.0
    """beta of the Beta prior (> 0). With alpha = beta = 1 an unseen prompt's estimate is 1/2 and a first step spends
    the budget evenly (GRPO-n8's allocation); the upstream ``hanze`` branch used Beta(1, 16)."""
    allocation: str = "objective"
    """How Est sizes each prompt's share: "objective" or "variance-optimal". ``"objective"``: samples proportional to
    the objective's sample weight ``w(p_hat)^sample_share`` (Alg. 1); ``"variance-optimal"``: Appendix B's rule under
    the log objective, samples proportional to ``sqrt((1 - p_hat) / p_hat)`` and advantages ``(r - rbar) / sqrt(rbar (1
    - rbar))`` (GRPO's std normalisation for 0/1 rewards, Remark 1); ``sample_share`` is not used then."""

    def __post_init__(self) -> None:
        _check_types(self, prefix="est.")
        for name in ("min_samples", "max_samples", "samples_per_prompt", "budget"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"est.{name} must be a positive integer (got {value})")
        if self.max_samples is not None and self.max_samples < self.min_samples:
            raise ConfigError(f"est.max_samples={self.max_samples} is below est.min_samples={self.min_samples}")
        if self.budget is not None and self.samples_per_prompt != 8:
            raise ConfigError(f"give est.budget ({self.budget} per step) or est.samples_per_prompt "
                              f"({self.samples_per_prompt} per prompt), not both")
        if not 0.0 < self.decay <= 1.0:
            raise ConfigError(f"est.decay must be in (0, 1] (got {self.decay})")
        for name in ("prior_alpha", "prior_beta"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ConfigError(f"est.{name} must be a positive number (got {getattr(self, name)})")
        _check_choice("est.allocation", self.allocation, list(EST_ALLOCATIONS))

    def step_budget(self, num_prompts: int) -> int:
        """N_total for a step of ``num_prompts`` prompts; a ConfigError when it cannot be spent exactly within the
        clip bounds.

        >>> EstConfig().step_budget(32)
        256
        """
        budget = self.samples_per_prompt * num_prompts if self.budget is None else self.budget
        low = num_prompts * self.min_samples
        high = None if self.max_samples is None else num_prompts * self.max_samples
        given = ("est.budget" if self.budget is not None
                 else f"the budget (est.samples_per_prompt {self.samples_per_prompt} x {num_prompts} prompts)")
        if budget < low:
            raise ConfigError(f"{given} = {budget} is below {num_prompts} prompts x est.min_samples="
                              f"{self.min_samples} = {low}")
        if high is not None and budget > high:
            raise ConfigError(f"{given} = {budget} is above {num_prompts} prompts x est.max_samples="
                              f"{self.max_samples} = {high}")
        return budget
