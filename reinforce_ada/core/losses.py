"""Policy losses behind a registry (token-level PPO-clip with asymmetric and dual clipping the default), the entropy
bonus and the k3 KL penalty.

For each response token t with ratio ``rho_t = exp(logp_t - old_logp_t)`` and (sequence-level) advantage ``A``:

    pg_loss_unclipped = -A * rho_t
    pg_loss_clipped   = -A * clip(rho_t, 1 - clip_ratio_low, 1 + clip_ratio_high)      # DAPO's "clip-higher"
    pg_loss           = max(pg_loss_unclipped, pg_loss_clipped)                        # PPO (Schulman et al., 2017)
    if A < 0: pg_loss = min(pg_loss, -A * clip_ratio_c)                                # dual-clip (Ye et al., 2020)

Optional weights multiply ``pg_loss`` before aggregation: ``sample_weights`` per sequence (budget mode's pool
importance weights) and ``token_weights`` per token (truncated importance sampling of the rollout/trainer mismatch,
:mod:`reinforce_ada.core.rollout_correction`). The token losses are aggregated by ``loss_agg_mode`` (see
:data:`AGGREGATIONS`). Optionally ``- entropy_coef * agg(entropy)`` and ``+ kl_coef * agg(k3)`` with the k3 estimator
of KL(pi || pi_ref), ``k3 = exp(ref - logp) - (ref - logp) - 1`` (Schulman, "Approximating KL divergence", 2020),
added by :func:`regularise`. Each returns ``(loss, metrics)``; metrics are Python floats. Another policy loss is one
function with the :data:`PolicyLoss` signature, registered with ``@POLICY_LOSSES.register("name")`` and named by
``TrainConfig.policy_loss``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from reinforce_ada.core.registry import Registry

if TYPE_CHECKING:
    import torch

Aggregation = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]

AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation")


@AGGREGATIONS.register("token-mean")
def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every response token in the batch (DAPO): long responses weigh more."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over each sequence's tokens, then mean over sequences (Dr. GRPO-style, unnormalised by length)."""
    return (values * mask).sum(dim=-1).mean()


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over each sequence's tokens, then mean over sequences (the original GRPO)."""
    return ((values * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)).mean()


def aggregate(values: torch.Tensor, mask: torch.Tensor, loss_agg_mode: str | Aggregation) -> torch.Tensor:
    return AGGREGATIONS.get(loss_agg_mode)(values, mask)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    return float(((values * mask).sum() / mask.sum().clamp(min=1)).detach())


PolicyLoss = Callable[..., "tuple[torch.Tensor, dict[str, float]]"]
"""A policy loss: ``fn(logprobs, old_logprobs, advantages, mask, *, loss_agg_mode, sample_weights, token_weights,
clip_ratio_low, clip_ratio_high, clip_ratio_c) -> (loss, metrics)`` -- every tensor ``(B, T)`` except
``advantages`` (``(B,)`` per sequence or ``(B, T)`` per token) and ``sample_weights`` (``(B,)``); ``metrics`` are
Python floats (``pg_loss`` first). The trainer calls the one ``policy_loss`` names, then :func:`regularise`."""

POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")
"""Policy losses by name, all with the :data:`PolicyLoss` signature (as verl's ``register_policy_loss``)."""


@POLICY_LOSSES.register("ppo-clip")
def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_agg_mode: str | Aggregation = "token-mean",
    sample_weights: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.28,
    clip_ratio_c: float | None = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip loss over response tokens (the module docstring's ``pg_loss``, aggregated); the default policy loss.

    Args:
        logprobs: ``(B, T)`` log-probabilities of the sampled tokens under the current policy (with grad).
        old_logprobs: ``(B, T)`` the same under the policy that generated them.
        advantages: ``(B,)`` per sequence or ``(B, T)`` per token.
        mask: ``(B, T)`` 1 for response tokens, 0 for padding.
        sample_weights: ``(B,)`` optional per-sequence weights (e.g. :func:`pool_importance_weights`).
        token_weights: ``(B, T)`` optional per-token weights (e.g. :func:`~reinforce_ada.core.rollout_correction.
            truncated_is_weights`), treated as constants.
        clip_ratio_c: dual-clip bound for negative advantages (must be > 1); ``None`` disables it.
    """
    import torch

    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for dual-clip (got {clip_ratio_c})")
    mask = mask.to(logprobs.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)  # (B, 1) broadcasts over T
    advantages = advantages.to(logprobs.dtype)

    log_ratio = logprobs - old_logprobs  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    pg_loss_unclipped = -advantages * ratio
    pg_loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    pg_loss = torch.maximum(pg_loss_unclipped, pg_loss_clipped)  # (B, T)
    clipped = (pg_loss_clipped > pg_loss_unclipped).to(logprobs.dtype)
    dual_clipped = torch.zeros_like(pg_loss)
    if clip_ratio_c is not None:
        pg_loss_dual = -advantages * clip_ratio_c
        negative = advantages < 0
        dual_clipped = (negative & (pg_loss > pg_loss_dual)).to(logprobs.dtype)
        pg_loss = torch.where(negative, torch.minimum(pg_loss, pg_loss_dual), pg_loss)
    if sample_weights is not None:
        pg_loss = pg_loss * sample_weights.to(logprobs.dtype).unsqueeze(-1)
    if token_weights is not None:
        pg_loss = pg_loss * token_weights.detach().to(logprobs.dtype)

    loss = aggregate(pg_loss, mask, loss_agg_mode)
    metrics = {
        "pg_loss": float(loss.detach()),
        "clipfrac": _masked_mean(clipped, mask),
        "clipfrac_low": _masked_mean(clipped * (ratio < 1.0).to(logprobs.dtype), mask),
        "clipfrac_high": _masked_mean(clipped * (ratio > 1.0).to(logprobs.dtype), mask),
        "dual_clipfrac": _masked_mean(dual_clipped, mask),
        "approx_kl": _masked_mean(torch.exp(-log_ratio) - 1.0 + log_ratio, mask),  # k3 of KL(old || new)
        "ratio_mean": _masked_mean(ratio, mask),
    }
    return loss, metrics


def regularise(
    loss: torch.Tensor,
    metrics: dict[str, float],
    logprobs: torch.Tensor,
    mask: torch.Tensor,
    loss_agg_mode: str | Aggregation = "token-mean",
    *,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """A policy loss's ``(loss, metrics)`` with the entropy bonus and the k3 KL penalty: ``loss - entropy_coef *
    agg(entropy) + kl_coef * agg(k3)``, each term reported (``entropy``, ``kl``) when its input is given, then the
    total (``loss``).

    Args:
        entropy: ``(B, T)`` token entropies, needed when ``entropy_coef != 0``.
        ref_logprobs: ``(B, T)`` reference-policy log-probabilities, needed when ``kl_coef != 0``.
    """
    import torch

    if entropy_coef and entropy is None:
        raise ValueError("entropy_coef is non-zero but no entropy was given")
    if kl_coef and ref_logprobs is None:
        raise ValueError("kl_coef is non-zero but no ref_logprobs were given")
    mask = mask.to(logprobs.dtype)
    if entropy is not None:
        entropy_loss = aggregate(entropy, mask, loss_agg_mode)
        metrics["entropy"] = float(entropy_loss.detach())
        if entropy_coef:
            loss = loss - entropy_coef * entropy_loss
    if ref_logprobs is not None:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1.0  # k3, (B, T)
        kl_loss = aggregate(kl, mask, loss_agg_mode)
        metrics["kl"] = float(kl_loss.detach())
        if kl_coef:
            loss = loss + kl_coef * kl_loss
    metrics["loss"] = float(loss.detach())
    return loss, metrics
