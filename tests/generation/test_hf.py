"""HFGenerator on the tiny character-level model: counts, order, EOS handling, log-probs, padding, seeds."""

import pytest
import torch

from reinforce_ada.generation import HFGenerator, encode_prompt
from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.sampling.protocols import GenerationRequest, Generator
from reinforce_ada.types import Prompt

EOS = 1


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="module")
def model():
    """The tiny model with a larger EOS embedding, so that some completions stop early and others run to length."""
    model = build_tiny_model()
    with torch.no_grad():
        model.model.embed_tokens.weight[EOS] *= 6  # tied with lm_head: the EOS logit swings widely by context
    return model


def requests_of(*pairs):
    return [GenerationRequest(Prompt(pid, text), num) for pid, text, num in pairs]


REQUESTS = (("a", "1+1=", 8), ("bb", "12+30=", 8), ("c", "7*8=", 0), ("d", "(9-4)*3=", 6))


def test_counts_order_and_fields(model, tokenizer):
    gen = HFGenerator(model, tokenizer, max_new_tokens=12, seed=1, max_batch_size=5)
    assert isinstance(gen, Generator)
    out = gen.generate(requests_of(*REQUESTS))
    assert [len(o) for o in out] == [8, 8, 0, 6]
    for (pid, _, _), completions in zip(REQUESTS, out):
        for c in completions:
            assert c.prompt_id == pid
            assert 1 <= len(c.token_ids) <= 12
            assert len(c.logprobs) == len(c.token_ids)
            assert all(lp <= 0.0 for lp in c.logprobs)
            assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)
            if c.finish_reason == "stop":  # EOS kept, and only as the last token
                assert c.token_ids[-1] == EOS and EOS not in c.token_ids[:-1]
                assert "<eos>" not in c.text
            else:
                assert c.finish_reason == "length" and len(c.token_ids) == 12 and EOS not in c.token_ids
    reasons = {c.finish_reason for o in out for c in o}
    assert reasons == {"stop", "length"}, "the fixture model should give both kinds of ending with this seed"


def test_logprobs_match_a_separate_forward_pass(model, tokenizer):
    """Left padding, batching by length and the one-step-behind recorder give the same numbers as a plain forward."""
    gen = HFGenerator(model, tokenizer, max_new_tokens=12, seed=3, max_batch_size=7)
    requests = requests_of(*REQUESTS)
    out = gen.generate(requests)
    num_checked = 0
    for request, completions in zip(requests, out):
        prompt_ids = encode_prompt(tokenizer, request.prompt)
        for c in completions:
            ids = torch.tensor([prompt_ids + list(c.token_ids)])
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt_ids) - 1:-1]  # (T, V): position t predicts token t
            expected = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
            torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=2e-4, rtol=1e-4)
            num_checked += 1
    assert num_checked == 22


def test_logprobs_use_the_tempered_distribution(model, tokenizer):
    gen = HFGenerator(model, tokenizer, max_new_tokens=6, temperature=0.5, seed=0)
    request = requests_of(("a", "1+1=", 3))
    prompt_ids = encode_prompt(tokenizer, request[0].prompt)
    for c in gen.generate(request)[0]:
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids + list(c.token_ids)])).logits[0, len(prompt_ids) - 1:-1]
        expected = torch.log_softmax(logits / 0.5, dim=-1).gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=2e-4, rtol=1e-4)


def test_forced_eos_is_kept_with_its_logprob(tokenizer):
    """A hook that makes EOS certain from the third generated token on: every completion is 3 tokens, EOS last."""
    model = build_tiny_model()
    calls = {"n": 0}

    def force_eos(module, inputs, output):
        calls["n"] += 1
        if calls["n"] >= 3:  # call 1 is the prompt (prefill), call 2 the second token
            output = output.clone()
            output[..., EOS] = 1e4
        return output

    handle = model.lm_head.register_forward_hook(force_eos)
    try:
        out = HFGenerator(model, tokenizer, max_new_tokens=10, seed=0).generate(requests_of(("a", "1+1=", 4)))
    finally:
        handle.remove()
    for c in out[0]:
        assert len(c.token_ids) == 3 and c.token_ids[-1] == EOS and c.finish_reason == "stop"
        assert c.logprobs[-1] == pytest.approx(0.0, abs=1e-6)
        assert c.text == tokenizer.decode(c.token_ids[:2])


def test_seed_makes_sampling_reproducible_and_leaves_global_rng(model, tokenizer):
    requests = requests_of(*REQUESTS)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = HFGenerator(model, tokenizer, max_new_tokens=8, seed=7).generate(requests)
    assert torch.rand(1) == before  # the forked RNG did not advance the global one
    second = HFGenerator(model, tokenizer, max_new_tokens=8, seed=7).generate(requests)
    other = HFGenerator(model, tokenizer, max_new_tokens=8, seed=8).generate(requests)
    tokens = lambda out: [[tuple(c.token_ids) for c in o] for o in out]  # noqa: E731
    assert tokens(first) == tokens(second)
    assert tokens(first) != tokens(other)
    # consecutive calls of one generator draw different samples (seed + call number)
    gen = HFGenerator(model, tokenizer, max_new_tokens=8, seed=7)
    assert tokens(gen.generate(requests)) == tokens(first)
    assert tokens(gen.generate(requests)) != tokens(first)


def test_batch_size_does_not_change_the_shapes(model, tokenizer):
    requests = requests_of(*REQUESTS)
    for max_batch_size in (1, 3, 64):
        out = HFGenerator(model, tokenizer, max_new_tokens=4, seed=0, max_batch_size=max_batch_size).generate(requests)
        assert [len(o) for o in out] == [8, 8, 0, 6]
        assert all(len(c.token_ids) == len(c.logprobs) for o in out for c in o)


def test_train_mode_is_restored(tokenizer):
    model = build_tiny_model()
    gen = HFGenerator(model, tokenizer, max_new_tokens=2, seed=0)
    model.train()
    gen.generate(requests_of(("a", "1=", 1)))
    assert model.training
    model.eval()
    gen.generate(requests_of(("a", "1=", 1)))
    assert not model.training


def test_missing_pad_token_falls_back_to_eos(model):
    tokenizer = build_char_tokenizer()
    tokenizer.pad_token = None
    model = build_tiny_model()
    model.generation_config.pad_token_id = None
    gen = HFGenerator(model, tokenizer, max_new_tokens=5, seed=0)
    assert gen.pad_token_id == EOS
    out = gen.generate(requests_of(("a", "1+1=", 2), ("b", "12345+6=", 2)))
    assert [len(o) for o in out] == [2, 2]
    for c in (c for o in out for c in o):
        assert EOS not in c.token_ids[:-1]


def test_chat_messages_go_through_the_template(model):
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}a:{% endif %}")
    messages = Prompt("m", [{"role": "user", "content": "2+2="}])
    assert encode_prompt(tokenizer, messages) == tokenizer("u:2+2=\na:", add_special_tokens=False)["input_ids"]
    plain = Prompt("p", "2+2=")
    assert encode_prompt(tokenizer, plain) == encode_prompt(tokenizer, messages)
    assert encode_prompt(tokenizer, plain, use_chat_template=False) == tokenizer("2+2=")["input_ids"]
    out = HFGenerator(model, tokenizer, max_new_tokens=3, seed=0).generate([GenerationRequest(messages, 2)])
    assert len(out[0]) == 2


def test_bad_input_is_rejected_before_generation(model, tokenizer):
    with pytest.raises(ValueError, match="temperature"):
        HFGenerator(model, tokenizer, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        HFGenerator(model, tokenizer, top_p=1.5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        HFGenerator(model, tokenizer, max_new_tokens=0)
    gen = HFGenerator(model, tokenizer, max_new_tokens=60)
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        gen.generate(requests_of(("long", "1234567890", 1)))
    with pytest.raises(ValueError, match="zero tokens"):
        gen.generate(requests_of(("empty", "", 1)))
    with pytest.raises(ValueError, match="no chat_template"):
        gen.generate([GenerationRequest(Prompt("m", [{"role": "user", "content": "hi"}]), 1)])
