"""The sampling metrics ``AdaGRPOTrainer`` adds to TRL's logs, and the TRL logs it corrects.

One collective per step (:meth:`SamplingMetricsMixin._gather_step_statistics`) sums this process's counts -- prompts,
samples, exits, zero-variance groups, rewards, verifier failures, generated and kept tokens, completion lengths --
over every process; from those totals the trainer logs ``ada/*`` (sampling) and replaces TRL's ``completions/*`` and
``num_tokens`` so that they describe *every generated* completion, not only the kept rows (those move to
``ada/kept/*``). The completions table gets the trained advantages and the ``log_extra`` columns of the kept
completions.

A mixin of :class:`~reinforce_ada.integrations.trl.trainer.AdaGRPOTrainer`: it reads the trainer's TRL state
(``accelerator``, ``state``, ``_metrics``, ``_logs``, ``_pending_extra_logs``, ``reward_funcs``, ``reward_weights``,
``_tokenizer``) and the trainer's own ``ada_verifier``, ``ada_generator``, ``ada_correctness``, ``ada_history`` and
``ada_kept_tokens_seen``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from reinforce_ada.integrations.trl import advantages as trl_advantages
from reinforce_ada.integrations.trl.generation import PROMPT_IDS_KEY, eos_token_ids
from reinforce_ada.types import Prompt, SampledBatch

METRIC_PREFIX = "ada/"
KEPT_PREFIX = METRIC_PREFIX + "kept/"
"""TRL's completion metrics of the kept rows only (TRL's own keys describe everything generated)."""
COMPLETION_METRICS = ("completions/mean_length", "completions/min_length", "completions/max_length",
                      "completions/clipped_ratio", "completions/mean_terminated_length",
                      "completions/min_terminated_length", "completions/max_terminated_length")


class SamplingMetricsMixin:
    """Step statistics over every process, the ``ada/*`` metrics, and the TRL logs they correct."""

    def _gather_step_statistics(self, batch: SampledBatch, prompts: list[Prompt], batch_moments: np.ndarray
                                ) -> dict[str, float]:
        """This step's counts over every process (one collective): sampling, rewards, tokens and lengths."""
        pools = list(batch.pools.values())
        prompt_len = {p.prompt_id: len(p.metadata[PROMPT_IDS_KEY]) for p in prompts}
        drawn = [c for p in pools for c in p.completions]
        kept = [c for g in batch.groups for c in g.completions]
        weights = self.reward_weights.detach().cpu().double().numpy()

        def raw_rewards(completions: list) -> np.ndarray:  # TRL's "reward": the weighted sum
            values = np.array([self.ada_verifier.values_for(c) for c in completions], dtype=np.float64)
            values = values.reshape(len(completions), len(self.reward_funcs))
            return trl_advantages.combine_rewards(values, weights, np.zeros(len(completions)),
                                                  aggregation="sum_then_normalize")

        pool_rewards = raw_rewards(drawn)
        num_zero_variance = 0
        for group in batch.groups:
            rewards = raw_rewards(group.completions)
            rewards = rewards[~np.isnan(rewards)]
            num_zero_variance += int(len(rewards) < 2 or float(rewards.max() - rewards.min()) <= 1e-12)
        end_ids = {*eos_token_ids(self), self._tokenizer.pad_token_id}
        lengths = np.array([len(c.token_ids) for c in drawn], dtype=np.float64)
        truncated = np.array([bool(c.token_ids) and c.token_ids[-1] not in end_ids for c in drawn], dtype=bool)
        terminated = lengths[~truncated]
        sums = {
            "num_prompts": batch.num_prompts, "total_samples": sum(p.num_drawn for p in pools),
            "num_exited": sum(p.exited for p in pools), "num_groups": len(batch.groups),
            "num_zero_variance": num_zero_variance,
            "reward_sum": float(np.nansum(pool_rewards)), "reward_count": int((~np.isnan(pool_rewards)).sum()),
            "num_verifier_failures": sum(p.num_verifier_failures for p in pools),
            "num_positive": sum(p.num_positive for p in pools), "num_scored": sum(p.count for p in pools),
            "batch_count": batch_moments[0], "batch_sum": batch_moments[1], "batch_squares": batch_moments[2],
            "generated_tokens": sum(prompt_len[c.prompt_id] + len(c.token_ids) for c in drawn)
            + self.ada_generator.num_filler_tokens,
            "kept_tokens": sum(prompt_len[c.prompt_id] + len(c.token_ids) for c in kept),
            "length_count": len(lengths), "length_sum": float(lengths.sum()), "num_truncated": int(truncated.sum()),
            "terminated_count": len(terminated), "terminated_sum": float(terminated.sum()),
        }
        extremes = {
            "rounds_max": (len(batch.rounds), max),
            "length_min": (lengths.min() if len(lengths) else math.inf, min),
            "length_max": (lengths.max() if len(lengths) else -math.inf, max),
            "terminated_min": (terminated.min() if len(terminated) else math.inf, min),
            "terminated_max": (terminated.max() if len(terminated) else -math.inf, max),
        }
        keys = list(sums) + list(extremes)
        local = [float(sums[k]) for k in sums] + [float(v) for v, _ in extremes.values()]
        values = torch.tensor(local, dtype=torch.float64, device=self.accelerator.device)
        gathered = self.accelerator.gather(values.unsqueeze(0)).view(-1, len(keys)).cpu()
        totals = {k: float(gathered[:, i].sum()) for i, k in enumerate(sums)}
        for i, (key, (_, reduce)) in enumerate(extremes.items(), start=len(sums)):
            totals[key] = float(reduce(gathered[:, i].tolist()))
        return totals

    def _log_sampling_metrics(self, batch: SampledBatch, totals: dict[str, float]) -> None:
        """Log the step's sampling metrics and account the generated tokens (``totals`` span every process)."""
        metrics = {
            "samples_per_prompt": totals["total_samples"] / totals["num_prompts"],
            "rounds": totals["rounds_max"],
            "zero_variance_fraction": totals["num_zero_variance"] / max(totals["num_groups"], 1.0),
            "exited_fraction": totals["num_exited"] / totals["num_prompts"],
            "positive_fraction": totals["num_positive"] / max(totals["num_scored"], 1.0),
            "pool_reward_mean": totals["reward_sum"] / max(totals["reward_count"], 1.0),
            "verifier_failures": totals["num_verifier_failures"],
        }
        if totals["num_scored"] > 0 and totals["num_positive"] == totals["num_scored"]:
            names = [self.reward_func_names[i] for i in self.ada_correctness]
            warnings.warn(
                f"every completion of this step counts as correct ({names} > positive_threshold="
                f"{self.args.positive_threshold}): exits and selection see no incorrect completions. If that is not "
                "true, check correctness_reward_funcs and positive_threshold", UserWarning, stacklevel=2)
        # TRL adds the kept rows' tokens to num_input_tokens_seen right after this rollout; add the rest now, so that
        # its num_tokens counts everything generated (every pool, and any filler rows).
        self.state.num_input_tokens_seen += int(totals["generated_tokens"] - totals["kept_tokens"])
        self.ada_kept_tokens_seen += int(totals["kept_tokens"])
        for name, value in metrics.items():
            self._metrics["train"][METRIC_PREFIX + name].append(value)
        self._metrics["train"][KEPT_PREFIX + "num_tokens"] = [float(self.ada_kept_tokens_seen)]  # cumulative, as TRL's
        count, terminated = totals["length_count"], totals["terminated_count"]
        self._ada_pool_completion_metrics = {
            "completions/mean_length": totals["length_sum"] / max(count, 1.0),
            "completions/min_length": totals["length_min"] if count else 0.0,
            "completions/max_length": totals["length_max"] if count else 0.0,
            "completions/clipped_ratio": totals["num_truncated"] / max(count, 1.0),
            # TRL logs 0 for the terminated lengths when no completion terminated
            "completions/mean_terminated_length": totals["terminated_sum"] / terminated if terminated else 0.0,
            "completions/min_terminated_length": totals["terminated_min"] if terminated else 0.0,
            "completions/max_terminated_length": totals["terminated_max"] if terminated else 0.0,
        }
        self.ada_history.append({"rounds_local": float(len(batch.rounds)),
                                 "rounds_in_step": float(self.ada_generator.num_rounds),
                                 "rounds_max": totals["rounds_max"],
                                 "filler_rows": float(self.ada_generator.num_filler_rows)})

    def _replace_completion_metrics(self) -> None:
        """TRL's ``completions/*`` describe every generated completion; its kept-row values move to ``ada/kept/``."""
        pool = self._ada_pool_completion_metrics
        if pool is None:
            return
        logged = self._metrics["train"]
        for key, value in pool.items():
            if logged.get(key):
                logged[KEPT_PREFIX + key].append(logged[key][-1])
                logged[key][-1] = value

    def _hand_over_extra_logs(self, kept: list) -> None:
        """``log_extra`` columns logged while sampling, for the kept completions in row order (TRL's table)."""
        columns: list[str] = []
        for completion in kept:
            columns.extend(c for c in self.ada_verifier.extras_for(completion) if c not in columns)
        for column in columns:
            self._pending_extra_logs[column].extend(self.ada_verifier.extras_for(c).get(column) for c in kept)

    def _replace_logged_advantages(self, advantages: torch.Tensor) -> None:
        """TRL logged its own (discarded) group advantages in the completions table; log the trained ones instead."""
        all_advantages = self.accelerator.gather(advantages).tolist()
        logged = self._logs["advantages"]
        for _ in range(min(len(all_advantages), len(logged))):
            logged.pop()
        logged.extend(all_advantages)
