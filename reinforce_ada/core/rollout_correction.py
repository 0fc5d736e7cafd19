"""The rollout/trainer mismatch of sampled tokens, and truncated importance sampling to correct it.

A generation engine (vLLM, or the HF backend itself) returns ``rollout_logp_t``, the log-probability of each token it
sampled; the trainer recomputes ``old_logp_t`` of the same token under the same weights. The two differ by numerical
noise (kernels, dtype, batching) -- or by much more when the engine samples from other weights than the trainer's
(a stale weight sync). With ``delta_t = old_logp_t - rollout_logp_t`` over response tokens:

    mismatch/logprob_diff_mean = mean_t |delta_t|        (TRL: sampling/sampling_logp_difference/mean)
    mismatch/logprob_diff_max  = max_t  |delta_t|        (TRL: sampling/sampling_logp_difference/max)
    mismatch/k3_kl             = mean_t exp(delta_t) - delta_t - 1
                                 (k3 estimate of KL(pi_rollout || pi_trainer) from the rollout's own samples; verl's
                                 rollout_corr/k3_kl)

Truncated importance sampling (TIS; TRL's ``vllm_importance_sampling_mode="token_truncate"`` with
``vllm_importance_sampling_clip_max = C``, verl's ``rollout_is="token"`` with ``rollout_is_threshold = C``) weights
each token's policy loss by

    w_t = min(exp(delta_t), C)

so the gradient estimated from the engine's samples is that of the trainer's policy, with the weight capped at ``C``
to bound its variance (Yao et al., "Your efficient RL framework secretly brings you off-policy RL training", 2025).
Tokens without a rollout log-probability (NaN) get ``w_t = 1`` and are left out of the statistics, as in TRL.
"""

from __future__ import annotations

import torch

__all__ = ["mismatch_metrics", "truncated_is_weights"]


def _compared(rollout_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool: response tokens that have a rollout log-probability."""
    return (mask > 0) & ~torch.isnan(rollout_logprobs)


def mismatch_metrics(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
                     mask: torch.Tensor) -> dict[str, float]:
    """Mean and max ``|delta|`` and the k3 KL over compared tokens (module doc), plus ``num_tokens`` compared.

    ``old_logprobs``, ``rollout_logprobs`` and ``mask`` are ``(B, T)``; with no token to compare the values are
    ``nan`` (and ``num_tokens`` is 0).

    >>> old = torch.tensor([[0.0, -1.0, -2.0]])
    >>> rollout = torch.tensor([[0.0, -1.5, float("nan")]])
    >>> m = mismatch_metrics(old, rollout, torch.tensor([[0.0, 1.0, 1.0]]))
    >>> round(m["logprob_diff_mean"], 4), round(m["logprob_diff_max"], 4), m["num_tokens"]
    (0.5, 0.5, 1)
    >>> round(m["k3_kl"], 4)  # exp(0.5) - 0.5 - 1
    0.1487
    """
    compared = _compared(rollout_logprobs, mask)
    num = int(compared.sum())
    if num == 0:
        return {"logprob_diff_mean": float("nan"), "logprob_diff_max": float("nan"), "k3_kl": float("nan"),
                "num_tokens": 0}
    delta = (old_logprobs.float() - rollout_logprobs.float())[compared]  # (num,)
    return {"logprob_diff_mean": float(delta.abs().mean()), "logprob_diff_max": float(delta.abs().max()),
            "k3_kl": float((torch.exp(delta) - delta - 1.0).mean()), "num_tokens": num}


def truncated_is_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor,
                         cap: float) -> torch.Tensor:
    """``(B, T)`` per-token weights ``min(exp(old - rollout), cap)``; 1 where no rollout log-prob or outside ``mask``.

    >>> w = truncated_is_weights(torch.tensor([[-1.0, 0.0, -3.0]]), torch.tensor([[-2.0, -5.0, float("nan")]]),
    ...                          torch.ones(1, 3), cap=2.0)
    >>> [round(x, 4) for x in w[0].tolist()]  # exp(1) > 2: capped; exp(5): capped; NaN: 1
    [2.0, 2.0, 1.0]
    """
    if not cap >= 1.0:
        raise ValueError(f"the importance-sampling cap must be >= 1 (got {cap})")
    compared = _compared(rollout_logprobs, mask)
    delta = torch.where(compared, old_logprobs.float() - rollout_logprobs.float(), torch.zeros_like(old_logprobs))
    return torch.clamp(torch.exp(delta), max=cap).detach()  # (B, T)
