"""``token_logprobs``'s ``first``: the vocabulary's logits computed from a position on (transformers'
``logits_to_keep``) give the same log-probabilities and entropies there as the whole sequence's, and a model without
``logits_to_keep`` gets the whole sequence's; ``token_entropy`` (the held-out ``eval/entropy``) is unchanged by it."""

from __future__ import annotations

import pytest
import torch

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training.update import padded, token_entropy, token_logprobs
from reinforce_ada.types import Completion


def _rows(tokenizer):
    texts = [("12+34=", "46"), ("7+8=", "15"), ("99+1=", "100")]
    return [(tokenizer(p)["input_ids"], Completion("p", c, token_ids=tokenizer(c)["input_ids"] + [tokenizer.eos_token_id]))
            for p, c in texts]


def test_logits_from_a_position_on_match_the_whole_sequence():
    torch.manual_seed(0)
    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    model.eval()
    rows = _rows(tokenizer)
    length = max(len(p) + len(c.token_ids) for p, c in rows)
    input_ids, attention, _, _ = padded(rows, tokenizer.pad_token_id, length)
    with torch.no_grad():
        whole, whole_entropy = token_logprobs(model, input_ids, attention, 0.7, with_entropy=True)
        for first in (1, 3, length - 2):
            part, part_entropy = token_logprobs(model, input_ids, attention, 0.7, with_entropy=True, first=first)
            assert part.shape == whole.shape and part_entropy.shape == whole.shape
            assert torch.equal(part[:, :first + 1], torch.zeros_like(part[:, :first + 1]))
            torch.testing.assert_close(part[:, first + 1:], whole[:, first + 1:], rtol=0, atol=1e-5)
            torch.testing.assert_close(part_entropy[:, first + 1:], whole_entropy[:, first + 1:], rtol=0, atol=1e-5)


def test_a_model_without_logits_to_keep_gets_the_whole_sequence():
    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    model.eval()

    class Plain(torch.nn.Module):  # forward(input_ids, attention_mask) only
        def forward(self, input_ids, attention_mask):
            return model(input_ids=input_ids, attention_mask=attention_mask)

    rows = _rows(tokenizer)
    length = max(len(p) + len(c.token_ids) for p, c in rows)
    input_ids, attention, _, _ = padded(rows, tokenizer.pad_token_id, length)
    with torch.no_grad():
        whole, _ = token_logprobs(model, input_ids, attention, 1.0)
        plain, _ = token_logprobs(Plain(), input_ids, attention, 1.0, first=3)
    assert torch.equal(plain, whole)


@pytest.mark.parametrize("micro_batch_size", [1, 2, 8])
def test_token_entropy_is_the_completion_tokens_entropy(micro_batch_size):
    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    rows = _rows(tokenizer)
    total, count = token_entropy(model, rows, tokenizer.pad_token_id, 1.0, micro_batch_size, "cpu")
    length = max(len(p) + len(c.token_ids) for p, c in rows)
    input_ids, attention, response_mask, _ = padded(rows, tokenizer.pad_token_id, length)
    model.eval()
    with torch.no_grad():
        _, entropy = token_logprobs(model, input_ids, attention, 1.0, with_entropy=True)
    assert count == int(response_mask.sum()) == sum(len(c.token_ids) for _, c in rows)
    assert total == pytest.approx(float((entropy * response_mask).sum()), rel=1e-5)
