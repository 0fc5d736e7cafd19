"""``AdaGRPOTrainer``: TRL's ``GRPOTrainer`` with Reinforce-Ada's multi-round sampling and whole-pool advantages.

How it plugs in (no trainer code is copied; TRL keeps its loss, logging, accelerate/DeepSpeed scaling and vLLM modes):

1. TRL's ``rollout_func`` hook. During training, TRL hands each process its generation batch (each prompt repeated
   ``num_generations`` = n times, whole groups per process). Our rollout builds one :class:`~reinforce_ada.Prompt` per
   group and runs :class:`~reinforce_ada.sampler.AdaptiveSampler` on them with

   * :class:`~reinforce_ada.integrations.trl.generation.TRLGenerator` -- generation through TRL's own
     ``_generate_single_turn`` (plain / vLLM server / vLLM colocate), all processes in lock-step per round, and
   * :class:`~reinforce_ada.integrations.trl.rewards.TRLRewardVerifier` -- the trainer's ``reward_funcs`` and
     ``reward_weights``.

   Each prompt is sampled in rounds of M until its exit rule holds (at most N rounds), its pool is downsampled to
   exactly n completions, and those n fill the prompt's n rows; the rollout returns their token ids (and vLLM's
   sampling log-probabilities).
2. A wrapper around ``_generate_and_score_completions``: it calls TRL's method unchanged (TRL computes old/ref
   log-probabilities, masks, reward metrics, ...) and then replaces the ``advantages`` it
   returns with the sampler's: ``A = r - mean(pool)`` (``/ (std(pool) + eps)`` with ``normalize_std``), where the pool
   is every completion drawn for the prompt this step. It also logs the sampling metrics (``ada/*``).
3. ``_calculate_rewards`` returns the rewards already computed while sampling for the kept completions (each
   completion is scored once), unless ``rescore_kept`` asks TRL to call the reward functions again.

Evaluation is TRL's plain GRPO generation (one completion per row) and TRL's own advantages.

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

import torch
from trl import GRPOTrainer

from reinforce_ada.integrations.trl.config import AdaGRPOConfig
from reinforce_ada.integrations.trl.generation import PROMPT_IDS_KEY, TRLGenerator
from reinforce_ada.integrations.trl.rewards import ROW_KEY, TRLRewardVerifier
from reinforce_ada.sampler import AdaptiveSampler
from reinforce_ada.types import Prompt, SampledBatch

logger = logging.getLogger(__name__)

METRIC_PREFIX = "ada/"


class AdaGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose training completions come from Reinforce-Ada's adaptive sampler.

    Takes exactly ``GRPOTrainer``'s arguments; ``args`` must be an :class:`AdaGRPOConfig`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        bound = inspect.signature(GRPOTrainer.__init__).bind(None, *args, **kwargs)
        params = dict(bound.arguments)
        params.pop("self")
        config = params.get("args")
        if not isinstance(config, AdaGRPOConfig):
            raise TypeError(f"AdaGRPOTrainer needs args=AdaGRPOConfig(...) (got {type(config).__name__}); "
                            "AdaGRPOConfig is GRPOConfig plus the sampling fields")
        for name in ("rollout_func", "tools", "environment_factory"):
            if params.get(name):
                raise ValueError(f"AdaGRPOTrainer does not support {name}=...: generation is driven by "
                                 "Reinforce-Ada's sampler (single-turn completions)")
        params["rollout_func"] = self._ada_rollout
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(**params)
        self._check_reward_models()
        self.ada_generator = TRLGenerator(self)
        self.ada_verifier = TRLRewardVerifier(self)
        self.ada_sampler = AdaptiveSampler(self.ada_generator, self.ada_verifier,
                                           config.sampler_config(self.accelerator.process_index))
        self.ada_last_batch: SampledBatch | None = None
        """The sampler's result for this process's prompts at the last training generation (pools, groups, rounds)."""
        self.ada_history: list[dict[str, float]] = []
        """Per training generation on this process: local rounds, rounds run in lock-step, filler rows."""
        self._ada_inputs: list[dict[str, Any]] | None = None
        self._ada_advantages: torch.Tensor | None = None
        self._ada_kept_rewards: list[list[float]] | None = None
        self.ada_rescore_kept = config.rescore_kept if config.rescore_kept is not None else self._rewards_log()
        self.ada_reward_calls_reused = 0
        """Training generations whose rewards TRL took from the sampler instead of calling the reward functions."""

    def _rewards_log(self) -> bool:
        """Does a reward function take ``log_extra`` / ``log_metric`` by name (so it wants TRL's own call)?"""
        for func in self.reward_funcs:
            if isinstance(func, torch.nn.Module):
                continue
            try:
                names = inspect.signature(func).parameters
            except (TypeError, ValueError):
                continue
            if "log_extra" in names or "log_metric" in names:
                return True
        return False

    def _check_reward_models(self) -> None:
        has_model = any(isinstance(f, torch.nn.Module) for f in self.reward_funcs)
        sharded = self.is_deepspeed_enabled or self.is_fsdp_enabled
        if has_model and sharded and self.accelerator.num_processes > 1:
            raise NotImplementedError(
                "AdaGRPOTrainer cannot score with a reward model under multi-process DeepSpeed/FSDP: its forward is "
                "collective but each process scores a different number of completions per round. Use reward "
                "functions, or serve the reward model and call it from a reward function.")

    # -- the hook: generation of a training batch ------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        training = self.model.training
        self._ada_inputs = inputs if training else None
        self._ada_advantages = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._ada_inputs = None
        if training:
            advantages = self._ada_advantages
            if advantages is None or advantages.shape != output["advantages"].shape:
                raise RuntimeError("the Reinforce-Ada rollout did not produce one advantage per completion row")
            output["advantages"] = advantages.to(output["advantages"].device, output["advantages"].dtype)
            self._replace_logged_advantages(output["advantages"])
        return output

    def _ada_rollout(self, prompts: list, trainer: Any = None) -> dict[str, Any]:
        """TRL's ``rollout_func``: adaptive sampling in training, one completion per row in evaluation."""
        if self._ada_inputs is None:  # evaluation (or a call outside training): TRL's plain GRPO generation
            prompt_ids, _, _ = self._tokenize_prompts(prompts)
            mode = "train" if self.model.training else "eval"
            num_generations = self.num_generations if mode == "train" else self.num_generations_eval
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
        batch = self.ada_sampler.sample(groups_prompts)
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

        if not self.ada_rescore_kept:
            kept = [self.ada_verifier.values_for(c) for g in batch.groups for c in g.completions]
            self._ada_kept_rewards = None if any(v is None for v in kept) else kept  # type: ignore[assignment]
        advantages = batch.advantages if batch.weights is None else batch.advantages * batch.weights
        self._ada_advantages = torch.tensor(advantages, dtype=torch.float32)
        self.ada_last_batch = batch
        self._log_sampling_metrics(batch)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
        """The kept completions' rewards from the sampler (gathered like TRL's), else TRL's own scoring."""
        kept, self._ada_kept_rewards = self._ada_kept_rewards, None
        if kept is None or not self.model.training or len(kept) != len(prompts):
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        from accelerate.utils import gather

        self.ada_reward_calls_reused += 1
        local = torch.tensor(kept, dtype=torch.float32, device=self.accelerator.device).view(len(prompts), -1)
        return gather(local)

    # -- checkpoints: the sampler's selection RNG travels with TRL's RNG states ---------------------------------------
    def _sampler_state_file(self, directory: str) -> str:
        return os.path.join(directory, f"ada_sampler_state_{self.args.process_index}.json")

    def _save_rng_state(self, output_dir: str) -> None:
        super()._save_rng_state(output_dir)
        with open(self._sampler_state_file(output_dir), "w") as f:
            json.dump(self.ada_sampler.state_dict(), f)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        super()._load_rng_state(checkpoint)
        if checkpoint is None:
            return
        path = self._sampler_state_file(checkpoint)
        if not os.path.isfile(path):
            logger.warning("no Reinforce-Ada sampler state in %s; the sampler's selection RNG starts from "
                           "sampler_seed", checkpoint)
            return
        with open(path) as f:
            self.ada_sampler.load_state_dict(json.load(f))

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

    def _log_sampling_metrics(self, batch: SampledBatch) -> None:
        """Log the step's sampling metrics, aggregated over processes (a collective, entered once per step)."""
        pools = batch.pools.values()
        local = {
            "num_prompts": float(batch.num_prompts),
            "total_samples": float(sum(p.num_drawn for p in pools)),
            "num_exited": float(sum(p.exited for p in pools)),
            "num_zero_variance": float(sum(not g.has_signal for g in batch.groups)),
            "num_groups": float(len(batch.groups)),
            "reward_sum": float(sum(p.mean * p.count for p in pools)),
            "reward_count": float(sum(p.count for p in pools)),
            "num_verifier_failures": float(sum(p.num_verifier_failures for p in pools)),
            "rounds_local": float(len(batch.rounds)),
        }
        keys = list(local)
        values = torch.tensor([local[k] for k in keys], dtype=torch.float64, device=self.accelerator.device)
        gathered = self.accelerator.gather(values.unsqueeze(0)).view(-1, len(keys)).cpu()
        total = dict(zip(keys, gathered.sum(dim=0).tolist()))
        rounds_max = float(gathered[:, keys.index("rounds_local")].max().item())
        metrics = {
            "samples_per_prompt": total["total_samples"] / total["num_prompts"],
            "rounds": rounds_max,
            "zero_variance_fraction": total["num_zero_variance"] / max(total["num_groups"], 1.0),
            "exited_fraction": total["num_exited"] / total["num_prompts"],
            "pool_reward_mean": total["reward_sum"] / max(total["reward_count"], 1.0),
            "verifier_failures": total["num_verifier_failures"],
        }
        for name, value in metrics.items():
            self._metrics["train"][METRIC_PREFIX + name].append(value)
        self.ada_history.append({"rounds_local": local["rounds_local"],
                                 "rounds_in_step": float(self.ada_generator.num_rounds),
                                 "rounds_max": rounds_max,
                                 "filler_rows": float(self.ada_generator.num_filler_rows)})

    def _replace_logged_advantages(self, advantages: torch.Tensor) -> None:
        """TRL logged its own (discarded) group advantages in the completions table; log the trained ones instead."""
        all_advantages = self.accelerator.gather(advantages).tolist()
        logged = self._logs["advantages"]
        for _ in range(min(len(all_advantages), len(logged))):
            logged.pop()
        logged.extend(all_advantages)
