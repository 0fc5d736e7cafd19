"""ppo_clip_loss against hand-computed values: aggregations, asymmetric and dual clipping, entropy, k3 KL, weights."""

from __future__ import annotations

import math

import pytest
import torch

from reinforce_ada.core import AGGREGATIONS, POLICY_LOSSES, aggregate, ppo_clip_loss, regularise

D = torch.float64


def from_ratios(ratios):
    """logprobs with the given ratios against old_logprobs = 0."""
    logprobs = torch.log(torch.tensor(ratios, dtype=D)).requires_grad_(True)
    return logprobs, torch.zeros_like(logprobs)


# Two sequences, no clipping: seq0 A=2 ratios [1.0, 1.1, (pad) 1.2], seq1 A=-1 ratios [0.9, 1.2, 1.0].
RATIOS = [[1.0, 1.1, 1.2], [0.9, 1.2, 1.0]]
ADV = torch.tensor([2.0, -1.0], dtype=D)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


@pytest.mark.parametrize("mode, expected", [
    ("token-mean", (-2.0 * 1.0 - 2.0 * 1.1 + 0.9 + 1.2 + 1.0) / 5),
    ("seq-mean-token-sum", ((-2.0 * 1.0 - 2.0 * 1.1) + (0.9 + 1.2 + 1.0)) / 2),
    ("seq-mean-token-mean", ((-2.0 * 1.0 - 2.0 * 1.1) / 2 + (0.9 + 1.2 + 1.0) / 3) / 2),
])
def test_aggregation_modes(mode, expected):
    logprobs, old = from_ratios(RATIOS)
    loss, metrics = regularise(*ppo_clip_loss(logprobs, old, ADV, MASK, loss_agg_mode=mode), logprobs, MASK, mode)
    assert loss.item() == pytest.approx(expected)
    assert metrics["pg_loss"] == pytest.approx(expected) and metrics["loss"] == pytest.approx(expected)
    assert metrics["clipfrac"] == 0.0 and metrics["dual_clipfrac"] == 0.0
    assert metrics["ratio_mean"] == pytest.approx((1.0 + 1.1 + 0.9 + 1.2 + 1.0) / 5)


def test_padding_does_not_leak_into_the_loss():
    logprobs, old = from_ratios([[1.0, 1.1, 50.0], [0.9, 1.2, 1.0]])
    loss, _ = ppo_clip_loss(logprobs, old, ADV, MASK)
    assert loss.item() == pytest.approx((-2.0 * 1.0 - 2.0 * 1.1 + 0.9 + 1.2 + 1.0) / 5)


def test_registered_aggregations_and_unknown_mode():
    assert AGGREGATIONS.names() == ["seq-mean-token-mean", "seq-mean-token-sum", "token-mean"]
    values = torch.tensor([[1.0, 2.0], [4.0, 0.0]], dtype=D)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=D)
    assert aggregate(values, mask, "token-mean").item() == pytest.approx((1.0 + 2.0 + 4.0) / 3)
    assert aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx(((1.0 + 2.0) / 2 + 4.0 / 1) / 2)
    assert aggregate(values, mask, lambda v, m: (v * m).sum()).item() == 7.0
    with pytest.raises(ValueError, match="unknown loss aggregation 'sum'"):
        aggregate(values, mask, "sum")


def test_asymmetric_clipping_and_clip_fractions():
    # Four one-token sequences (A, ratio): (+1, 1.5) clipped high to 1.28; (+1, 0.5) unclipped is the max;
    # (-1, 0.5) clipped low to 0.8; (-1, 1.5) unclipped is the max (and below the dual-clip bound 3).
    logprobs, old = from_ratios([[1.5], [0.5], [0.5], [1.5]])
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=D)
    loss, m = ppo_clip_loss(logprobs, old, adv, torch.ones(4, 1), clip_ratio_low=0.2, clip_ratio_high=0.28)
    assert loss.item() == pytest.approx((-1.28 - 0.5 + 0.8 + 1.5) / 4)
    assert m["clipfrac"] == pytest.approx(2 / 4)
    assert m["clipfrac_high"] == pytest.approx(1 / 4) and m["clipfrac_low"] == pytest.approx(1 / 4)
    # A wider, asymmetric range: low 0.6 (floor 0.4) and high 0.1 (cap 1.1).
    loss, m = ppo_clip_loss(logprobs, old, adv, torch.ones(4, 1), clip_ratio_low=0.6, clip_ratio_high=0.1)
    assert loss.item() == pytest.approx((-1.1 - 0.5 + 0.5 + 1.5) / 4)
    assert m["clipfrac"] == pytest.approx(1 / 4) and m["clipfrac_low"] == 0.0


def test_clipped_tokens_get_no_gradient():
    logprobs, old = from_ratios([[1.5, 1.1]])
    loss, _ = ppo_clip_loss(logprobs, old, torch.tensor([3.0], dtype=D), torch.ones(1, 2))
    loss.backward()
    # token-mean over 2 tokens: d/dlogp of -A * exp(logp) / 2 is -A * ratio / 2; the clipped token has none.
    assert logprobs.grad[0].tolist() == pytest.approx([0.0, -3.0 * 1.1 / 2])


def test_dual_clip_bounds_negative_advantages():
    # (A, ratio): (-2, 4.0) -> unclipped 8.0 > dual bound 2 * 3 = 6.0; (+2, 4.0) -> clipped -2 * 1.28 (no dual clip).
    logprobs, old = from_ratios([[4.0], [4.0]])
    adv = torch.tensor([-2.0, 2.0], dtype=D)
    loss, m = ppo_clip_loss(logprobs, old, adv, torch.ones(2, 1), clip_ratio_c=3.0)
    assert loss.item() == pytest.approx((2.0 * 3.0 - 2.0 * 1.28) / 2)
    assert m["dual_clipfrac"] == pytest.approx(1 / 2)
    loss.backward()
    assert logprobs.grad.tolist() == [[0.0], [0.0]]  # both tokens are clipped
    logprobs, old = from_ratios([[4.0], [4.0]])
    loss, m = ppo_clip_loss(logprobs, old, adv, torch.ones(2, 1), clip_ratio_c=None)
    assert loss.item() == pytest.approx((2.0 * 4.0 - 2.0 * 1.28) / 2) and m["dual_clipfrac"] == 0.0
    logprobs, old = from_ratios([[4.0], [4.0]])
    loss, _ = ppo_clip_loss(logprobs, old, adv, torch.ones(2, 1), clip_ratio_c=10.0)
    assert loss.item() == pytest.approx((2.0 * 4.0 - 2.0 * 1.28) / 2)  # 8.0 is under the bound 2 * 10


def test_per_token_advantages():
    logprobs, old = from_ratios([[1.0, 1.1]])
    loss, _ = ppo_clip_loss(logprobs, old, torch.tensor([[1.0, -2.0]], dtype=D), torch.ones(1, 2))
    assert loss.item() == pytest.approx((-1.0 * 1.0 + 2.0 * 1.1) / 2)


def test_entropy_bonus():
    logprobs, old = from_ratios(RATIOS)
    entropy = torch.tensor([[0.5, 1.5, 9.0], [1.0, 2.0, 3.0]], dtype=D)
    pg = (-2.0 * 1.0 - 2.0 * 1.1 + 0.9 + 1.2 + 1.0) / 5
    mean_entropy = (0.5 + 1.5 + 1.0 + 2.0 + 3.0) / 5
    loss, m = regularise(*ppo_clip_loss(logprobs, old, ADV, MASK), logprobs, MASK, entropy=entropy, entropy_coef=0.1)
    assert loss.item() == pytest.approx(pg - 0.1 * mean_entropy)
    assert m["entropy"] == pytest.approx(mean_entropy) and m["pg_loss"] == pytest.approx(pg)
    assert m["loss"] == pytest.approx(pg - 0.1 * mean_entropy) and list(m)[-2:] == ["entropy", "loss"]
    loss, m = regularise(*ppo_clip_loss(logprobs, old, ADV, MASK), logprobs, MASK, entropy=entropy)  # reported only
    assert loss.item() == pytest.approx(pg) and m["entropy"] == pytest.approx(mean_entropy)


def test_k3_kl_penalty_and_approx_kl_metric():
    # ratios 1 and 2 against old; reference log-probs log 2 and log 0.5 against logp = log 1 and log 2.
    logprobs, old = from_ratios([[1.0, 2.0]])
    ref = torch.log(torch.tensor([[2.0, 1.0]], dtype=D))
    k3_first = 2.0 - math.log(2.0) - 1.0  # delta = ref - logp = log 2
    k3_second = 0.5 + math.log(2.0) - 1.0  # delta = log 1 - log 2
    pg = (-1.0 * 1.0 - 1.0 * 1.28) / 2  # A = 1; ratio 2 clipped to 1.28
    loss, m = regularise(*ppo_clip_loss(logprobs, old, torch.tensor([1.0], dtype=D), torch.ones(1, 2)), logprobs,
                         torch.ones(1, 2), ref_logprobs=ref, kl_coef=0.5)
    assert m["kl"] == pytest.approx((k3_first + k3_second) / 2)
    assert loss.item() == pytest.approx(pg + 0.5 * (k3_first + k3_second) / 2)
    # approx_kl is k3 of KL(old || new): exp(-log r) - 1 + log r.
    assert m["approx_kl"] == pytest.approx((0.0 + (0.5 - 1.0 + math.log(2.0))) / 2)


def test_sample_weights_scale_each_sequence():
    logprobs, old = from_ratios(RATIOS)
    weights = torch.tensor([0.5, 3.0], dtype=D)
    loss, _ = ppo_clip_loss(logprobs, old, ADV, MASK, sample_weights=weights, loss_agg_mode="seq-mean-token-sum")
    assert loss.item() == pytest.approx((0.5 * (-2.0 * 1.0 - 2.0 * 1.1) + 3.0 * (0.9 + 1.2 + 1.0)) / 2)


def test_float32_inputs_and_bool_mask():
    logprobs = torch.zeros(2, 2, requires_grad=True)
    loss, m = ppo_clip_loss(logprobs, torch.zeros(2, 2), torch.tensor([1.0, -1.0]), torch.tensor([[True, False],
                                                                                                   [True, True]]))
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx((-1.0 + 1.0 + 1.0) / 3)
    assert all(isinstance(v, float) for v in m.values())


@pytest.mark.parametrize("kwargs, message", [
    (dict(clip_ratio_c=1.0), "clip_ratio_c must be > 1"),
    (dict(clip_ratio_c=0.5), "clip_ratio_c must be > 1"),
    (dict(loss_agg_mode="token-sum"), "unknown loss aggregation 'token-sum'"),
])
def test_bad_arguments(kwargs, message):
    logprobs, old = from_ratios(RATIOS)
    with pytest.raises(ValueError, match=message):
        ppo_clip_loss(logprobs, old, ADV, MASK, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(entropy_coef=0.01), "entropy_coef is non-zero but no entropy"),
    (dict(kl_coef=0.1), "kl_coef is non-zero but no ref_logprobs"),
])
def test_a_regulariser_without_its_input_is_refused(kwargs, message):
    logprobs, old = from_ratios(RATIOS)
    with pytest.raises(ValueError, match=message):
        regularise(*ppo_clip_loss(logprobs, old, ADV, MASK), logprobs, MASK, **kwargs)


def test_ppo_clip_is_the_registered_default_policy_loss():
    assert POLICY_LOSSES.get("ppo-clip") is ppo_clip_loss and POLICY_LOSSES.names() == ["ppo-clip"]
