"""Rollout/trainer mismatch statistics and truncated importance weights, with arithmetic expectations."""

import math

import pytest
import torch

from reinforce_ada.core.losses import ppo_clip_loss
from reinforce_ada.core.rollout_correction import mismatch_metrics, truncated_is_weights

NAN = float("nan")


def test_mismatch_statistics_over_response_tokens_with_a_rollout_logprob():
    old = torch.tensor([[0.0, -1.0, -2.0, -0.5], [-1.0, -1.0, 0.0, 0.0]])
    rollout = torch.tensor([[9.0, -1.2, -1.0, NAN], [-0.7, -1.0, 5.0, 5.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])  # prompt token and padding left out
    deltas = [0.2, -1.0, -0.3, 0.0]  # old - rollout on the 4 compared tokens (the NaN one is not compared)
    m = mismatch_metrics(old, rollout, mask)
    assert m["num_tokens"] == 4
    assert m["logprob_diff_mean"] == pytest.approx((0.2 + 1.0 + 0.3 + 0.0) / 4)
    assert m["logprob_diff_max"] == pytest.approx(1.0)
    assert m["k3_kl"] == pytest.approx(sum(math.exp(d) - d - 1 for d in deltas) / 4)
    assert m["k3_kl"] >= 0


def test_no_token_to_compare_gives_nan_and_zero_tokens():
    m = mismatch_metrics(torch.zeros(1, 2), torch.full((1, 2), NAN), torch.ones(1, 2))
    assert m["num_tokens"] == 0 and math.isnan(m["logprob_diff_mean"]) and math.isnan(m["k3_kl"])


def test_truncated_weights_are_capped_ratios_and_one_elsewhere():
    old = torch.tensor([[-1.0, -1.0, -1.0, -1.0]])
    rollout = torch.tensor([[-1.5, -0.5, -4.0, NAN]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    w = truncated_is_weights(old, rollout, mask, cap=2.0)
    assert w.tolist()[0] == pytest.approx([math.exp(0.5), math.exp(-0.5), 2.0, 1.0])
    assert truncated_is_weights(old, rollout, torch.zeros(1, 4), cap=2.0).tolist() == [[1.0] * 4]
    with pytest.raises(ValueError, match="cap must be >= 1"):
        truncated_is_weights(old, rollout, mask, cap=0.5)


def test_token_weights_multiply_each_tokens_policy_loss():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    old = logprobs.detach()  # ratio 1: pg_loss_t = -A
    advantages = torch.tensor([2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    weights = torch.tensor([[0.5, 3.0, 7.0]])
    loss, _ = ppo_clip_loss(logprobs, old, advantages, mask, token_weights=weights)
    assert loss.item() == pytest.approx(-(2.0 * 0.5 + 2.0 * 3.0) / 2)  # token-mean over the two masked tokens
    loss.backward()
    # d/dlogp of -A * w * exp(logp - old) at ratio 1 is -A * w / num_tokens
    assert logprobs.grad.tolist()[0] == pytest.approx([-2.0 * 0.5 / 2, -2.0 * 3.0 / 2, 0.0])
