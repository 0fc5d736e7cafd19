"""The policy update: from a sampled batch to optimizer steps.

1. :func:`sequences` rebuilds right-padded ``prompt + completion`` token tensors, with a mask over completion
   tokens, the batch's advantages (and importance weights, in budget mode) and the generator's log-probabilities of
   the completion tokens (NaN where it gave none);
2. :func:`token_logprobs` gives each token's log-probability under a model at the sampling temperature (and
   optionally the entropies of the same distributions);
3. :func:`ppo_update` runs ``ppo_epochs`` passes of mini-batches of
   :func:`reinforce_ada.core.losses.ppo_clip_loss`, accumulated over micro-batches, with gradient clipping, AdamW and
   the learning-rate schedule. With one epoch and one mini-batch the old log-probabilities are the current ones
   (detached), so no extra forward pass is spent on them. When the generator returned log-probabilities of the
   sampled tokens, the rollout/trainer mismatch is measured on the old log-probabilities and checked
   (:func:`~reinforce_ada.training.guards.check_rollout_mismatch`) before the first optimizer step, and with
   ``rollout_correction`` each token's loss is weighted by the truncated importance ratio
   (:mod:`reinforce_ada.core.rollout_correction`).
"""

from __future__ import annotations

from typing import Any, Callable

from reinforce_ada.config import TrainConfig
from reinforce_ada.training.guards import EVALUATION_NOT_REPORTED, check_finite, check_rollout_mismatch
from reinforce_ada.types import Completion, Prompt, SampledBatch


def sequences(batch: SampledBatch, pad_token_id: int | None,
              prompt_token_ids: Callable[[Prompt], list[int]]) -> dict[str, Any]:
    """Right-padded ``prompt + completion`` tensors with a mask over completion tokens (empty completions left out)."""
    import torch

    rows: list[tuple[list[int], Completion]] = [
        (prompt_token_ids(group.prompt), c) for group in batch.groups for c in group.completions]
    keep = [i for i, (_, c) in enumerate(rows) if len(c.token_ids) > 0]
    length = max((len(p) + len(c.token_ids) for p, c in rows), default=1)
    seq = padded_sequences([rows[i] for i in keep], pad_token_id, length)
    seq["advantages"] = torch.tensor(batch.advantages[keep], dtype=torch.float32)
    seq["weights"] = torch.tensor(batch.weights[keep], dtype=torch.float32) if batch.weights is not None else None
    return seq


def padded_sequences(rows: list[tuple[list[int], Completion]], pad_token_id: int | None,
                     length: int | None = None) -> dict[str, Any]:
    """``input_ids``, ``attention_mask``, ``response_mask`` and the generator's ``rollout_logprobs`` (NaN where it
    gave none; ``None`` when it gave none at all) of ``(prompt ids, completion)`` rows, right-padded to ``length``
    (default: the longest row)."""
    import torch

    if length is None:
        length = max((len(p) + len(c.token_ids) for p, c in rows), default=1)
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
    return {"input_ids": input_ids, "attention_mask": attention, "response_mask": response_mask,
            "rollout_logprobs": rollout if has_rollout else None}


def token_logprobs(model: Any, input_ids: Any, attention_mask: Any, temperature: float, with_entropy: bool = False):
    """Log-probabilities ``(B, L)`` of each token given its prefix (position 0 gets 0), at the sampling
    temperature, and optionally the entropies of the same distributions."""
    import torch

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    logits = logits / temperature
    log_norm = torch.logsumexp(logits, dim=-1)  # (B, L-1)
    token_logits = logits.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    logprobs = torch.nn.functional.pad(token_logits - log_norm, (1, 0))  # (B, L)
    entropy = None
    if with_entropy:
        probs = torch.softmax(logits, dim=-1)
        entropy = torch.nn.functional.pad(log_norm - (probs * logits).sum(-1), (1, 0))
    return logprobs, entropy


def no_grad_logprobs(model: Any, seq: dict[str, Any], cfg: TrainConfig, device: Any) -> Any:
    """:func:`token_logprobs` of every sequence in ``seq`` without gradients, in micro-batches, on the CPU."""
    import torch

    chunks = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, seq["input_ids"].shape[0], cfg.micro_batch_size):
            sl = slice(start, start + cfg.micro_batch_size)
            logprobs, _ = token_logprobs(model, seq["input_ids"][sl].to(device), seq["attention_mask"][sl].to(device),
                                         cfg.temperature)
            chunks.append(logprobs.cpu())
    model.train(was_training)
    return torch.cat(chunks)


def ppo_update(model: Any, ref_model: Any, optimizer: Any, scheduler: Any, seq: dict[str, Any], cfg: TrainConfig,
               device: Any, step: int, totals: dict[str, Any]) -> dict[str, float]:
    """``ppo_epochs`` passes of PPO-clip over the step's sequences, in mini-batches with accumulation; returns the
    metrics averaged over optimizer steps. ``step`` is the number of steps done before this one (it seeds the
    mini-batch order); each optimizer step is counted in ``totals["optimizer_steps"]``. With ``kl_coef > 0`` and no
    ``ref_model`` (LoRA), the reference is ``model`` with its adapters disabled."""
    import torch

    from reinforce_ada.core.losses import ppo_clip_loss
    from reinforce_ada.core.rollout_correction import truncated_is_weights

    num = seq["input_ids"].shape[0]
    mini = cfg.mini_batch_size or num
    single_pass = cfg.ppo_epochs == 1 and mini >= num
    rollout = seq.get("rollout_logprobs")  # (B, L), NaN where the generator gave none; None: it gave none at all
    to = lambda t: t.to(device) if t is not None else None  # noqa: E731
    old_logprobs = ref_logprobs = None
    sums: dict[str, float] = {}
    if not single_pass:
        old_logprobs = no_grad_logprobs(model, seq, cfg, device)
    # single pass: the old log-probs are the first forward's, gathered for the mismatch before the optimizer step
    gathered = torch.zeros_like(rollout) if rollout is not None and old_logprobs is None else None
    if cfg.kl_coef > 0:
        if ref_model is not None:
            ref_logprobs = no_grad_logprobs(ref_model, seq, cfg, device)
        else:
            with model.disable_adapter():
                ref_logprobs = no_grad_logprobs(model, seq, cfg, device)
    generator = torch.Generator().manual_seed(cfg.seed * 7919 + step)
    count = 0
    model.train()
    for _ in range(cfg.ppo_epochs):
        order = torch.randperm(num, generator=generator)
        for start in range(0, num, mini):
            idx = order[start:start + mini]
            mask_total = seq["response_mask"][idx].sum().clamp(min=1)
            optimizer.zero_grad(set_to_none=True)
            for micro_start in range(0, len(idx), cfg.micro_batch_size):
                micro = idx[micro_start:micro_start + cfg.micro_batch_size]
                input_ids, attention = to(seq["input_ids"][micro]), to(seq["attention_mask"][micro])
                mask = to(seq["response_mask"][micro])
                logprobs, entropy = token_logprobs(model, input_ids, attention, cfg.temperature,
                                                   with_entropy=cfg.entropy_coef > 0)
                old = logprobs.detach() if old_logprobs is None else to(old_logprobs[micro])
                token_weights = None
                if rollout is not None:
                    if gathered is not None:
                        gathered[micro] = old.float().cpu()
                    if cfg.rollout_correction:
                        token_weights = truncated_is_weights(old, to(rollout[micro]), mask, cfg.rollout_correction_cap)
                loss, metrics = ppo_clip_loss(
                    logprobs, old, to(seq["advantages"][micro]), mask,
                    clip_ratio_low=cfg.clip_ratio_low, clip_ratio_high=cfg.clip_ratio_high,
                    clip_ratio_c=cfg.clip_ratio_c, loss_agg_mode=cfg.loss_agg_mode, entropy=entropy,
                    entropy_coef=cfg.entropy_coef,
                    ref_logprobs=to(ref_logprobs[micro]) if ref_logprobs is not None else None,
                    kl_coef=cfg.kl_coef,
                    sample_weights=to(seq["weights"][micro]) if seq["weights"] is not None else None,
                    token_weights=token_weights)
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
                                             seq["response_mask"], cfg, step))
            optimizer.step()
            scheduler.step()
            totals["optimizer_steps"] += 1
            count += 1
    return {key: value if key.startswith("mismatch/") else value / count for key, value in sums.items()}


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

    seq = padded_sequences([(p, c) for p, c in rows if len(c.token_ids) > 0], pad_token_id)
    if seq["rollout_logprobs"] is None:
        return {}
    stats = mismatch_metrics(no_grad_logprobs(model, seq, cfg, device), seq["rollout_logprobs"],
                             seq["response_mask"])
    check_rollout_mismatch(where, stats, cfg.max_rollout_mismatch, cfg.top_p, EVALUATION_NOT_REPORTED)
    return {f"eval/mismatch/{key}": float(value) for key, value in stats.items()}
