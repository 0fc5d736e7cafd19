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
* ``mode="est"`` runs Reinforce-Ada-Est (arXiv 2510.04996v3, Alg. 1) instead of the rounds: each step's rows are
  handed out among its prompts by a per-prompt pass-rate memory (``est_*`` fields, the standalone ``sampler.est.*``
  under TRL's flat names), one generation call, every row trained on with ``(r - rbar) / sqrt(rbar + eps)``
  (:mod:`reinforce_ada.integrations.trl.est`). ``num_generations`` is then the budget per prompt
  (``est_samples_per_prompt`` follows it: 8 gives GRPO-n8's samples).

TRL needs exactly ``num_generations`` completions per prompt (fixed shapes), so the sampler is always run with
``unexited="keep"`` (a prompt that never met its exit rule still yields a group, selected from its ``M * N`` pool)
and ``on_verifier_failure="zero"`` (a completion whose correctness functions all returned ``None`` counts as not
correct); those two choices are not configurable here. Each process must hold whole prompt groups, so
``per_device_train_batch_size * steps_per_generation`` must be a multiple of ``num_generations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from reinforce_ada.config import ConfigError, EstConfig, MemoryConfig, SamplerConfig, field_docs
from reinforce_ada.integrations.trl.advantages import AGGREGATIONS, normalize_scale_rewards


def sampler_field(name: str, note: str = "") -> Any:
    """A field that is :class:`SamplerConfig`'s field ``name``: its default and its docstring as the help (plus a
    TRL-specific ``note``), so the two cannot drift apart."""
    default = SamplerConfig.__dataclass_fields__[name].default
    return field(default=default, metadata={"help": " ".join(filter(None, [field_docs(SamplerConfig)[name], note]))})


def est_field(name: str, note: str = "") -> Any:
    """The field ``est_<name>``: :class:`EstConfig`'s field ``name`` (the standalone ``sampler.est.<name>``), its
    default and its docstring as the help."""
    default = EstConfig.__dataclass_fields__[name].default
    return field(default=default, metadata={"help": " ".join(filter(None, [
        f"mode='est' only (sampler.est.{name}).", field_docs(EstConfig)[name], note]))})


SAMPLER_FIELDS = ("samples_per_round", "max_rounds", "exit_rule", "min_positive", "positive_threshold", "selection",
                  "advantage", "importance_weights", "allocation", "budget_half_life", "sample_budget_per_step",
                  "mode", "objective", "sample_share", "objective_eps", "max_grad_weight")
"""The :class:`SamplerConfig` fields :class:`AdaGRPOConfig` declares under the same name (via :func:`sampler_field`,
so with the same default and help)."""

EST_FIELDS = tuple(f"est_{name}" for name in EstConfig.__dataclass_fields__)
"""Est's settings, ``sampler.est.<name>`` as the flat field ``est_<name>`` (same default and help)."""

ROUNDS_ONLY = ("samples_per_round", "max_rounds", "exit_rule", "min_positive", "selection", "advantage",
               "importance_weights", "allocation", "budget_half_life", "sample_budget_per_step", "rescore_kept")
"""Fields of the round-based sampler that ``mode="est"`` does not use (refused there when changed)."""

EST_ONLY = EST_FIELDS + ("memory_seed",)
"""Fields of Est that ``mode="rounds"`` does not use (refused there when changed)."""

TRL_NAMES = ((r"\bgroup_size\b", "num_generations"), (r"\best\.(\w+)", r"est_\1"),
             (r"\bmemory\.seed\b", "memory_seed"), (r"(?<![\w.])epsilon\b", "advantage_epsilon"))
"""How :class:`SamplerConfig`'s messages name a setting, and the name the same setting has in :class:`AdaGRPOConfig`
(:data:`NOT_IN_TRL`): an error names the field the user set."""


def in_trl_names(message: str) -> str:
    """A :class:`SamplerConfig` error message with every setting under its ``AdaGRPOConfig`` name.

    >>> in_trl_names("group_size=64 exceeds samples_per_round * max_rounds = 32; est.decay must be in (0, 1]")
    'num_generations=64 exceeds samples_per_round * max_rounds = 32; est_decay must be in (0, 1]'
    """
    for pattern, name in TRL_NAMES:
        message = re.sub(pattern, name, message)
    return message

NOT_IN_TRL: dict[str, str] = {
    "group_size": "TRL's num_generations (the one field under TRL's name)",
    "epsilon": "advantage_epsilon (TRL's `epsilon` is the clip ratio; the default is TRL's 1e-4)",
    "seed": "sampler_seed (default: TRL's seed; process i uses sampler_seed + i)",
    "normalize_std": "set by TRL's scale_rewards ('group': True)",
    "unexited": "always 'keep': TRL needs num_generations completions for every prompt",
    "on_verifier_failure": "always 'zero': a completion whose correctness functions all returned None counts as "
                           "not correct (TRL needs fixed shapes)",
    "generation_retries": "0: TRL's generation either works or raises",
    "budget_skip": "always False: TRL needs a group for every prompt",
    "budget_probe": "a setting of budget_skip=True, which TRL cannot use",
    "budget_min_group": "a setting of budget_skip=True, which TRL cannot use",
    "budget_overdraw": "needs budget_skip=True: TRL trains every prompt it is given",
    "budget_min_signal_rate": "needs budget_skip=True: TRL trains every prompt it is given",
    "streaming": "TRL generates in batches: the round-based sampler or Est only",
    "memory": "memory.seed is memory_seed (Est's memory); budget mode's memory keeps its other defaults",
    "est": "declared as flat fields est_<name> (est_decay, est_min_samples, ...): TRL's config has no sections",
}
"""The :class:`SamplerConfig` fields :class:`AdaGRPOConfig` does not declare under their own name, with why."""


@dataclass
class AdaGRPOConfig(GRPOConfig):
    """``GRPOConfig`` + Reinforce-Ada (arXiv 2510.04996). ``num_generations`` is the group size n.

    The paper's setup: ``num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balanced",
    epsilon=0.2, epsilon_high=0.28, loss_type="dapo"`` (token-mean).
    """

    samples_per_round: int = sampler_field("samples_per_round")
    max_rounds: int = sampler_field("max_rounds")
    exit_rule: str = sampler_field("exit_rule")
    min_positive: int = sampler_field("min_positive")
    positive_threshold: float = sampler_field(
        "positive_threshold", note="Here the reward is the unweighted sum of the correctness_reward_funcs' rewards.")
    correctness_reward_funcs: list[str] | None = field(
        default=None,
        metadata={"help": "Which reward functions decide correctness for exits and selection: names (as in TRL's "
                          "rewards/<name>/ metrics) or indices into reward_funcs. Required when there are several "
                          "reward functions (a format reward must not count as correct); default with one: that one. "
                          "The advantages still use every reward function with reward_weights."},
    )
    selection: str = sampler_field("selection", note="The group size is num_generations.")
    advantage: str = sampler_field("advantage", note="This is the baseline of the advantages TRL trains on.")
    advantage_epsilon: float = field(
        default=1e-4,
        metadata={"help": "SamplerConfig's epsilon (TRL's own `epsilon` is the clip ratio): added to every std in an "
                          "advantage's denominator (TRL's constant is 1e-4). 0 is allowed: a prompt whose rewards are "
                          "all equal still gets advantage 0."},
    )
    importance_weights: bool = sampler_field(
        "importance_weights", note="Weights are positive, so for TRL's clipped losses multiplying each advantage "
                                   "by its weight equals weighting each completion's loss.")
    allocation: str = sampler_field(
        "allocation", note="TRL needs a group per prompt, so in budget mode every prompt first gets its "
                           "num_generations samples and only the budget above that is allocated by value (the budget "
                           "is per generation batch of this process).")
    budget_half_life: float | None = sampler_field("budget_half_life")
    sample_budget_per_step: int | None = sampler_field("sample_budget_per_step")
    mode: str = sampler_field(
        "mode", note="Here 'rounds' (the default) or 'est'; under 'est' num_generations is the budget per prompt "
                     "(est_samples_per_prompt) and the round-based fields are not used.")
    objective: str | None = sampler_field(
        "objective", note="Under 'rounds' its gradient weight multiplies TRL's advantages, at the pool's pass rate "
                          "(the share of its completions whose correctness rewards sum above positive_threshold).")
    sample_share: float | str | None = sampler_field("sample_share")
    objective_eps: float = sampler_field("objective_eps")
    max_grad_weight: float | None = sampler_field("max_grad_weight")
    est_min_samples: int = est_field("min_samples")
    est_max_samples: int | None = est_field("max_samples")
    est_samples_per_prompt: int | None = field(
        default=None,
        metadata={"help": "mode='est' only (sampler.est.samples_per_prompt). The budget per prompt. TRL's step holds "
                          "num_generations rows per prompt, so this is num_generations: None (the default) follows "
                          "it, and a value given must equal it (num_generations=8: GRPO-n8's budget)."},
    )
    est_budget: int | None = est_field(
        "budget", note="Not settable here (None): TRL fixes a step's rows, num_generations x prompts.")
    est_decay: float = est_field("decay")
    est_prior_alpha: float = est_field("prior_alpha")
    est_prior_beta: float = est_field("prior_beta")
    est_allocation: str = est_field("allocation")
    memory_seed: str | None = field(
        default=None,
        metadata={"help": "mode='est' only (sampler.memory.seed): " + field_docs(MemoryConfig)["seed"]},
    )
    sampler_seed: int | None = field(
        default=None,
        metadata={"help": "Seed of the sampler's selection RNG (default: seed); process i uses sampler_seed + i."},
    )
    resume_without_sampler_state: bool = field(
        default=False,
        metadata={"help": "Resume from a checkpoint that holds no ada_sampler_state_<i>.json (one TRL's GRPOTrainer "
                          "saved, say): the sampler's selection RNG starts from sampler_seed and Est's memory empty "
                          "(or from memory_seed), so the run does not continue as the one that saved it. False (the "
                          "default): such a resume stops, naming the file."},
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
        if self.mode not in ("rounds", "est"):
            raise ConfigError(f"mode={self.mode!r}: AdaGRPOConfig runs 'rounds' (Reinforce-Ada's Seq) or 'est' "
                              f"(Reinforce-Ada-Est); TRL generates in batches, so not 'streaming'")
        if self.mode == "est":
            self._check_est()
        else:
            changed = changed_fields(self, EST_ONLY)
            if changed:
                raise ConfigError(f"{', '.join(changed)}: settings of mode='est' (Reinforce-Ada-Est), not used by "
                                  f"mode={self.mode!r}; set mode='est', or leave them at their defaults")
        self.sampler_config()  # validates the sampling fields now, before any model is loaded
        if self.selection == "all" and self.mode == "rounds":
            raise ConfigError("selection='all' keeps whole pools of varying size; TRL trains on exactly "
                              "num_generations completions per prompt: choose balanced, positive_focused or random")
        if self.sample_budget_per_step is not None:
            minimum = local_batch  # num_generations x this process's prompts per generation batch
            if self.sample_budget_per_step < minimum:
                raise ConfigError(f"sample_budget_per_step={self.sample_budget_per_step} is below one group per "
                                  f"prompt: at least per_device_train_batch_size x steps_per_generation = {minimum}")

    def _check_est(self) -> None:
        """``mode="est"``: the budget is TRL's rows, each prompt's count can be anything in ``[est_min_samples,
        est_max_samples]`` around ``num_generations``, and the round-based fields are left at their defaults."""
        n = self.num_generations
        if self.est_budget is not None:
            raise ConfigError(f"est_budget={self.est_budget}: TRL fixes a step's rows (num_generations x prompts), so "
                              f"Est's budget is num_generations per prompt; leave est_budget None")
        if self.est_samples_per_prompt is not None and self.est_samples_per_prompt != n:
            raise ConfigError(f"mode='est' hands out each step's num_generations x prompts rows among its prompts, so "
                              f"est_samples_per_prompt={self.est_samples_per_prompt} must equal num_generations={n} "
                              f"(leave it None: it follows num_generations)")
        if self.est_min_samples > n:
            raise ConfigError(f"est_min_samples={self.est_min_samples} is above num_generations={n}: a step holds "
                              f"num_generations rows per prompt, so its prompts cannot each get est_min_samples")
        if self.est_max_samples is not None and self.est_max_samples < n:
            raise ConfigError(f"est_max_samples={self.est_max_samples} is below num_generations={n}: a step's "
                              f"num_generations rows per prompt cannot be handed out at est_max_samples per prompt")
        changed = changed_fields(self, ROUNDS_ONLY)
        if changed:
            raise ConfigError(f"{', '.join(changed)}: settings of mode='rounds', not used by mode='est' (one "
                              f"generation call, every row trained on); leave them at their defaults")

    def sampler_config(self, process_index: int = 0) -> SamplerConfig:
        """The :class:`SamplerConfig` this run samples with (``group_size = num_generations``).

        The sampler sees the correctness score (exits, selection); the advantages TRL trains on are computed by the
        trainer from every reward function (``AdaGRPOTrainer.ada_advantages``), not the sampler's.
        """
        seed = self.seed if self.sampler_seed is None else self.sampler_seed
        objective = {name: getattr(self, name) for name in ("objective", "sample_share", "objective_eps",
                                                            "max_grad_weight")}
        try:
            if self.mode == "est":
                est = {name: getattr(self, f"est_{name}") for name in EstConfig.__dataclass_fields__}
                est["samples_per_prompt"] = self.num_generations  # est_samples_per_prompt: None or the same number
                return SamplerConfig.reinforce_ada_est(  # group_size is not Est's: every row is trained on
                    positive_threshold=self.positive_threshold, est=EstConfig(**est),
                    memory=MemoryConfig(seed=self.memory_seed), epsilon=self.advantage_epsilon,
                    seed=seed + process_index, on_verifier_failure="zero", generation_retries=0, **objective)
            return SamplerConfig(
                **{name: getattr(self, name) for name in SAMPLER_FIELDS if name not in objective},
                **objective, group_size=self.num_generations,
                unexited="keep", normalize_std=self.scale_rewards == "group", epsilon=self.advantage_epsilon,
                on_verifier_failure="zero", generation_retries=0, seed=seed + process_index,
                budget_skip=False,  # TRL needs a group per prompt
            )
        except ConfigError as err:
            raise ConfigError(in_trl_names(str(err))) from None

    def to_dict(self) -> dict[str, Any]:
        # Callables (custom exit/selection rules) are not JSON-serialisable; log their repr.
        out = super().to_dict()
        for name in ("exit_rule", "selection", "advantage", "allocation"):
            if callable(out.get(name)):
                out[name] = repr(out[name])
        return out


def changed_fields(config: AdaGRPOConfig, names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` whose value in ``config`` differs from :class:`AdaGRPOConfig`'s default (SamplerConfig's and
    EstConfig's, by :func:`sampler_field` and :func:`est_field`), whatever a subclass of it redeclares."""
    defaults = AdaGRPOConfig.__dataclass_fields__
    return [name for name in names if getattr(config, name) != defaults[name].default]
