"""Run the adaptive sampler on verl's rollout and hand the trainer exactly ``n`` rows per prompt.

verl's trainer asks for ``n`` completions per prompt by calling ``generate_sequences`` once on the prompt batch
repeated ``n`` times. :class:`ReinforceAdaRollout` answers that same call, in rounds (Reinforce-Ada, Alg. 1):

1. group the request's rows by ``uid`` -> one :class:`Prompt` per prompt (:mod:`.convert`);
2. round ``r``: send each still-active prompt's row ``M`` times (``samples_per_round``) to the wrapped rollout's
   ``generate_sequences`` -- verl's agent-loop manager (which splits a round over its workers unevenly, so nothing
   is padded) or a worker group; for a rollout that needs equal chunks, ``size_divisor`` > 1 pads a round by
   repeating rows: those rows *are* generated (counted in ``reinforce_ada/generation_padding_rows``) and their
   outputs are discarded before anything is scored, so they never enter a pool;
3. score the new completions (:class:`RolloutRewardVerifier`: the reward verl's reward loop attached as
   ``rm_scores``, or a reward function called on the rows) and let the core sampler decide exits;
4. after at most ``N`` rounds, downsample each pool to ``n`` and return a DataProto with the request's row count,
   each prompt's rows at the positions it held, ``rm_scores`` holding the reward and ``reward_baselines`` the
   whole-pool statistics for the ``reinforce_ada`` estimator. A prompt whose group is short fills the remaining
   positions with masked padding rows (``response_mask`` 0), never with trainable duplicates.

Nothing here knows which backend generated the rows: the generator only needs verl's
``generate_sequences(prompts: DataProto) -> DataProto`` with one output row per input row, in order.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Hashable, Sequence

import numpy as np
import torch

from reinforce_ada.config import SamplerConfig
from reinforce_ada.integrations.verl.convert import (
    PAD_KEY,
    assemble_training_batch,
    completions_from_dataproto,
    prompt_lengths,
    prompts_from_dataproto,
    response_lengths,
)
from reinforce_ada.integrations.verl.metrics import combine_round_timing, sequence_metrics
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.protocols import GenerationRequest, Verifier, VerifierError
from reinforce_ada.types import Completion, Prompt, SampledBatch
from reinforce_ada.verifiers.base import checked_rewards

logger = logging.getLogger(__name__)

MISSING_SCORES = (
    "the rollout returned rows without rm_scores and no reward_fn was given: use a rule-based reward or a reward model "
    "with its own resource pool (reward.reward_model.enable_resource_pool=True) so verl scores during generation, or "
    "pass reward_fn to ReinforceAdaRollout"
)

RewardFn = Callable[[Any], Any]
"""``reward_fn(rows: DataProto) -> DataProto with "rm_scores" | Tensor (B,) | Tensor (B, T)``."""


def _concat(parts: list[Any]) -> Any:
    from verl import DataProto

    return parts[0] if len(parts) == 1 else DataProto.concat(parts)


class VerlRolloutGenerator:
    """Our :class:`~reinforce_ada.sampling.protocols.Generator` on top of verl's ``generate_sequences``.

    ``source`` is the request DataProto (one row per prompt is sent, repeated ``num_samples`` times); every output is
    kept in :attr:`outputs` so kept completions can be gathered back by row without copying tensors.
    """

    def __init__(self, rollout: Any, source: Any, prompt_rows: dict[Hashable, int], *, size_divisor: int = 1,
                 tokenizer: Any = None, meta_info: dict | None = None, require_scores: bool = False):
        if not callable(getattr(rollout, "generate_sequences", None)):
            raise TypeError("rollout must have verl's generate_sequences(prompts) method "
                            f"(got {type(rollout).__name__})")
        if not isinstance(size_divisor, int) or size_divisor < 1:
            raise ValueError(f"size_divisor must be a positive integer (got {size_divisor!r})")
        self.rollout = rollout
        self.source = source
        self.prompt_rows = prompt_rows
        self.size_divisor = size_divisor
        self.tokenizer = tokenizer
        self.meta_info = dict(meta_info or {})
        self.require_scores = require_scores
        self.outputs: list[Any] = []
        self.first_rows: dict[Hashable, int] = {}
        """The first generated row of each prompt (padding rows copy it when a group is short)."""
        self.num_rows = 0
        self.num_padding_rows = 0
        self.round_timing: list[dict[str, float]] = []
        """Each call's ``meta_info["timing"]`` (verl's agent loop reports per-sample max / min / mean there)."""
        self.round_rows: list[int] = []
        self.round_seconds: list[float] = []
        """Wall-clock seconds of each call to the wrapped ``generate_sequences``."""
        self.output_meta_info: dict[str, Any] = {}

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        rows, owners = [], []
        for request in requests:
            row = self.prompt_rows[request.prompt.prompt_id]
            rows.extend([row] * request.num_samples)
            owners.extend([request.prompt.prompt_id] * request.num_samples)
        batch = self.source.select_idxs(np.asarray(rows, dtype=np.int64))
        batch.meta_info = dict(self.meta_info)
        padded, pad_size = pad_dataproto_to_divisor(batch, self.size_divisor)
        start_time = time.perf_counter()
        output = self.rollout.generate_sequences(padded)
        self.round_seconds.append(time.perf_counter() - start_time)
        if len(output) != len(padded):
            raise ValueError(f"generate_sequences returned {len(output)} rows for {len(padded)} inputs")
        output = unpad_dataproto(output, pad_size)
        if self.require_scores and "rm_scores" not in output.batch.keys():
            raise ValueError(MISSING_SCORES)
        self._record_meta(output, num_rows=len(padded))
        completions = completions_from_dataproto(output, owners, first_row=self.num_rows, tokenizer=self.tokenizer)
        self.outputs.append(output)
        for i, owner in enumerate(owners):
            self.first_rows.setdefault(owner, self.num_rows + i)
        self.num_rows += len(output)
        self.num_padding_rows += pad_size
        per_request, start = [], 0
        for request in requests:
            per_request.append(completions[start:start + request.num_samples])
            start += request.num_samples
        return per_request

    def _record_meta(self, output: Any, num_rows: int) -> None:
        """Keep each call's ``timing`` entries (combined per step by :func:`combine_round_timing`, never summed) and
        the first call's other meta_info."""
        meta = dict(output.meta_info)
        self.round_timing.append({k: float(v) for k, v in (meta.pop("timing", None) or {}).items()})
        self.round_rows.append(num_rows)
        meta.pop("metrics", None)
        for key, value in meta.items():
            self.output_meta_info.setdefault(key, value)
        output.meta_info = {}

    @property
    def timing(self) -> dict[str, float]:
        """The step's timing: verl's per-round entries combined as max / min / mean, plus round wall time."""
        return combine_round_timing(self.round_timing, self.round_rows, self.round_seconds)

    def concatenated(self) -> Any:
        """Every row generated this step, in :attr:`VerlCompletion.rollout_row` order."""
        if not self.outputs:
            raise ValueError("nothing was generated")
        return _concat(self.outputs)


class RolloutRewardVerifier:
    """Our :class:`~reinforce_ada.sampling.protocols.Verifier` backed by verl's reward.

    A completion whose rollout row already carries ``rm_scores`` (verl's reward loop scores during generation when no
    colocated reward model is used) gets that score. Otherwise ``reward_fn`` is called once per round on the unscored
    rows (e.g. the trainer's reward-model call); without one, an unscored completion is an error that says what to
    configure.
    """

    def __init__(self, generator: VerlRolloutGenerator, reward_fn: RewardFn | None = None):
        self.generator = generator
        self.reward_fn = reward_fn

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        rewards: list[float | None] = [getattr(c, "score", None) for c in completions]
        missing = [i for i, r in enumerate(rewards) if r is None]
        if not missing:
            return rewards
        if self.reward_fn is None:
            raise ValueError(MISSING_SCORES)
        rows = np.asarray([completions[i].rollout_row for i in missing], dtype=np.int64)  # type: ignore[attr-defined]
        scored = self.reward_fn(self.generator.concatenated().select_idxs(rows))
        for i, value in zip(missing, _sequence_scores(scored, len(missing))):
            rewards[i] = value
        return rewards


def _sequence_scores(scored: Any, expected: int) -> list[float | None]:
    """One reward per row from what ``reward_fn`` returned: a DataProto's ``rm_scores`` or a tensor, ``(B,)`` or
    ``(B, T)`` (summed over tokens, verl's convention); anything else by the rule every verifier path uses
    (:func:`~reinforce_ada.verifiers.base.checked_rewards`: a sequence of real numbers or None, never a mapping)."""
    tensor = scored.batch["rm_scores"] if hasattr(scored, "batch") else scored
    if isinstance(tensor, torch.Tensor):
        if tensor.dim() == 2:
            tensor = tensor.sum(dim=-1)
        if tensor.dim() != 1 or tensor.shape[0] != expected:
            raise VerifierError(f"reward_fn returned scores of shape {tuple(tensor.shape)} for {expected} rows")
        tensor = tensor.to(torch.float64)
    return checked_rewards(tensor, expected, "verl's reward_fn")


def row_metrics(sampled: SampledBatch, generated: Any, out: Any) -> dict[str, float]:
    """``reinforce_ada/pool/*`` over every generated row and ``reinforce_ada/kept/*`` over the output's real rows.

    A pool row's score is the reward the sampler recorded for it (NaN for a row no pool holds, e.g. a dropped
    verification: it counts in lengths and tokens, not in ``score``); a kept row's is its ``rm_scores``. Padding rows
    of ``out`` are left out entirely.
    """
    width = generated.batch["responses"].shape[-1]
    pool_scores = np.full(len(generated), np.nan)
    for pool in sampled.pools.values():
        for completion in pool.completions:
            row = getattr(completion, "rollout_row", -1)
            if row >= 0 and completion.reward is not None:
                pool_scores[row] = completion.reward
    metrics = sequence_metrics("reinforce_ada/pool", pool_scores, response_lengths(generated).tolist(),
                               prompt_lengths(generated).tolist(), width)
    real = np.flatnonzero(~np.asarray(out.non_tensor_batch[PAD_KEY], dtype=bool))
    kept = out.select_idxs(real)
    metrics.update(sequence_metrics("reinforce_ada/kept", kept.batch["rm_scores"].sum(dim=-1).tolist(),
                                    response_lengths(kept).tolist(), prompt_lengths(kept).tolist(), width))
    return metrics


class ReinforceAdaRollout:
    """Wrap anything with verl's ``generate_sequences`` so that one call runs Reinforce-Ada's sampling step.

    Args:
        rollout: the inner rollout (worker group, agent-loop manager, or a test fake).
        config: the sampler's config; ``group_size`` must equal the number of rows per prompt in each request.
        size_divisor: every inner call is padded to a multiple of this, for a rollout that needs equal chunks (a
            worker group's data-parallel size); the padding rows are generated and discarded. verl's agent-loop
            manager needs none (:class:`~.agent_loop.ReinforceAdaAgentLoopManager` splits rounds unevenly).
        verifier: scores completions (any reinforce-ada verifier; text ones need ``tokenizer``); defaults to
            :class:`RolloutRewardVerifier` (verl's reward).
        reward_fn: passed to the default verifier for rows that come back without ``rm_scores``.
        tokenizer: when given, completions' ``text`` is decoded (needed by text verifiers).

    After each call, :attr:`last_batch` is the core's :class:`SampledBatch` and :attr:`last_metrics` the step's
    metrics (prefixed ``reinforce_ada/``: the sampler's, ``pool/*`` and ``kept/*`` row metrics, ``perf/*``; see
    :mod:`.metrics`), also put in the output's ``meta_info["reinforce_ada_metrics"]`` and ``meta_info["timing"]``
    (which verl's trainer logs, as ``timing_s/reinforce_ada/...``), next to the rounds' own timing combined by
    :func:`~.metrics.combine_round_timing`.
    """

    def __init__(self, rollout: Any, config: SamplerConfig, *, size_divisor: int = 1,
                 verifier: Verifier | None = None,
                 reward_fn: RewardFn | None = None, tokenizer: Any = None):
        if not callable(getattr(rollout, "generate_sequences", None)):
            raise TypeError("rollout must have verl's generate_sequences(prompts) method "
                            f"(got {type(rollout).__name__})")
        if not isinstance(config, SamplerConfig):
            raise TypeError(f"config must be a SamplerConfig (got {type(config).__name__})")
        if config.importance_weights:
            raise ValueError("importance_weights is not supported through verl: its losses take no per-sample weight")
        self.rollout = rollout
        self.config = config
        self.size_divisor = size_divisor
        self.verifier = verifier
        self.reward_fn = reward_fn
        self.tokenizer = tokenizer
        self._sampler_rng_state: dict | None = None
        self.memory = PassRateMemory() if config.is_budget else None
        """Budget mode: the cross-step pass-rate memory, kept across steps (one sampler is built per step)."""
        self.num_steps = 0
        self.last_batch: SampledBatch | None = None
        self.last_metrics: dict[str, float] = {}

    def generate_sequences(self, prompts: Any) -> Any:
        """One sampling step on a request of ``num_prompts * n`` rows; returns a DataProto of the same length."""
        prompt_list, positions = prompts_from_dataproto(prompts)
        sizes = {len(rows) for rows in positions.values()}
        if sizes != {self.config.group_size}:
            raise ValueError(f"the request holds {sorted(sizes)} rows per prompt but group_size is "
                             f"{self.config.group_size}; set algorithm.reinforce_ada's group size through "
                             "actor_rollout_ref.rollout.n")
        prompt_rows = {p.prompt_id: p.metadata["row"] for p in prompt_list}
        generator = VerlRolloutGenerator(self.rollout, prompts, prompt_rows, size_divisor=self.size_divisor,
                                         tokenizer=self.tokenizer, meta_info=prompts.meta_info,
                                         require_scores=self.verifier is None and self.reward_fn is None)
        verifier = self.verifier if self.verifier is not None else RolloutRewardVerifier(generator, self.reward_fn)
        sampler = AdaptiveSampler(generator, verifier, self.config, memory=self.memory)
        # One sampler per step (its generator is bound to this request). verl's trainer sends its step number: the
        # selection RNG is then a function of (seed, step), so a run resumed from a verl checkpoint selects exactly
        # what the uninterrupted run would, with nothing to save. Without a step number the RNG carries over.
        step = prompts.meta_info.get("global_steps")
        if isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step >= 0 \
                and self.config.seed is not None and self.config.seed >= 0:
            sampler.rng = np.random.default_rng([int(self.config.seed), int(step)])
        elif self._sampler_rng_state is not None:
            sampler.load_state_dict(self._sampler_rng_state)
        sampled = sampler.sample(prompt_list)
        self._sampler_rng_state = sampler.state_dict()
        out = assemble_training_batch(sampled, generator.concatenated(), positions, generator.first_rows)
        metrics = {f"reinforce_ada/{k}": float(v) for k, v in sampled.metrics.items()}
        metrics["reinforce_ada/padding_rows"] = float(out.non_tensor_batch[PAD_KEY].sum())
        metrics["reinforce_ada/generation_padding_rows"] = float(generator.num_padding_rows)
        metrics.update(row_metrics(sampled, generator.concatenated(), out))
        gen_seconds = sum(generator.round_seconds)
        metrics["reinforce_ada/perf/gen_throughput"] = (
            metrics["reinforce_ada/pool/num_response_tokens"] / gen_seconds if gen_seconds > 0 else float("nan"))
        # verl's legacy trainer logs every meta_info["timing"] entry as timing_s/<key> and nothing else from
        # generation (its own agent loop reports num_preempted that way), so the sampler's metrics ride along there.
        out.meta_info = {**generator.output_meta_info, "timing": {**generator.timing, **metrics},
                         "reinforce_ada_metrics": metrics}
        self.num_steps += 1
        self.last_batch, self.last_metrics = sampled, metrics
        logger.info("reinforce_ada step %d: %d prompts, %.0f samples, %d rounds, %.2f exited, %d padding rows",
                    self.num_steps, len(prompt_list), sampled.metrics["total_samples"], len(sampled.rounds),
                    sampled.metrics["exited_fraction"], int(metrics["reinforce_ada/padding_rows"]))
        return out

    __call__ = generate_sequences
