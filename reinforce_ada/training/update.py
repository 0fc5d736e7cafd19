"""The policy update: from a sampled batch to optimizer steps.

1. :func:`sequences` rebuilds right-padded ``prompt + completion`` token tensors into a :class:`SequenceBatch`, with a
   mask over completion tokens, the batch's advantages (and importance weights, in budget mode) and the generator's
   log-probabilities of the completion tokens (NaN where it gave none);
2. :func:`token_logprobs` gives each token's log-probability under a model at the sampling temperature (and
   optionally the entropies of the same distributions: every step logs ``train/entropy``, the held-out evaluation
   ``eval/entropy`` through :func:`token_entropy`);
3. :class:`PolicyUpdate` holds the model, its optimizer and learning-rate schedule (and the KL term's reference): one
   call runs ``ppo_epochs`` passes of mini-batches of the config's policy loss
   (:data:`reinforce_ada.core.losses.POLICY_LOSSES`, PPO-clip by default) plus its entropy and KL terms
   (:func:`~reinforce_ada.core.losses.regularise`), accumulated over micro-batches, with gradient clipping, AdamW and
   the schedule. With one epoch and one mini-batch the old log-probabilities are the current ones (detached), so no
   extra forward pass is spent on them. When the generator returned log-probabilities of the sampled tokens, the
   rollout/trainer mismatch is measured on the old log-probabilities and checked
   (:func:`~reinforce_ada.training.guards.check_rollout_mismatch`) before the first optimizer step, and with
   ``rollout_correction`` each token's loss is weighted by the truncated importance ratio
   (:mod:`reinforce_ada.core.rollout_correction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from reinforce_ada.config import TrainConfig
from reinforce_ada.training.guards import EVALUATION_NOT_REPORTED, RunStopped, check_finite, check_rollout_mismatch
from reinforce_ada.types import Completion, Prompt, SampledBatch


class UntrainableCompletions(RunStopped):
    """The generator's completions carry text but no token ids (an OpenAI-compatible server that returns none), so
    there is nothing to train on; the run stops at the first such step, naming the generator."""


@dataclass
class SequenceBatch:
    """A step's completions as the update reads them: one row per non-empty completion, ``prompt + completion``
    tokens right-padded to the longest row (``L``)."""

    input_ids: Any  # (B, L) long
    attention_mask: Any  # (B, L) long: 1 on prompt and completion tokens
    response_mask: Any  # (B, L) float: 1 on completion tokens
    advantages: Any  # (B,)
    weights: Any | None  # (B,) budget mode's pool importance weights, else None
    rollout_logprobs: Any | None  # (B, L) the generator's log-probs, NaN where it gave none; None: none at all

    @property
    def num_sequences(self) -> int:
        return int(self.input_ids.shape[0])


def sequences(batch: SampledBatch, pad_token_id: int | None,
              prompt_token_ids: Callable[[Prompt], list[int]], generator: str = "the generator") -> SequenceBatch:
    """Right-padded ``prompt + completion`` tensors with a mask over completion tokens. An empty completion (no
    text, no token ids) is left out; one with text but no token ids cannot be trained on and raises
    :class:`UntrainableCompletions` naming ``generator`` -- never a step trained on fewer sequences, or none."""
    import torch

    rows: list[tuple[list[int], Completion]] = [
        (prompt_token_ids(group.prompt), c) for group in batch.groups for c in group.completions]
    untrainable = [c for _, c in rows if len(c.token_ids) == 0 and c.text]
    if untrainable:
        first = untrainable[0]
        raise UntrainableCompletions(
            f"{generator} returned {len(untrainable)} of {len(rows)} completions with text but no token ids (first: "
            f"prompt {first.prompt_id!r}, {first.text[:40]!r}), so they cannot be trained on; give a generator "
            f"that returns the sampled token ids (an OpenAI-compatible server: vLLM or SGLang with "
            f"return_token_ids). Stopping before the update: the weights are unchanged and no checkpoint was "
            f"written from this step.")
    keep = [i for i, (_, c) in enumerate(rows) if len(c.token_ids) > 0]
    length = max((len(p) + len(c.token_ids) for p, c in rows), default=1)
    input_ids, attention, response_mask, rollout = padded([rows[i] for i in keep], pad_token_id, length)
    advantages = torch.tensor(batch.advantages[keep], dtype=torch.float32)
    weights = torch.tensor(batch.weights[keep], dtype=torch.float32) if batch.weights is not None else None
    return SequenceBatch(input_ids, attention, response_mask, advantages, weights, rollout)


def padded(rows: list[tuple[list[int], Completion]], pad_token_id: int | None, length: int) -> tuple[Any, ...]:
    """``(input_ids, attention_mask, response_mask, rollout_logprobs)`` of ``(prompt ids, completion)`` rows,
    right-padded to ``length``; the generator's log-probs NaN where it gave none, ``None`` when it gave none at all."""
    import torch

    pad = pad_token_id if pad_token_id is not None else 0
    input_ids = torch.full((len(rows), length), pad, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    response_mask = torch.zeros((len(rows), length), dtype=torch.float32)
    rollout = torch.full((len(rows), length), float("nan"), dtype=torch.float32)
    for row, (prompt_ids, completion) in enumerate(rows):
        ids = prompt_ids + list(completion.token_ids)
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        response_mask[row, len(prompt_ids): len(ids)] = 1.0
        if completion.logprobs is not None and len(completion.logprobs) == len(completion.token_ids):
            rollout[row, len(prompt_ids): len(ids)] = torch.tensor(completion.logprobs, dtype=torch.float32)
    has_rollout = bool((~torch.isnan(rollout) & (response_mask > 0)).any())
    return input_ids, attention, response_mask, rollout if has_rollout else None


def token_logprobs(model: Any, input_ids: Any, attention_mask: Any, temperature: float, with_entropy: bool = False,
                   entropy_grad: bool = True, first: int = 0):
    """Log-probabilities ``(B, L)`` of each token given its prefix (position 0 gets 0), at the sampling
    temperature, and optionally the entropies ``(B, L)`` of the same distributions: ``H_t = log Z_t - sum_v p_tv
    z_tv`` for the distribution that produced token ``t``. ``entropy_grad=False`` measures the entropy without
    gradients (a metric, not a loss term: no graph is kept for it).

    ``first``: the tokens before ``first + 1`` are not needed (they get 0): a model whose ``forward`` takes
    ``logits_to_keep`` (transformers' causal LMs) then computes the vocabulary's logits only from position ``first``
    on -- for short completions after a long prompt most of the cost of a large vocabulary."""
    import inspect

    import torch

    length = input_ids.shape[1]
    first = min(max(int(first), 0), length - 1)
    if first and "logits_to_keep" in inspect.signature(model.forward).parameters:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=length - first).logits
    else:
        logits, first = model(input_ids=input_ids, attention_mask=attention_mask).logits, 0
    logits = logits[:, :-1].float() / temperature  # (B, L - 1 - first): predicts tokens first + 1 .. L - 1
    log_norm = torch.logsumexp(logits, dim=-1)
    token_logits = logits.gather(-1, input_ids[:, first + 1:].unsqueeze(-1)).squeeze(-1)
    logprobs = torch.nn.functional.pad(token_logits - log_norm, (first + 1, 0))  # (B, L)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            scaled, norm = (logits, log_norm) if entropy_grad else (logits.detach(), log_norm.detach())
            probs = torch.softmax(scaled, dim=-1)
            entropy = torch.nn.functional.pad(norm - (probs * scaled).sum(-1), (first + 1, 0))
    return logprobs, entropy


def token_entropy(model: Any, rows: list[tuple[list[int], Completion]], pad_token_id: int | None, temperature: float,
                  micro_batch_size: int, device: Any) -> tuple[float, int]:
    """The policy's entropy over sampled completions (``(prompt ids, completion)`` rows): ``(sum over every
    completion token of the entropy of the model's next-token distribution there, at the sampling temperature; the
    number of those tokens)``, without gradients, in micro-batches. The held-out evaluation's ``eval/entropy`` is
    their ratio. Only the completions' positions get the vocabulary's logits (``token_logprobs``'s ``first``)."""
    import torch

    rows = [(p, c) for p, c in rows if len(c.token_ids) > 0]
    if not rows:
        return 0.0, 0
    length = max(len(p) + len(c.token_ids) for p, c in rows)
    input_ids, attention, response_mask, _ = padded(rows, pad_token_id, length)
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(rows), micro_batch_size):
                sl = slice(start, start + micro_batch_size)
                first = min(len(p) for p, _ in rows[sl]) - 1  # the first completion token's distribution is here
                _, entropy = token_logprobs(model, input_ids[sl].to(device), attention[sl].to(device), temperature,
                                            with_entropy=True, first=first)
                mask = response_mask[sl].to(device)  # (b, L)
                total += float((entropy * mask).sum())
                count += int(mask.sum())
    finally:
        model.train(was_training)
    return total, count


def no_grad_logprobs(model: Any, seq: SequenceBatch, cfg: TrainConfig, device: Any) -> Any:
    """:func:`token_logprobs` of every sequence in ``seq`` without gradients, in micro-batches, on the CPU."""
    import torch

    chunks = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, seq.num_sequences, cfg.micro_batch_size):
            sl = slice(start, start + cfg.micro_batch_size)
            logprobs, _ = token_logprobs(model, seq.input_ids[sl].to(device), seq.attention_mask[sl].to(device),
                                         cfg.temperature)
            chunks.append(logprobs.cpu())
    model.train(was_training)
    return torch.cat(chunks)


class PolicyUpdate:
    """The policy's model, optimizer and learning-rate schedule, and the KL term's frozen reference; one call is one
    step's update (see the module docstring). With ``kl_coef > 0`` and no ``ref_model`` (LoRA), the reference is
    ``model`` with its adapters disabled."""

    def __init__(self, model: Any, optimizer: Any, scheduler: Any, config: TrainConfig, device: Any,
                 ref_model: Any = None):
        from reinforce_ada.core.losses import POLICY_LOSSES

        self.model, self.optimizer, self.scheduler, self.ref_model = model, optimizer, scheduler, ref_model
        self.config = config
        self.device = device
        self.policy_loss = POLICY_LOSSES.get(config.policy_loss)

    def __call__(self, seq: SequenceBatch, step: int) -> tuple[dict[str, float], int]:
        """``ppo_epochs`` passes over ``seq`` in mini-batches with accumulation: the metrics averaged over optimizer
        steps (``mismatch/*`` as measured once, before the first) and the number of optimizer steps taken. ``step``
        is the number of steps done before this one (it seeds the mini-batch order)."""
        import torch

        from reinforce_ada.core.losses import regularise
        from reinforce_ada.core.rollout_correction import truncated_is_weights

        cfg, model = self.config, self.model
        num = seq.num_sequences
        mini = cfg.mini_batch_size or num
        single_pass = cfg.ppo_epochs == 1 and mini >= num
        rollout = seq.rollout_logprobs
        old_logprobs = ref_logprobs = None
        sums: dict[str, float] = {}
        if not single_pass:
            old_logprobs = no_grad_logprobs(model, seq, cfg, self.device)
        # single pass: the old log-probs are the first forward's, gathered for the mismatch before the optimizer step
        gathered = torch.zeros_like(rollout) if rollout is not None and old_logprobs is None else None
        if cfg.kl_coef > 0:
            ref_logprobs = self._reference_logprobs(seq)
        generator = torch.Generator().manual_seed(cfg.seed * 7919 + step)
        count = 0
        model.train()
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(num, generator=generator)
            for start in range(0, num, mini):
                idx = order[start:start + mini]
                mask_total = seq.response_mask[idx].sum().clamp(min=1)
                self.optimizer.zero_grad(set_to_none=True)
                for micro_start in range(0, len(idx), cfg.micro_batch_size):
                    micro = idx[micro_start:micro_start + cfg.micro_batch_size]
                    input_ids, attention = self._on_device(seq.input_ids[micro]), self._on_device(
                        seq.attention_mask[micro])
                    mask = self._on_device(seq.response_mask[micro])
                    # the entropy is always measured (train/entropy); it has gradients only as a loss term
                    logprobs, entropy = token_logprobs(model, input_ids, attention, cfg.temperature,
                                                       with_entropy=True, entropy_grad=cfg.entropy_coef > 0)
                    old = logprobs.detach() if old_logprobs is None else self._on_device(old_logprobs[micro])
                    token_weights = None
                    if rollout is not None:
                        if gathered is not None:
                            gathered[micro] = old.float().cpu()
                        if cfg.rollout_correction:
                            token_weights = truncated_is_weights(old, self._on_device(rollout[micro]), mask,
                                                                 cfg.rollout_correction_cap)
                    loss, metrics = self.policy_loss(
                        logprobs, old, self._on_device(seq.advantages[micro]), mask, loss_agg_mode=cfg.loss_agg_mode,
                        sample_weights=self._on_device(seq.weights[micro]) if seq.weights is not None else None,
                        token_weights=token_weights, clip_ratio_low=cfg.clip_ratio_low,
                        clip_ratio_high=cfg.clip_ratio_high, clip_ratio_c=cfg.clip_ratio_c)
                    loss, metrics = regularise(
                        loss, metrics, logprobs, mask, cfg.loss_agg_mode, entropy=entropy,
                        entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef,
                        ref_logprobs=self._on_device(ref_logprobs[micro]) if ref_logprobs is not None else None)
                    # Weight each micro-batch so the accumulated loss equals the mini-batch's aggregate.
                    if cfg.loss_agg_mode == "token-mean":
                        share = float(mask.sum() / mask_total)
                    else:
                        share = len(micro) / len(idx)
                    check_finite(step + 1, "the loss", loss.detach())
                    (loss * share).backward()
                    for key, value in metrics.items():
                        sums[key] = sums.get(key, 0.0) + value * share
                params = [p for p in model.parameters() if p.requires_grad]
                grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm if cfg.max_grad_norm else
                                                           float("inf"))
                check_finite(step + 1, "the gradient norm", grad_norm)
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
                if rollout is not None and count == 0:  # measured and checked before the first optimizer step
                    sums.update(rollout_mismatch(old_logprobs if gathered is None else gathered, rollout,
                                                 seq.response_mask, cfg, step))
                self.optimizer.step()
                self.scheduler.step()
                count += 1
        return {key: value if key.startswith("mismatch/") else value / count for key, value in sums.items()}, count

    def _on_device(self, tensor: Any) -> Any:
        return tensor.to(self.device)

    def _reference_logprobs(self, seq: SequenceBatch) -> Any:
        """The KL term's reference log-probabilities: the frozen copy's, or with LoRA the base model's (adapters
        off)."""
        if self.ref_model is not None:
            return no_grad_logprobs(self.ref_model, seq, self.config, self.device)
        with self.model.disable_adapter():
            return no_grad_logprobs(self.model, seq, self.config, self.device)


def rollout_mismatch(old_logprobs: Any, rollout_logprobs: Any, mask: Any, cfg: TrainConfig,
                     step: int) -> dict[str, float]:
    """The step's ``mismatch/*`` metrics, checked against ``cfg.max_rollout_mismatch``; with
    ``cfg.rollout_correction`` also the truncated importance weights' mean and capped share."""
    from reinforce_ada.core.rollout_correction import mismatch_metrics, truncated_is_weights

    stats = mismatch_metrics(old_logprobs, rollout_logprobs, mask)
    check_rollout_mismatch(f"step {step + 1}", stats, cfg.max_rollout_mismatch, cfg.top_p)
    metrics = {f"mismatch/{key}": float(value) for key, value in stats.items()}
    if cfg.rollout_correction:
        response = mask > 0
        weights = truncated_is_weights(old_logprobs, rollout_logprobs, mask, cfg.rollout_correction_cap)[response]
        metrics["mismatch/is_weight_mean"] = float(weights.mean()) if response.any() else float("nan")
        metrics["mismatch/is_capped_fraction"] = (float((weights >= cfg.rollout_correction_cap).float().mean())
                                                  if response.any() else float("nan"))
    return metrics


def evaluation_mismatch(model: Any, rows: list[tuple[list[int], Completion]], pad_token_id: int | None,
                        cfg: TrainConfig, device: Any, where: str) -> dict[str, float]:
    """The rollout/trainer mismatch of held-out samples (``(prompt ids, completion)`` rows): the trainer's
    log-probabilities of the sampled tokens recomputed under its current weights, compared with the generator's,
    and checked like a training step's (:func:`~reinforce_ada.training.guards.check_rollout_mismatch`); the
    ``eval/mismatch/*`` metrics, or ``{}`` when the generator gave no log-probabilities."""
    from reinforce_ada.core.rollout_correction import mismatch_metrics

    rows = [(p, c) for p, c in rows if len(c.token_ids) > 0]
    length = max((len(p) + len(c.token_ids) for p, c in rows), default=1)
    input_ids, attention, response_mask, rollout = padded(rows, pad_token_id, length)
    if rollout is None:
        return {}
    seq = SequenceBatch(input_ids, attention, response_mask, None, None, rollout)
    stats = mismatch_metrics(no_grad_logprobs(model, seq, cfg, device), rollout, response_mask)
    check_rollout_mismatch(where, stats, cfg.max_rollout_mismatch, cfg.top_p, EVALUATION_NOT_REPORTED)
    return {f"eval/mismatch/{key}": float(value) for key, value in stats.items()}
