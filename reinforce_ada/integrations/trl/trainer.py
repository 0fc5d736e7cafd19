"""``AdaGRPOTrainer``: TRL's ``GRPOTrainer`` with Reinforce-Ada's multi-round sampling and whole-pool advantages.

How it plugs in (no trainer code is copied; TRL keeps its loss, logging, accelerate/DeepSpeed scaling and vLLM modes):

1. TRL's ``rollout_func`` hook. During training, TRL hands each process its generation batch (each prompt repeated
   ``num_generations`` = n times, whole groups per process). Our rollout builds one :class:`~reinforce_ada.Prompt` per
   group and runs :class:`~reinforce_ada.sampling.sampler.AdaptiveSampler` on them with

   * :class:`~reinforce_ada.integrations.trl.generation.TRLGenerator` -- generation through TRL's own
     ``_generate_single_turn`` (plain / vLLM server / vLLM colocate), all processes in lock-step per round, and
   * :class:`~reinforce_ada.integrations.trl.rewards.TRLRewardVerifier` -- the trainer's ``reward_funcs`` and
     ``reward_weights``.

   Each prompt is sampled in rounds of M until its exit rule holds (at most N rounds), its pool is downsampled to
   exactly n completions, and those n fill the prompt's n rows; the rollout returns their token ids (and vLLM's
   sampling log-probabilities).
2. A wrapper around ``_generate_and_score_completions``: it calls TRL's method unchanged (TRL computes old/ref
   log-probabilities, masks, reward metrics, ...) and then replaces the ``advantages`` it returns with TRL's formula
   (``scale_rewards``, ``multi_objective_aggregation``) evaluated on *pool* statistics, where the pool is every
   completion drawn for the prompt this step (:mod:`~reinforce_ada.integrations.trl.advantages`). It also logs the
   sampling metrics (``ada/*``) and makes TRL's ``num_tokens`` and ``completions/*`` count every generated completion
   (TRL's values for the kept rows move to ``ada/kept/*``; :mod:`~reinforce_ada.integrations.trl.metrics`).
3. ``_calculate_rewards`` returns the rewards already computed while sampling for the kept completions (each
   completion is scored once; ``log_extra`` columns logged while sampling follow the kept completions into TRL's
   completions table), unless ``rescore_kept`` asks TRL to call the reward functions again.

With ``mode="est"`` (Reinforce-Ada-Est) there are no rounds: the wrapper hands each step's rows out among its prompts
by the pass-rate memory before TRL generates, one completion per row, and replaces TRL's advantages with Est's,
grouped by prompt (:mod:`~reinforce_ada.integrations.trl.est`).

Evaluation is TRL's plain GRPO generation (one completion per row) and TRL's own advantages.

Exits and selection use the *correctness* functions (``correctness_reward_funcs``); the advantages use every reward
function with ``reward_weights``. A reward function that raises stops training, as in TRL.

Not supported (rejected at construction): a user ``rollout_func``, ``tools`` / ``environment_factory`` (multi-turn),
image prompts, and reward *models* under multi-process ZeRO-3 / FSDP (their forward is collective but pool sizes
differ per process). A generation failure ends the run (TRL needs a complete batch; processes cannot retry alone).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import warnings
from typing import Any

import numpy as np
import torch
from trl import GRPOTrainer

from reinforce_ada.config import ConfigError
from reinforce_ada.errors import CheckpointError
from reinforce_ada.integrations.trl import advantages as trl_advantages
from reinforce_ada.integrations.trl.config import AdaGRPOConfig
from reinforce_ada.integrations.trl.est import TRLEst, dataset_prompt
from reinforce_ada.integrations.trl.generation import PROMPT_IDS_KEY, TRLGenerator, use_valid_vllm_reload
from reinforce_ada.integrations.trl.metrics import SamplingMetricsMixin
from reinforce_ada.integrations.trl.rewards import ROW_KEY, RewardFunctionError, TRLRewardVerifier
from reinforce_ada.sampling.pools import weigh_advantages
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.types import Prompt, SampledBatch

logger = logging.getLogger(__name__)


def _model_name(model: Any) -> str:
    """The name TRL derives an ``args=None`` run's ``output_dir`` from."""
    name = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "")
    return str(name).split("/")[-1]


def reward_func_name(func: Any) -> str:
    """The name TRL gives a reward function (its ``rewards/<name>`` metric), before any reward model is loaded: a
    model id's last part, a model's ``name_or_path``'s, a function's ``__name__`` (through ``functools.partial``),
    else the class name.

    >>> import functools
    >>> def accuracy(completions, **kwargs): ...
    >>> reward_func_name("org/my-reward-model"), reward_func_name(functools.partial(accuracy, scale=2))
    ('my-reward-model', 'accuracy')
    """
    import functools

    if isinstance(func, str):
        return func.split("/")[-1]
    if isinstance(func, torch.nn.Module):
        return str(getattr(func.config, "_name_or_path", type(func).__name__)).split("/")[-1]
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def resolve_correctness(spec: list | None, names: list[str]) -> list[int]:
    """Indices of the reward functions named by ``correctness_reward_funcs`` (names or indices).

    >>> resolve_correctness(["accuracy"], ["format", "accuracy"]), resolve_correctness([0, "1"], ["a", "b"])
    ([1], [0, 1])
    """
    if spec is None:
        if len(names) != 1:
            raise ConfigError(
                f"there are {len(names)} reward functions ({names}); set correctness_reward_funcs to the one(s) that "
                "decide whether a completion is correct (correctness_reward_funcs=[name, ...], the names as listed): "
                "exits and balanced selection count correct completions, and a format reward would make every "
                "well-formatted completion count")
        return [0]
    indices = []
    for item in spec:
        if isinstance(item, str) and item in names:
            index = names.index(item)
        elif isinstance(item, int) or (isinstance(item, str) and item.lstrip("-").isdigit()):
            index = int(item)
            if not 0 <= index < len(names):
                raise ConfigError(f"correctness_reward_funcs: index {index} is out of range for {len(names)} "
                                  f"reward functions {names}")
        else:
            raise ConfigError(f"correctness_reward_funcs: {item!r} is not a reward function name (names: {names}) "
                              "or an index")
        if index not in indices:
            indices.append(index)
    return indices


class AdaGRPOTrainer(SamplingMetricsMixin, GRPOTrainer):
    """``GRPOTrainer`` whose training completions come from Reinforce-Ada's adaptive sampler.

    Takes exactly ``GRPOTrainer``'s arguments; ``args`` must be an :class:`AdaGRPOConfig`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        bound = inspect.signature(GRPOTrainer.__init__).bind(None, *args, **kwargs)
        params = dict(bound.arguments)
        params.pop("self")
        config = params.get("args")
        if config is None:  # as TRL: a default config named after the model
            config = params["args"] = AdaGRPOConfig(f"{_model_name(params.get('model'))}-GRPO")
        if not isinstance(config, AdaGRPOConfig):
            raise TypeError(f"AdaGRPOTrainer needs args=AdaGRPOConfig(...) (got {type(config).__name__}); "
                            "AdaGRPOConfig is GRPOConfig plus the sampling fields")
        for name in ("rollout_func", "tools", "environment_factory"):
            if params.get(name):
                raise ValueError(f"AdaGRPOTrainer does not support {name}=...: generation is driven by "
                                 "Reinforce-Ada's sampler (single-turn completions)")
        columns = getattr(params.get("train_dataset"), "column_names", None) or []
        if {"image", "images"} & set(columns):
            raise NotImplementedError("AdaGRPOTrainer does not support image prompts (the train_dataset has an "
                                      "image column): the sampler generates text-only rows")
        reward_funcs = params.get("reward_funcs")
        funcs = reward_funcs if isinstance(reward_funcs, list) else [] if reward_funcs is None else [reward_funcs]
        if config.correctness_reward_funcs is None and len(funcs) > 1:  # before any model is loaded
            resolve_correctness(None, [reward_func_name(f) for f in funcs])
        if config.advantage not in ("pool", "group"):
            raise ConfigError(f"advantage={config.advantage!r}: AdaGRPOTrainer computes TRL's advantages with a "
                              "'pool' or 'group' baseline only")
        params["rollout_func"] = self._ada_rollout
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(**params)
        self._check_reward_models()
        self.ada_vllm_reload = use_valid_vllm_reload(self)
        """Whether TRL's colocated vLLM engine takes the weights by vLLM's layer-wise reload (its CPU platform)."""
        self.ada_correctness = resolve_correctness(config.correctness_reward_funcs, list(self.reward_func_names))
        """Indices of the reward functions that decide correctness (exits, selection)."""
        self.ada_rescore_kept = bool(config.rescore_kept)
        self.ada_generator = TRLGenerator(self)
        self.ada_verifier = TRLRewardVerifier(self, self.ada_correctness, forward_logs=not self.ada_rescore_kept)
        sampler_config = config.sampler_config(self.accelerator.process_index)
        self.ada_est: TRLEst | None = None
        """Reinforce-Ada-Est's memory and step (``mode="est"``); None for the round-based sampler."""
        self.ada_sampler: AdaptiveSampler | None = None
        """The round-based sampler (``mode="rounds"``); None under Est."""
        if config.mode == "est":
            self.ada_est = TRLEst(sampler_config, self.num_generations)
            self._report_memory_seed(config.memory_seed, params.get("train_dataset"))
        else:
            self.ada_sampler = AdaptiveSampler(self.ada_generator, self.ada_verifier, sampler_config)
        self._ada_est_values: torch.Tensor | None = None
        self.ada_last_batch: SampledBatch | None = None
        """The sampler's result for this process's prompts at the last training generation (pools, groups, rounds)."""
        self.ada_history: list[dict[str, float]] = []
        """Per training generation on this process: local rounds, rounds run in lock-step, filler rows."""
        self.ada_advantages: torch.Tensor | None = None
        """The advantages of this process's rows at the last training generation, in the rollout's row order."""
        self.ada_kept_tokens_seen = 0
        """Prompt + completion tokens of the kept rows over all training generations (``ada/kept/num_tokens``)."""
        self._ada_inputs: list[dict[str, Any]] | None = None
        self._ada_kept_rewards: list[list[float]] | None = None
        self._ada_pool_completion_metrics: dict[str, float] | None = None
        self.ada_reward_calls_reused = 0
        """Training generations whose rewards TRL took from the sampler instead of calling the reward functions."""

    def _check_reward_models(self) -> None:
        if self.args.mode == "est":  # TRL scores Est's rows itself, the same number on every process
            return
        has_model = any(isinstance(f, torch.nn.Module) for f in self.reward_funcs)
        sharded = self.is_deepspeed_enabled or self.is_fsdp_enabled
        if has_model and sharded and self.accelerator.num_processes > 1:
            raise NotImplementedError(
                "AdaGRPOTrainer cannot score with a reward model under multi-process DeepSpeed/FSDP: its forward is "
                "collective but each process scores a different number of completions per round. Use reward "
                "functions, or serve the reward model and call it from a reward function.")

    def _warn_correctness_outside_unit(self, values: np.ndarray) -> None:
        """Say once, naming the functions, that a correctness reward left [0, 1]: such a score is not a pass rate, and
        what the memory, the exits and the gradient weight read of it is whether the correctness rewards' sum is above
        ``positive_threshold`` (docs/trl.md, "Rewards outside [0, 1]"). ``values``: ``(rows, K)``, NaN for None."""
        if getattr(self, "_ada_warned_reward_range", False):
            return
        scores = values[:, self.ada_correctness]
        outside = ~np.isnan(scores) & ((scores < 0) | (scores > 1))
        if not outside.any():
            return
        self._ada_warned_reward_range = True
        names = [self.reward_func_names[self.ada_correctness[k]] for k in np.flatnonzero(outside.any(axis=0))]
        warnings.warn(
            f"the correctness reward function(s) {names} returned values outside [0, 1] (e.g. "
            f"{float(scores[outside][0]):g}), which are not pass rates. A row counts as correct when the correctness "
            f"rewards sum above positive_threshold={self.args.positive_threshold}; exits, selection, Est's memory and "
            "every gradient weight read that, and the weight is evaluated at the share of a prompt's rows counted "
            "correct, never at the reward (a prompt with no correct row has pass rate 0: weight max_grad_weight under "
            "a weighted objective). Set positive_threshold or correctness_reward_funcs so that this means correct",
            UserWarning, stacklevel=2)

    def _report_memory_seed(self, path: str | None, dataset: Any) -> None:
        """Say how many of the training prompts ``memory_seed`` seeded; refuse a file that seeds none of them."""
        if path is None:
            return
        from reinforce_ada.sampling.memory import prompt_key

        rows = dataset if dataset is not None and hasattr(dataset, "__len__") else []  # an IterableDataset: unknown
        keys = {prompt_key(dataset_prompt(row)) for row in rows}
        seeded = sum(key in self.ada_est.memory for key in keys)  # type: ignore[union-attr]
        if keys and not seeded:
            raise ConfigError(f"memory_seed {path}: seeded 0 of the {len(keys)} training prompts (its keys are "
                              f"prompt_key(prompt, answer); was it made by select-prompts for other data?)")
        logger.info("Est's memory: seeded %d of the %d training prompts from %s", seeded, len(keys), path)

    # -- the hook: generation of a training batch ------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        training = self.model.training
        if self.ada_est is not None:
            return self._est_generate_and_score(inputs) if training else super()._generate_and_score_completions(
                inputs)
        self._ada_inputs = inputs if training else None
        self.ada_advantages = None
        self._ada_pool_completion_metrics = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._ada_inputs = None
        if training:
            advantages = self.ada_advantages
            if advantages is None or advantages.shape != output["advantages"].shape:
                raise RuntimeError("the Reinforce-Ada rollout did not produce one advantage per completion row")
            output["advantages"] = advantages.to(output["advantages"].device, output["advantages"].dtype)
            self._replace_logged_advantages(output["advantages"])
            self._replace_completion_metrics()
        return output

    def _est_generate_and_score(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """A training generation under Est: rows handed out by the memory, TRL's generation, rewards and log-probs on
        them, then Est's advantages grouped by prompt (:mod:`~reinforce_ada.integrations.trl.est`)."""
        from accelerate.utils import gather_object

        est = self.ada_est
        assert est is not None
        accelerator = self.accelerator
        rows = est.assign_rows(inputs, gather_object, accelerator.process_index, accelerator.num_processes)
        self._ada_est_values = None
        try:
            output = super()._generate_and_score_completions(rows)
            values = self._ada_est_values
            if values is None:
                raise RuntimeError("TRL did not score the rows through _calculate_rewards")
        except BaseException:
            est.step = None  # the step's allocation dies with it; the memory is as it was
            raise
        finally:
            self._ada_est_values = None
        local_rows = est.step.local_rows  # type: ignore[union-attr]
        self._warn_correctness_outside_unit(values.detach().cpu().double().numpy())
        advantages, metrics = est.finish(
            values.detach().cpu().double().numpy(), weights=self.reward_weights.detach().cpu().double().numpy(),
            correctness=self.ada_correctness, aggregation=self.args.multi_objective_aggregation,
            scale_rewards=self.args.scale_rewards, epsilon=self.args.advantage_epsilon)
        output["advantages"] = torch.tensor(advantages[local_rows], dtype=output["advantages"].dtype,
                                            device=output["advantages"].device)
        # TRL grouped its (discarded) advantages and frac_reward_zero_std by blocks of num_generations rows
        logged = self._logs["advantages"]  # a bounded deque
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        train_metrics = self._metrics["train"]
        if train_metrics.get("frac_reward_zero_std"):
            train_metrics["frac_reward_zero_std"][-1] = metrics.pop("frac_reward_zero_std")
        for name, value in metrics.items():
            train_metrics[f"ada/est/{name}"].append(value)
        return output

    def _ada_rollout(self, prompts: list, trainer: Any = None) -> dict[str, Any]:
        """TRL's ``rollout_func``: adaptive sampling in training, one completion per row in evaluation and under
        Est (whose rows were handed out before generation)."""
        if self._ada_inputs is None:  # evaluation, Est, or a call outside training: TRL's plain GRPO generation
            prompt_ids, _, _ = self._tokenize_prompts(prompts)
            mode = "train" if self.model.training else "eval"
            num_generations = self.num_generations if mode == "train" else self.num_generations_eval
            if self.ada_est is not None and mode == "train":
                num_generations = 1  # each row is one of its prompt's N_x samples
            completion_ids, logprobs = self._generate_single_turn(prompt_ids, None, {}, num_generations)
            return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

        n = self.num_generations
        groups_prompts = self._group_prompts(prompts, self._ada_inputs)
        unique_prompt_ids, images, _ = self._tokenize_prompts([p.prompt for p in groups_prompts])
        if images is not None:
            raise NotImplementedError("AdaGRPOTrainer does not support image prompts")
        for prompt, ids in zip(groups_prompts, unique_prompt_ids):
            prompt.metadata[PROMPT_IDS_KEY] = list(ids)

        self.ada_generator.reset(unique_prompt_ids[0])
        self.ada_verifier.reset()
        self._ada_kept_rewards = None
        # An error raises here without idling: the launcher then stops the other processes (joining their collectives
        # could mask the error or hang).
        try:
            batch = self.ada_sampler.sample(groups_prompts)
        except RewardFunctionError as raised:  # as in TRL, a raising reward function stops training
            raise raised.error from None
        self.ada_generator.finish()  # idle in lock-step until every process has finished sampling
        if batch.generation_error is not None:
            raise RuntimeError(f"generation failed during Reinforce-Ada sampling: {batch.generation_error}")
        by_id = {g.prompt_id: g for g in batch.groups}
        prompt_ids, completion_ids, logprobs = [], [], []
        for prompt in groups_prompts:
            group = by_id.get(prompt.prompt_id)
            if group is None or len(group.completions) != n:
                size = 0 if group is None else len(group.completions)
                raise RuntimeError(f"prompt {prompt.prompt_id!r} kept {size} completions; TRL needs exactly "
                                   f"num_generations={n} (is a custom selection rule returning fewer?)")
            for completion in group.completions:
                prompt_ids.append(prompt.metadata[PROMPT_IDS_KEY])
                completion_ids.append(list(completion.token_ids))
                logprobs.append(completion.logprobs)
        if [g.prompt_id for g in batch.groups] != [p.prompt_id for p in groups_prompts]:
            raise RuntimeError("the sampler returned groups out of prompt order")
        if any(lp is None for lp in logprobs):
            logprobs = None

        kept = [c for g in batch.groups for c in g.completions]
        if not self.ada_rescore_kept:
            values = [self.ada_verifier.values_for(c) for c in kept]
            self._ada_kept_rewards = None if any(v is None for v in values) else values  # type: ignore[assignment]
            self._hand_over_extra_logs(kept)
        self.ada_last_batch = batch
        advantages, totals = self._compute_advantages(batch, groups_prompts)
        if batch.weights is not None:
            advantages = advantages * batch.weights
        self.ada_advantages = torch.tensor(advantages, dtype=torch.float32)
        self._log_sampling_metrics(batch, totals)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
        """The kept completions' rewards from the sampler (gathered like TRL's), else TRL's own scoring."""
        kept, self._ada_kept_rewards = self._ada_kept_rewards, None
        if kept is None or not self.model.training or len(kept) != len(prompts):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            if self.ada_est is not None and self.model.training:
                self._ada_est_values = rewards  # every process's rows, gathered by TRL: Est's advantages need them
            return rewards
        from accelerate.utils import gather

        self.ada_reward_calls_reused += 1
        local = torch.tensor(kept, dtype=torch.float32, device=self.accelerator.device).view(len(prompts), -1)
        return gather(local)

    # -- checkpoints: the sampler's selection RNG travels with TRL's RNG states ---------------------------------------
    def _sampler_state_file(self, directory: str) -> str:
        return os.path.join(directory, f"ada_sampler_state_{self.args.process_index}.json")

    def _save_rng_state(self, output_dir: str) -> None:
        super()._save_rng_state(output_dir)
        state = ({"est": self.ada_est.state_dict()} if self.ada_est is not None else
                 {"sampler": self.ada_sampler.state_dict(), "kept_tokens_seen": self.ada_kept_tokens_seen})
        with open(self._sampler_state_file(output_dir), "w") as f:
            json.dump(state, f)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        """TRL's RNG states, then this process's sampler state (the selection RNG, or Est's memory) from the same
        checkpoint. A checkpoint without the file (one TRL's ``GRPOTrainer`` saved, or with fewer processes) stops the
        resume naming the way out, unless ``resume_without_sampler_state``; a file that cannot be read stops it naming
        the file."""
        super()._load_rng_state(checkpoint)
        if checkpoint is None:
            return
        path = self._sampler_state_file(checkpoint)
        what = "Est's pass-rate memory" if self.ada_est is not None else "the sampler's selection RNG"
        if not os.path.isfile(path):
            if self.args.resume_without_sampler_state:
                logger.warning("no Reinforce-Ada sampler state in %s (resume_without_sampler_state=True): %s starts "
                               "afresh", checkpoint, what)
                return
            raise CheckpointError(f"{path} does not exist: this checkpoint was not saved by AdaGRPOTrainer (or with "
                                  f"fewer processes), so {what} cannot be restored and the resumed run would not "
                                  f"continue the one that saved it; resume from a checkpoint AdaGRPOTrainer saved, or "
                                  f"set resume_without_sampler_state=True to start {what} afresh")
        try:
            with open(path, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, ValueError) as err:
            raise CheckpointError(f"{path} cannot be read ({err}): the checkpoint is damaged (a write cut short?); "
                                  f"resume from an earlier checkpoint") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"{path} holds {type(state).__name__}, not a sampler state")
        if self.ada_est is not None and "est" not in state:
            if "sampler" in state:
                raise CheckpointError(f"{path} holds the round-based sampler's state, not Est's memory: this "
                                      f"checkpoint was written with mode='rounds'")
            raise CheckpointError(f"{path} holds no Est memory (no 'est'; keys: {sorted(state) or 'none'}): the "
                                  f"file is damaged: resume from an earlier checkpoint")
        if self.ada_est is None and "est" in state:
            raise CheckpointError(f"{path} holds Est's memory: this checkpoint was written with mode='est'")
        try:
            if self.ada_est is not None:
                self.ada_est.load_state_dict(state["est"])
            else:
                self.ada_sampler.load_state_dict(state.get("sampler", state))
                self.ada_kept_tokens_seen = int(state.get("kept_tokens_seen", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            detail = f"no {err}" if isinstance(err, KeyError) else str(err)
            raise CheckpointError(f"{path}: {what} cannot be read from it ({detail}); the file is damaged: resume "
                                  f"from an earlier checkpoint") from None

    # -- helpers ------------------------------------------------------------------------------------------------------
    def _group_prompts(self, prompts: list, inputs: list[dict[str, Any]]) -> list[Prompt]:
        """One :class:`Prompt` per group of ``num_generations`` consecutive rows (checked to share a prompt)."""
        n = self.num_generations
        if len(prompts) % n != 0:
            raise RuntimeError(f"this process got {len(prompts)} rows, not a multiple of num_generations={n}")
        groups = []
        for g in range(len(prompts) // n):
            block = prompts[g * n:(g + 1) * n]
            if any(p != block[0] for p in block[1:]):
                raise RuntimeError(f"rows {g * n}..{(g + 1) * n - 1} of this process's batch are not one prompt "
                                   "repeated num_generations times; AdaGRPOTrainer needs whole groups per process")
            row = dict(inputs[g * n])
            answer = row.get("answer", row.get("solution"))
            groups.append(Prompt(prompt_id=g, prompt=block[0], answer=answer, metadata={ROW_KEY: row}))
        return groups

    def _reward_table(self, batch: SampledBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-function rewards ``(R, K)`` of the baseline rows (each kept group's whole pool, or the group itself),
        the row -> group index, and the row of every kept completion (in the rollout's row order)."""
        rows, set_index, kept_rows = [], [], []
        for j, group in enumerate(batch.groups):
            members = (batch.pools[group.prompt_id].completions if self.args.advantage == "pool"
                       else group.completions)
            position = {id(c): len(rows) + i for i, c in enumerate(members)}
            rows.extend(members)
            set_index.extend([j] * len(members))
            kept_rows.extend(position[id(c)] for c in group.completions)
        values = np.array([self.ada_verifier.values_for(c) for c in rows], dtype=np.float64)
        return values.reshape(len(rows), len(self.reward_funcs)), np.array(set_index), np.array(kept_rows)

    def _compute_advantages(self, batch: SampledBatch, prompts: list[Prompt]) -> tuple[np.ndarray, dict[str, float]]:
        """TRL's advantage formula on pool statistics for the kept rows, and the step's totals over processes."""
        args = self.args
        weights = self.reward_weights.detach().cpu().double().numpy()
        values, set_index, kept_rows = self._reward_table(batch)
        self._warn_correctness_outside_unit(values)
        combined = trl_advantages.combine_rewards(values, weights, set_index, aggregation=args.multi_objective_aggregation,
                                                  epsilon=args.advantage_epsilon)
        totals = self._gather_step_statistics(batch, prompts, trl_advantages.moments(combined))
        batch_mean, batch_std = trl_advantages.mean_std(
            np.array([totals["batch_count"], totals["batch_sum"], totals["batch_squares"]]))
        advantages = trl_advantages.advantages(combined, set_index, aggregation=args.multi_objective_aggregation,
                                               scale_rewards=args.scale_rewards, batch_mean=batch_mean,
                                               batch_std=batch_std, epsilon=args.advantage_epsilon)
        if self.ada_sampler.config.weights_gradient:  # Seq's explicit weight (v3 Sec. 3.2) at the pool's pass rate
            pass_rate = np.array([g.pool_num_positive / g.pool_count for g in batch.groups])[set_index]
            advantages, grad_metrics = weigh_advantages(advantages, pass_rate, self.ada_sampler.config)
            for name, value in grad_metrics.items():
                self._metrics["train"][f"ada/{name}"].append(value)
        return advantages[kept_rows], totals
