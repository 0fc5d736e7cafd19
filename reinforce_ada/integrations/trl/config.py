"""``AdaGRPOConfig``: TRL's ``GRPOConfig`` plus the Reinforce-Ada sampling fields.

Everything TRL configures keeps its meaning (loss type, clipping ``epsilon``/``epsilon_high``, ``beta``, vLLM modes,
batch sizes, logging). What changes:

* ``num_generations`` is the *final group size* n: every prompt is sampled in rounds of ``samples_per_round`` (M) for
  at most ``max_rounds`` (N) rounds, until its pool meets ``exit_rule``, and the pool is downsampled (``selection``) to
  exactly ``num_generations`` completions, which TRL trains on.
* The advantages TRL trains on come from our sampler, computed with the *whole pool's* statistics
  (``advantage="pool"``: ``A = r - mean(pool)``, divided by ``std(pool) + advantage_epsilon`` when
  ``normalize_std``), not from the kept group. TRL's ``scale_rewards`` therefore does not affect training (TRL still
  uses it for its own logged ``frac_reward_zero_std``); use ``normalize_std`` instead.

TRL needs exactly ``num_generations`` completions per prompt (fixed shapes), so the sampler is always run with
``unexited="keep"`` (a prompt that never met its exit rule still yields a group, selected from its ``M * N`` pool)
and ``on_verifier_failure="zero"`` (a completion every reward function returned ``None`` for scores 0); those two
choices are not configurable here. Each process must hold whole prompt groups, so
``per_device_train_batch_size * steps_per_generation`` must be a multiple of ``num_generations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from reinforce_ada.config import ConfigError, SamplerConfig


@dataclass
class AdaGRPOConfig(GRPOConfig):
    """``GRPOConfig`` + Reinforce-Ada (arXiv 2510.04996). ``num_generations`` is the group size n.

    The paper's setup: ``num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balanced",
    epsilon=0.2, epsilon_high=0.28, loss_type="dapo"`` (token-mean).
    """

    samples_per_round: int = field(
        default=8,
        metadata={"help": "M: completions drawn per still-active prompt in each sampling round."},
    )
    max_rounds: int = field(
        default=4,
        metadata={"help": "N: the most sampling rounds per prompt and step; a prompt gets at most M * N completions."},
    )
    exit_rule: str = field(
        default="balanced",
        metadata={"help": "When a prompt stops being sampled: 'balanced' (>= n/2 positives and >= n/2 negatives), "
                          "'positive' (>= min_positive positives), 'once' (GRPO), or a callable "
                          "(num_positive, num_negative, group_size) -> bool."},
    )
    min_positive: int = field(
        default=1,
        metadata={"help": "k for exit_rule='positive'."},
    )
    positive_threshold: float = field(
        default=0.5,
        metadata={"help": "A completion is positive when its (weighted-sum) reward > positive_threshold."},
    )
    selection: str = field(
        default="balanced",
        metadata={"help": "How a pool is downsampled to num_generations: 'balanced', 'positive_focused', 'random' "
                          "or a callable (is_positive, group_size, rng) -> indices."},
    )
    advantage: str = field(
        default="pool",
        metadata={"help": "Baseline of the advantages TRL trains on: 'pool' (Reinforce-Ada: statistics of every "
                          "completion drawn for the prompt) or 'group' (GRPO: the kept group)."},
    )
    normalize_std: bool = field(
        default=False,
        metadata={"help": "Divide advantages by std (+ advantage_epsilon) of the same pool (or group). Replaces "
                          "TRL's scale_rewards, which does not affect the trained advantages here."},
    )
    advantage_epsilon: float = field(
        default=1e-6,
        metadata={"help": "Added to the std in the denominator when normalize_std is on."},
    )
    importance_weights: bool = field(
        default=False,
        metadata={"help": "Multiply each advantage by the weight that undoes the class re-balancing of "
                          "downsampling (see reinforce_ada.core.advantages.pool_importance_weights). Weights are "
                          "positive, so for TRL's clipped losses this equals weighting each completion's loss."},
    )
    allocation: str = field(
        default="fixed",
        metadata={"help": "How many completions an active prompt gets next round ('fixed': M). 'budget': budget "
                          "mode -- sample_budget_per_step samples per generation batch, allocated over the prompts "
                          "by a cross-step pass-rate memory (exit_rule 'mixed' or 'balanced'). TRL needs a group "
                          "per prompt, so every prompt first gets its num_generations samples and only the budget "
                          "above that is allocated by value."},
    )
    budget_half_life: float | None = field(
        default=2.0,
        metadata={"help": "Budget mode: presentations of a prompt after which its remembered pass-rate evidence "
                          "counts half (None: never decays)."},
    )
    sample_budget_per_step: int | None = field(
        default=None,
        metadata={"help": "Budget mode (allocation='budget'): samples this process draws per generation batch, over "
                          "its prompts (None: num_generations x its prompts, what GRPO draws); at least that."},
    )
    sampler_seed: int | None = field(
        default=None,
        metadata={"help": "Seed of the sampler's selection RNG (default: seed); process i uses sampler_seed + i."},
    )
    rescore_kept: bool | None = field(
        default=None,
        metadata={"help": "Call the reward functions again on the kept completions, as plain GRPO would (True), or "
                          "give TRL the scores computed while sampling (False: each completion is scored once). "
                          "None: False unless a reward function takes log_extra or log_metric by name -- those "
                          "calls fill TRL's completions table and metrics, which only the re-scoring can line up."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ConfigError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} is not supported by AdaGRPOConfig: "
                "whole-pool advantages need one scalar reward per completion, the weighted sum of the reward "
                "functions ('sum_then_normalize')"
            )
        local_batch = self.per_device_train_batch_size * self.steps_per_generation
        if local_batch % self.num_generations != 0:
            raise ConfigError(
                f"per_device_train_batch_size * steps_per_generation = {self.per_device_train_batch_size} * "
                f"{self.steps_per_generation} = {local_batch} must be a multiple of num_generations="
                f"{self.num_generations}: each process samples whole prompts, so it must hold whole groups"
            )
        self.sampler_config()  # validates the sampling fields now, before any model is loaded
        if self.sample_budget_per_step is not None:
            minimum = local_batch  # num_generations x this process's prompts per generation batch
            if self.sample_budget_per_step < minimum:
                raise ConfigError(f"sample_budget_per_step={self.sample_budget_per_step} is below one group per "
                                  f"prompt: at least per_device_train_batch_size x steps_per_generation = {minimum}")

    def sampler_config(self, process_index: int = 0) -> SamplerConfig:
        """The :class:`SamplerConfig` this run samples with (``group_size = num_generations``)."""
        seed = self.seed if self.sampler_seed is None else self.sampler_seed
        return SamplerConfig(
            samples_per_round=self.samples_per_round, max_rounds=self.max_rounds, group_size=self.num_generations,
            exit_rule=self.exit_rule, min_positive=self.min_positive, positive_threshold=self.positive_threshold,
            selection=self.selection, unexited="keep", advantage=self.advantage, normalize_std=self.normalize_std,
            epsilon=self.advantage_epsilon, importance_weights=self.importance_weights, allocation=self.allocation,
            on_verifier_failure="zero", generation_retries=0, seed=seed + process_index,
            sample_budget_per_step=self.sample_budget_per_step, budget_half_life=self.budget_half_life,
            budget_skip=False,  # TRL needs a group per prompt
        )

    def to_dict(self) -> dict[str, Any]:
        # Callables (custom exit/selection rules) are not JSON-serialisable; log their repr.
        out = super().to_dict()
        for name in ("exit_rule", "selection", "advantage", "allocation"):
            if callable(out.get(name)):
                out[name] = repr(out[name])
        return out
