"""``AdaGRPOConfig``: TRL's ``GRPOConfig`` plus the Reinforce-Ada sampling fields.

Everything TRL configures keeps its meaning (loss type, clipping ``epsilon``/``epsilon_high``, ``beta``, vLLM modes,
batch sizes, logging). What changes:

* ``num_generations`` is the *final group size* n: every prompt is sampled in rounds of ``samples_per_round`` (M) for
  at most ``max_rounds`` (N) rounds, until its pool meets ``exit_rule``, and the pool is downsampled (``selection``) to
  exactly ``num_generations`` completions, which TRL trains on.
* The advantages TRL trains on keep TRL's formulas (``scale_rewards``, ``multi_objective_aggregation``, its
  ``1e-4``) but take their statistics from the prompt's *whole pool* (``advantage="pool"``), not from the kept group:
  with the default ``scale_rewards="group"``, ``A = (r - mean(pool)) / (std(pool) + 1e-4)``; ``"none"`` (the
  paper's setting): ``A = r - mean(pool)``; ``"batch"``: divided by the std of every reward drawn this step. See
  :mod:`reinforce_ada.integrations.trl.advantages`.
* Exits and selection look at *correctness*: the rewards of ``correctness_reward_funcs`` (required when there are
  several reward functions, so that e.g. a format reward does not make every well-formatted completion "positive").

TRL needs exactly ``num_generations`` completions per prompt (fixed shapes), so the sampler is always run with
``unexited="keep"`` (a prompt that never met its exit rule still yields a group, selected from its ``M * N`` pool)
and ``on_verifier_failure="zero"`` (a completion whose correctness functions all returned ``None`` counts as not
correct); those two choices are not configurable here. Each process must hold whole prompt groups, so
``per_device_train_batch_size * steps_per_generation`` must be a multiple of ``num_generations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.integrations.trl.advantages import AGGREGATIONS, normalize_scale_rewards


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
        metadata={"help": "A completion is positive (correct) when the sum of its correctness_reward_funcs' rewards "
                          "(unweighted) > positive_threshold."},
    )
    correctness_reward_funcs: list[str] | None = field(
        default=None,
        metadata={"help": "Which reward functions decide correctness for exits and selection: names (as in TRL's "
                          "rewards/<name>/ metrics) or indices into reward_funcs. Required when there are several "
                          "reward functions (a format reward must not count as correct); default with one: that one. "
                          "The advantages still use every reward function with reward_weights."},
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
    advantage_epsilon: float = field(
        default=1e-4,
        metadata={"help": "Added to every std in an advantage's denominator (TRL's constant is 1e-4)."},
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
    rescore_kept: bool = field(
        default=False,
        metadata={"help": "Call the reward functions again on the kept completions, as plain GRPO would (True), or "
                          "give TRL the scores computed while sampling (False: each completion is scored once; "
                          "log_extra columns of the kept completions are handed to TRL's completions table)."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # TRL turns scale_rewards=True/False into "group"/"none"
        try:
            self.scale_rewards = normalize_scale_rewards(self.scale_rewards)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.multi_objective_aggregation not in AGGREGATIONS:
            raise ConfigError(f"multi_objective_aggregation={self.multi_objective_aggregation!r} is not one of "
                              f"{list(AGGREGATIONS)}")
        if self.correctness_reward_funcs is not None:
            if isinstance(self.correctness_reward_funcs, (str, int)):
                self.correctness_reward_funcs = [self.correctness_reward_funcs]
            self.correctness_reward_funcs = list(self.correctness_reward_funcs)
            if not self.correctness_reward_funcs:
                raise ConfigError("correctness_reward_funcs is empty: name at least one reward function (or leave it "
                                  "None when there is a single reward function)")
        local_batch = self.per_device_train_batch_size * self.steps_per_generation
        if local_batch % self.num_generations != 0:
            raise ConfigError(
                f"per_device_train_batch_size * steps_per_generation = {self.per_device_train_batch_size} * "
                f"{self.steps_per_generation} = {local_batch} must be a multiple of num_generations="
                f"{self.num_generations}: each process samples whole prompts, so it must hold whole groups"
            )
        self.sampler_config()  # validates the sampling fields now, before any model is loaded
        if self.selection == "all":
            raise ConfigError("selection='all' keeps whole pools of varying size; TRL trains on exactly "
                              "num_generations completions per prompt: choose balanced, positive_focused or random")
        if self.sample_budget_per_step is not None:
            minimum = local_batch  # num_generations x this process's prompts per generation batch
            if self.sample_budget_per_step < minimum:
                raise ConfigError(f"sample_budget_per_step={self.sample_budget_per_step} is below one group per "
                                  f"prompt: at least per_device_train_batch_size x steps_per_generation = {minimum}")

    def sampler_config(self, process_index: int = 0) -> SamplerConfig:
        """The :class:`SamplerConfig` this run samples with (``group_size = num_generations``).

        The sampler sees the correctness score (exits, selection); the advantages TRL trains on are computed by the
        trainer from every reward function (``AdaGRPOTrainer.ada_advantages``), not the sampler's.
        """
        seed = self.seed if self.sampler_seed is None else self.sampler_seed
        return SamplerConfig(
            samples_per_round=self.samples_per_round, max_rounds=self.max_rounds, group_size=self.num_generations,
            exit_rule=self.exit_rule, min_positive=self.min_positive, positive_threshold=self.positive_threshold,
            selection=self.selection, unexited="keep", advantage=self.advantage,
            normalize_std=self.scale_rewards == "group", epsilon=self.advantage_epsilon,
            importance_weights=self.importance_weights, allocation=self.allocation,
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
