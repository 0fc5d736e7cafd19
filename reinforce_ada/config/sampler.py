"""The sampler's configuration tree: :class:`SamplerConfig` (with its ``streaming``, ``memory`` and ``est`` sections);
DAPO's :class:`~reinforce_ada.config.dynamic.DynamicSamplingConfig` is in ``config/dynamic.py``. Each sampling setting
has one name, one default and one check, here; the trainer (:class:`~reinforce_ada.config.TrainConfig`), TRL's
``AdaGRPOConfig`` and verl's config all map onto it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from reinforce_ada.config.checks import (_check_choice, _check_types, check_positive_ints, check_seeds,
                                         unknown_fields)
from reinforce_ada.config.est import EstConfig
from reinforce_ada.config.streaming import MemoryConfig, StreamingConfig
from reinforce_ada.core.advantages import ADVANTAGES
from reinforce_ada.core.allocation import ALLOCATION_RULES, STEP_ALLOCATION_RULES
from reinforce_ada.core.exits import EXIT_RULES
from reinforce_ada.core.selection import SELECTION_RULES
from reinforce_ada.errors import ConfigError

__all__ = ["EST_COMPANIONS", "SamplerConfig", "section"]

EST_COMPANIONS: dict[str, str] = {"exit_rule": "once", "selection": "all", "advantage": "pool"}
"""The settings ``mode="est"`` runs with (v3 Alg. 1: every sample kept, whole-pool baseline, one call per prompt):
strategy ``ada-est`` and :meth:`SamplerConfig.reinforce_ada_est` set them, and the check refuses others."""


NOT_USED_BY_EST = ("samples_per_round", "max_rounds", "group_size", "min_positive", "unexited", "streaming")
"""Sampler settings ``mode="est"`` does not read (one call per step, each prompt's count from its estimate, every
sample trained on); a value other than the default is refused, as Est's memory settings are, never ignored."""

FLOAT32_TINY = 1.1754943508222875e-38
"""The smallest normal float32: a weight below it is zero in a float32 gradient."""


def section(cls: type, value: Any, name: str) -> Any:
    """A nested section from its dataclass or a mapping of its fields (unknown keys: a ConfigError naming the closest
    known one)."""
    if not isinstance(value, dict):
        return value
    known = [f.name for f in fields(cls)]
    unknown = [key for key in value if key not in known]
    if unknown:
        raise ConfigError(f"unknown config field(s) {unknown_fields(unknown, known, prefix=name + '.')}")
    return cls(**value)


BUDGET_ONLY_SETTINGS: dict[str, Any] = {"sample_budget_per_step": None, "budget_probe": None,
                                        "budget_min_group": None, "budget_min_signal_rate": 0.0,
                                        "budget_overdraw": 1.0}
"""Settings of budget mode (``allocation="budget"``) and the value that leaves them off; any other value is an
error under another allocation."""
NEEDS_BUDGET_SKIP = {"budget_min_signal_rate": "a prompt whose samples are worth less than the price gets none",
                     "budget_overdraw": "over-drawn candidates are skipped"}
"""Budget settings that give some prompts no group, so they need ``budget_skip=True``; why."""

@dataclass
class SamplerConfig:
    """How completions are drawn, when prompts exit, and how groups and advantages are formed.

    Defaults are the paper's Reinforce-Ada-balance setup (arXiv 2510.04996): M=8, N=4, n=4.
    """

    samples_per_round: int = 8
    """M: completions per active prompt and round."""
    max_rounds: int = 4
    """N: the most rounds a prompt is sampled for. A prompt never gets more than M * N completions per step."""
    group_size: int = 4
    """n: completions kept per prompt for training (TRL's ``num_generations``, verl's ``rollout.n``)."""
    exit_rule: str | Callable[[int, int, int], bool] = "balanced"
    """When a prompt stops being sampled. ``"balanced"``, ``"positive"``, ``"mixed"``, ``"once"`` (GRPO) or a callable
    ``(num_positive, num_negative, group_size) -> bool``."""
    min_positive: int = 1
    """k for the ``"positive"`` exit rule: exit after this many positives."""
    positive_threshold: float = 0.5
    """A completion is positive when ``reward > positive_threshold``. The reference code used 0.7; with 0/1 rewards
    any value in [0, 1) gives the same classes."""
    selection: str | Callable = "balanced"
    """How a pool is downsampled to ``group_size``. ``"balanced"``, ``"positive_focused"``, ``"random"``, ``"all"``
    (no downsampling: train on the whole pool, so groups may exceed ``group_size``; standalone trainer only) or a
    callable ``(is_positive, group_size, rng) -> indices``."""
    unexited: str = "keep"
    """Prompts that never exited: ``"keep"`` or ``"drop"``. Those that never met the exit rule within ``max_rounds``:
    ``"keep"`` a group selected from their pool (the reference behaviour; usually zero-variance) or ``"drop"`` them.
    Either way the count is reported."""
    advantage: str | Callable = "pool"
    """Baseline: ``"pool"`` or ``"group"``. Pool: Reinforce-Ada's mean over every completion drawn for the prompt;
    group: GRPO's mean over the kept group."""
    normalize_std: bool = False
    """GRPO's std normalisation. Advantages are divided by (std + epsilon) of the same pool or group; a pool or group
    whose rewards are all equal has advantage 0."""
    epsilon: float = 1e-6
    """Added once to the std in the denominator. 0 is allowed: a zero-spread group still gets advantage 0 (as GRPO's
    positive epsilon gives it in TRL and verl), never 0 / 0."""
    importance_weights: bool = False
    """Per-completion weights that undo downsampling's class balance. The group estimate then has the whole pool's
    expectation (see :func:`reinforce_ada.core.advantages.pool_importance_weights`)."""
    allocation: str | Callable = "fixed"
    """How many completions an active prompt gets next round. ``"fixed"``: M; ``"beta-*"``: Beta posterior;
    ``"budget"``: budget mode (beyond the paper) -- ``sample_budget_per_step`` samples per step in total, spread over
    the batch's prompts by the posterior chance that more samples buy a group with signal (prior from a cross-step
    pass-rate memory), in rounds; saturated or hopeless prompts may get none. Needs ``exit_rule`` ``"mixed"`` or
    ``"balanced"``; see :mod:`reinforce_ada.core.allocation.budget`."""
    sample_budget_per_step: int | None = None
    """Budget mode: samples drawn per step over all prompts (None: ``group_size x prompts``, what GRPO draws). Must
    be at least ``group_size x prompts``; the check runs before any generation."""
    budget_skip: bool = True
    """Budget mode: a prompt may get no samples. It then has no group (counted as ``num_skipped``): its samples buy
    more signal elsewhere. False: every prompt first gets its group of n, and only the budget above ``n x prompts`` is
    allocated by value (TRL and verl need a group per prompt)."""
    budget_half_life: float | None = 2.0
    """Budget mode: presentations of a prompt after which its remembered evidence counts half. The memory decays
    per visit of the prompt, not per step, so it works whatever the number of steps between visits; a skipped prompt
    decays too and is retried later. None: never decays."""
    budget_probe: int | None = None
    """Budget mode: samples a prompt draws first (None: ``group_size``, GRPO's group). A smaller probe is
    re-planned once scored, so a prompt that turns out saturated or hopeless costs less; it may then end the step
    with fewer than ``group_size`` samples and is trained on what it has (counted as ``num_short_groups``).
    Ignored when ``budget_skip`` is False."""
    budget_min_group: int | None = None
    """Budget mode: the pool size at which a prompt may exit (None: ``group_size``). With a probe of 2 and the
    ``mixed`` rule, ``2`` lets a prompt whose probe already holds both classes stop there (a short group with
    signal, trained on as it is) and leaves the rest of the budget to prompts without signal. Ignored when
    ``budget_skip`` is False."""
    budget_min_signal_rate: float = 0.0
    """Budget mode: the *price of signal*. The least chance of a group with signal that each sample must buy, as
    ``streaming.min_signal_rate`` does for the streaming sampler (GRESO's skipping, without re-spending). A prompt
    whose next samples are worth less (remembered as saturated or hopeless) gets none, and its share of the budget
    is left unspent: the step draws fewer samples, so more steps fit in a token budget. Under ``mixed`` an unseen
    prompt's first group is worth ``(n - 1) / (n + 1) / n`` per sample (0.15 for n = 4), so a lower price never
    skips an unseen prompt. In [0, 1]; 0.0 (default): spend the whole budget. Needs ``budget_skip`` (TRL and verl
    need a group for every prompt). See :mod:`reinforce_ada.core.allocation.budget`."""
    budget_overdraw: float = 1.0
    """Budget mode: candidate prompts per trained prompt. Over-draw, as in GRESO and VIP: with ``2.0`` the
    sampler is given twice the prompts the budget can train on (the trainer takes ``ceil(2 x batch_size)`` from its
    stream); the budget stays GRPO's for the trained prompts (``group_size x floor(candidates / budget_overdraw)``)
    and the value allocation gives groups to the candidates most likely to give signal (the cross-step memory's
    saturated or hopeless prompts last; ties by order) and skips the rest (``num_skipped``). Helps only when prompts
    recur (several epochs over a fixed prompt set). 1.0: no over-draw. Needs ``budget_skip`` (TRL and verl need a
    group for every prompt they are given, so they cannot over-draw)."""
    on_verifier_failure: str = "zero"
    """An unscored completion: ``"zero"`` or ``"drop"``. One whose verifier returned None or raised: ``"zero"``
    scores it 0 (and counts it), ``"drop"`` removes it from the pool (and counts it). Neither loses the prompt."""
    generation_retries: int = 2
    """Retries of a failed generator call. After them the step ends early with the work already done."""
    seed: int = 0
    """Seed for the random choices of selection (the trainer sets it to its own ``seed``)."""
    mode: str = "rounds"
    """``"rounds"``, ``"streaming"`` or ``"est"``. Rounds: the paper's Seq, every active prompt waits for the round
    barrier; streaming: no barrier, a prompt's next samples are submitted as soon as its last ones are scored, and
    cancelled when it exits (see docs/beyond_the_paper.md; not with budget mode); est: Reinforce-Ada-Est (arXiv
    2510.04996v3 Alg. 1), one generation call per step, each prompt's sample count from its remembered pass rate,
    every sample trained on (settings in ``est``; needs ``selection="all"``, ``advantage="pool"``,
    ``exit_rule="once"``: strategy ``ada-est`` sets them). The sampler factory builds the sampler this names."""
    streaming: StreamingConfig = field(default_factory=StreamingConfig)
    """Settings of ``mode="streaming"`` (:class:`~reinforce_ada.config.StreamingConfig`)."""
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    """The cross-step pass-rate memory (:class:`~reinforce_ada.config.MemoryConfig`)."""
    objective: str | None = None
    """The RL objective: "linear", "log" or "power:A" (v3 Sec. 3). It maximises ``E_x[f(p(x))]`` (p: a prompt's pass
    rate), whose gradient weighs each prompt by ``w(p) = f'(p)``: ``"linear"`` (``f = p``, ``w = 1``: ordinary RL, no
    weight), ``"log"`` (``w = 1/p``: hard prompts weigh more) or ``"power:A"`` (``w = A p^(A-1)``). The weight is paid
    in samples (``mode="est"``'s allocation) and in the gradient (every advantage multiplied by ``w_grad``, evaluated at
    the pool's pass rate: the share of its samples with ``reward > positive_threshold``, which is its mean reward for
    0/1 rewards and never the mean of graded scores), split by ``sample_share``. None: ``"log"`` under
    ``mode="est"``, ``"linear"`` otherwise (the paper's Seq as released: no weight). See
    :mod:`reinforce_ada.core.objectives`."""
    sample_share: float | None = None
    """The share s of the objective's weight paid in samples. ``w_sample = w^s``, ``w_grad = w^(1-s)``, s in [0, 1].
    None: 1/2 under ``mode="est"`` (Alg. 1: ``1/sqrt(p)`` in samples and in the gradient), 0 otherwise (the round-based
    and streaming samplers choose samples by their exit rule, so the whole weight goes into the gradient: v3 Sec. 3.2's
    explicit ``1 / p_hat`` for Seq). Not used with ``est.allocation="variance-optimal"``."""
    objective_eps: float = 1e-6
    """Every weight is evaluated at ``p + eps`` (> 0: finite at ``p = 0``)."""
    max_grad_weight: float | None = 8.0
    """The cap on ``w_grad``. Under the log objective a pool with one success in 32 samples would carry 32x the
    gradient of an easy prompt and could dominate its batch; with the cap it carries at most 8x. None: no cap."""
    est: EstConfig = field(default_factory=EstConfig)
    """Settings of ``mode="est"`` (:class:`~reinforce_ada.config.EstConfig`)."""

    def __post_init__(self) -> None:
        self.streaming = section(StreamingConfig, self.streaming, "streaming")
        self.memory = section(MemoryConfig, self.memory, "memory")
        self.est = section(EstConfig, self.est, "est")
        _check_types(self)
        check_positive_ints(self, ("samples_per_round", "max_rounds", "group_size", "min_positive"))
        if self.group_size < 2:
            raise ConfigError(
                f"group_size must be >= 2 (got {self.group_size}): a group of one has no baseline and no signal"
            )
        if self.group_size > self.max_samples:
            raise ConfigError(
                f"group_size={self.group_size} exceeds samples_per_round * max_rounds = {self.max_samples}: "
                "no prompt could ever fill its group"
            )
        if not 0 <= self.positive_threshold < 1:
            raise ConfigError(f"positive_threshold must be in [0, 1) (got {self.positive_threshold}): a completion is "
                              "positive when reward > positive_threshold, and rewards are scored in [0, 1]")
        check_seeds(self, ("seed",), prefix="sampler.")
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number >= 0 (got {self.epsilon})")
        if self.generation_retries < 0:
            raise ConfigError(f"generation_retries must be >= 0 (got {self.generation_retries})")
        _check_choice("exit_rule", self.exit_rule, EXIT_RULES.names(), callable_ok=True)
        _check_choice("selection", self.selection, SELECTION_RULES.names(), callable_ok=True)
        _check_choice("advantage", self.advantage, ADVANTAGES.names(), callable_ok=True)
        _check_choice("allocation", self.allocation, ALLOCATION_RULES.names() + STEP_ALLOCATION_RULES.names(),
                      callable_ok=True)
        if self.sample_budget_per_step is not None:
            value = self.sample_budget_per_step
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"sample_budget_per_step must be a positive integer (got {value!r})")
        if self.budget_probe is not None:
            value = self.budget_probe
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.group_size:
                raise ConfigError(f"budget_probe must be an integer in 1..group_size={self.group_size} "
                                  f"(got {value!r})")
        if self.budget_min_group is not None:
            value = self.budget_min_group
            if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= self.group_size:
                raise ConfigError(f"budget_min_group must be an integer in 2..group_size={self.group_size} "
                                  f"(got {value!r})")
        if self.budget_half_life is not None and not (isinstance(self.budget_half_life, (int, float))
                                                      and math.isfinite(self.budget_half_life)
                                                      and self.budget_half_life > 0):
            raise ConfigError(f"budget_half_life must be a positive number or None (got {self.budget_half_life!r})")
        value = self.budget_min_signal_rate
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0):
            raise ConfigError(f"budget_min_signal_rate must be a number in [0, 1] (got {value!r})")
        value = self.budget_overdraw
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and value >= 1.0):
            raise ConfigError(f"budget_overdraw must be a number >= 1 (got {value!r})")
        for name, off in BUDGET_ONLY_SETTINGS.items():
            value = getattr(self, name)
            if value != off and self.allocation != "budget":
                raise ConfigError(f"{name} is a setting of budget mode, allocation='budget' "
                                  f"(got allocation={self.allocation!r})")
            if value != off and name in NEEDS_BUDGET_SKIP and not self.budget_skip:
                raise ConfigError(f"{name}={value} needs budget_skip=True: {NEEDS_BUDGET_SKIP[name]}, and with "
                                  "budget_skip=False (TRL, verl) every prompt must get its group")
        if self.allocation == "budget":
            from reinforce_ada.core.allocation.budget import BUDGET_EXIT_RULES

            if self.exit_rule not in BUDGET_EXIT_RULES:
                raise ConfigError(f"allocation='budget' values the chance of meeting the exit rule, which must then "
                                  f"be one of {list(BUDGET_EXIT_RULES)} (got exit_rule={self.exit_rule!r})")
        _check_choice("unexited", self.unexited, ["keep", "drop"])
        _check_choice("mode", self.mode, ["rounds", "streaming", "est"])
        self._check_objective()
        if self.streaming.budget is not None and self.streaming.budget < self.group_size:
            raise ConfigError(f"streaming.budget={self.streaming.budget} is below group_size={self.group_size}")
        if not self.memory.enabled and (self.streaming.skip_below or self.streaming.cap_below
                                        or (self.memory.seed and not (self.is_budget or self.mode == "est"))):
            raise ConfigError("memory.seed, streaming.skip_below and streaming.cap_below need memory.enabled=True "
                              "(or, for memory.seed, budget mode -- allocation='budget' -- or mode='est', which always "
                              "keep a memory)")
        _check_choice("on_verifier_failure", self.on_verifier_failure, ["zero", "drop"])
        if callable(self.unexited) or callable(self.on_verifier_failure):
            raise ConfigError("unexited and on_verifier_failure take a name, not a callable")

    def _check_objective(self) -> None:
        """The objective and its split; ``mode="est"``'s fixed companions; settings of another mode left at their
        defaults (a changed one would be ignored)."""
        from reinforce_ada.core.objectives import check_sample_share, parse_objective

        if self.objective is not None:
            try:
                parse_objective(self.objective)
            except ValueError as err:
                raise ConfigError(str(err)) from None
        if self.sample_share is not None:
            if isinstance(self.sample_share, bool) or not 0 <= self.sample_share <= 1:  # the field holds a number
                raise ConfigError(f"sample_share must be a number in [0, 1] (got {self.sample_share!r}); Appendix "
                                  f"B's variance-optimal split is est.allocation='variance-optimal'")
            try:
                check_sample_share(self.objective_in_use, self.sample_share)
            except ValueError as err:
                raise ConfigError(str(err)) from None
        if not (self.objective_eps > 0):
            raise ConfigError(f"objective_eps must be > 0 (got {self.objective_eps}): it keeps w(p) finite at p = 0")
        self._check_weights_usable()
        if self.max_grad_weight is not None and not self.max_grad_weight >= 1:
            raise ConfigError(f"max_grad_weight must be >= 1 or None (got {self.max_grad_weight})")
        if self.objective_in_use == "linear":  # w = 1: its split, floor and cap are read by no one
            for name in ("sample_share", "objective_eps", "max_grad_weight"):
                default = SamplerConfig.__dataclass_fields__[name].default
                if getattr(self, name) != default:
                    raise ConfigError(f"{name}={getattr(self, name)!r} is a setting of the objective's weight, and "
                                      f"the linear objective (the default outside mode='est') weighs every prompt 1: "
                                      f"give objective='log' or 'power:A' with it, or leave it out")
        if self.mode != "est":
            if self.est != EstConfig():
                raise ConfigError(f"est.* are settings of mode='est' (strategy ada-est); got mode={self.mode!r}")
            return
        wanted = {**EST_COMPANIONS, "allocation": "fixed"}
        wrong = {name: getattr(self, name) for name, value in wanted.items() if getattr(self, name) != value}
        if wrong:
            raise ConfigError(f"mode='est' draws each prompt's samples in one call and trains on all of them with the "
                              f"whole-pool baseline (v3 Alg. 1), so it needs "
                              f"{', '.join(f'{k}={v!r}' for k, v in wanted.items())} (got "
                              f"{', '.join(f'{k}={v!r}' for k, v in wrong.items())}); strategy ada-est sets them")
        if self.est.allocation == "variance-optimal":
            if self.objective_in_use != "log" or self.sample_share is not None or self.normalize_std:
                raise ConfigError("est.allocation='variance-optimal' is Appendix B's split of the log objective (its "
                                  "advantage is the std normalisation): leave objective at 'log' and sample_share "
                                  "and normalize_std unset")
        for name in NOT_USED_BY_EST:
            default = SamplerConfig.__dataclass_fields__[name]
            default = default.default_factory() if callable(default.default_factory) else default.default
            if getattr(self, name) != default:
                shown = "streaming.*" if name == "streaming" else f"{name}={getattr(self, name)!r}"
                raise ConfigError(f"{shown} is not used by mode='est' (strategy ada-est): each prompt's samples come "
                                  f"from its estimated pass rate in one call (est.samples_per_prompt / est.budget set "
                                  f"how many) and every sample is trained on; leave it out")
        defaults = MemoryConfig()
        for name in ("half_life", "max_evidence"):
            if getattr(self.memory, name) != getattr(defaults, name):
                raise ConfigError(f"memory.{name} is not used by mode='est': its memory decays per visit "
                                  f"(est.decay) and keeps every sample's evidence")

    def _check_weights_usable(self) -> None:
        """The objective's weights, split by the sample share, finite and not zero in float32 at every pass rate a
        pool with signal can have (k/64, k = 1..63): ``power:1e308`` or ``objective_eps=1e300`` would otherwise zero
        every gradient (or every prompt's share of the samples) without a word."""
        import numpy as np

        from reinforce_ada.core.objectives import split_weights

        share = self.sample_share_in_use
        p = np.arange(1, 64) / 64.0
        with np.errstate(all="ignore"):
            w_sample, w_grad = split_weights(self.objective_in_use, p, sample_share=share, eps=self.objective_eps)
        for what, w in (("w_sample", w_sample), ("w_grad", w_grad)):
            bad = ~(np.isfinite(w) & (w >= FLOAT32_TINY))
            if bad.any():
                at = float(p[np.argmax(bad)])
                raise ConfigError(f"objective={self.objective_in_use!r} with objective_eps={self.objective_eps:g} "
                                  f"gives {what}={float(w[np.argmax(bad)]):.3g} at pass rate {at:g}: a weight that "
                                  f"is not finite or is below float32's smallest number would "
                                  f"{'zero every gradient' if what == 'w_grad' else 'break the allocation'}; choose "
                                  f"an objective and objective_eps whose weights are finite and not zero on (0, 1)")

    @property
    def objective_in_use(self) -> str:
        """``objective``, or its default: ``"log"`` under ``mode="est"``, ``"linear"`` otherwise."""
        if self.objective is not None:
            return self.objective
        return "log" if self.mode == "est" else "linear"

    @property
    def sample_share_in_use(self) -> float | str:
        """``sample_share``, or its default (1/2 under ``mode="est"``, 0 otherwise); ``"variance-optimal"`` with
        ``est.allocation="variance-optimal"``."""
        if self.mode == "est" and self.est.allocation == "variance-optimal":
            from reinforce_ada.core.objectives import VARIANCE_OPTIMAL

            return VARIANCE_OPTIMAL
        if self.sample_share is not None:
            return self.sample_share
        return 0.5 if self.mode == "est" else 0.0

    @property
    def weights_gradient(self) -> bool:
        """Whether advantages carry a gradient weight (an objective other than ``linear``, unless it is all paid in
        samples)."""
        if self.objective_in_use == "linear":
            return False
        return self.sample_share_in_use != 1

    @property
    def max_samples(self) -> int:
        """The per-prompt budget of one step, M * N."""
        return self.samples_per_round * self.max_rounds

    @property
    def min_exit_count(self) -> int:
        """The pool size a prompt needs before it may exit: ``group_size``, or budget mode's ``budget_min_group``."""
        if self.is_budget and self.budget_skip and self.budget_min_group is not None:
            return self.budget_min_group
        return self.group_size

    @property
    def is_budget(self) -> bool:
        """Budget mode: one sample budget per step shared by the batch's prompts (``allocation="budget"``)."""
        return self.allocation in STEP_ALLOCATION_RULES

    def trained_prompts(self, num_candidates: int) -> int:
        """Budget mode: how many of ``num_candidates`` prompts the default budget trains on,
        ``floor(num_candidates / budget_overdraw)`` (at least 1): :meth:`candidate_prompts` of a batch size gives
        that batch size back exactly.

        >>> SamplerConfig(allocation="budget", exit_rule="mixed", budget_overdraw=1.5).trained_prompts(5)
        3
        """
        return max(1, math.floor(num_candidates / self.budget_overdraw + 1e-9))

    def candidate_prompts(self, batch_size: int) -> int:
        """Budget mode: prompts to offer the sampler to train on ``batch_size``, ``ceil(batch_size x
        budget_overdraw)`` (``batch_size`` without over-draw).

        >>> SamplerConfig(allocation="budget", exit_rule="mixed", budget_overdraw=1.5).candidate_prompts(3)
        5
        """
        return math.ceil(batch_size * self.budget_overdraw - 1e-9)

    def step_budget(self, num_prompts: int) -> int:
        """Budget mode: the samples one step over ``num_prompts`` prompts (candidates) may draw; a ConfigError below
        one group per trained prompt (``group_size x`` :meth:`trained_prompts`)."""
        trained = self.trained_prompts(num_prompts)
        minimum = self.group_size * trained
        value = minimum if self.sample_budget_per_step is None else self.sample_budget_per_step
        if value < minimum:
            overdraw = (f" ({num_prompts} candidates / budget_overdraw {self.budget_overdraw:g})"
                        if self.budget_overdraw != 1.0 else "")
            raise ConfigError(f"sample_budget_per_step={value} is below one group per {'trained ' * bool(overdraw)}"
                              f"prompt: at least group_size x prompts = {self.group_size} x {trained} = "
                              f"{minimum}{overdraw}")
        return value

    @classmethod
    def reinforce_ada_est(cls, **overrides: Any) -> "SamplerConfig":
        """Reinforce-Ada-Est (v3 Alg. 1): ``mode="est"`` with its fixed companions (every sample kept, whole-pool
        baseline); ``overrides`` for the rest, e.g. ``est={"budget": 512}``.

        >>> SamplerConfig.reinforce_ada_est().objective_in_use
        'log'
        """
        params: dict[str, Any] = dict(mode="est", **EST_COMPANIONS)
        params.update(overrides)
        return cls(**params)

    @classmethod
    def grpo(cls, group_size: int = 4, **overrides: Any) -> "SamplerConfig":
        """Plain GRPO through the same sampler: one round of ``group_size`` samples, group-local baseline."""
        params = dict(samples_per_round=group_size, max_rounds=1, group_size=group_size, exit_rule="once",
                      selection="random", advantage="group")
        params.update(overrides)
        return cls(**params)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready mapping (sections nested; callables by their repr)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("streaming", "memory", "est"):
                out[f.name] = {g.name: getattr(value, g.name) for g in fields(value)}
            else:
                out[f.name] = repr(value) if callable(value) else value
        return out
