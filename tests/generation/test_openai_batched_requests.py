"""The OpenAI-compatible client's request shape: a prompt's samples in one ``n``-request, token ids and log-probs
asked for and returned, and cancellation of a shared request (the fake server on 127.0.0.1; the real vLLM server is
tests/generation/test_openai_vllm_server.py)."""

import asyncio

import pytest

pytest.importorskip("httpx")

from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.generation.server.answers import completions_of  # noqa: E402
from reinforce_ada.generation.server.client import OpenAICompletionsEngine  # noqa: E402
from reinforce_ada.sampling.protocols import GenerationRequest  # noqa: E402
from reinforce_ada.sampling.sampler import AdaptiveSampler  # noqa: E402
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

from streaming_fakes import FakeOpenAIServer, text_verifier  # noqa: E402

RATES = {f"question {i}": r for i, r in enumerate([0.5, 0.2, 0.8, 0.0])}


def prompts():
    return [Prompt(i, text) for i, text in enumerate(RATES)]


def test_generate_sends_one_request_per_prompt_and_returns_token_ids_and_logprobs():
    with FakeOpenAIServer(pass_rates=RATES) as server:
        client = OpenAICompletionsEngine(server.url, "m", max_tokens=8, max_n=3)
        out = client.generate([GenerationRequest(p, 4) for p in prompts()])
    assert [len(row) for row in out] == [4, 4, 4, 4]
    # 4 samples with max_n=3: one request of 3 and one of 1 per prompt
    assert sorted(b["n"] for b in server.bodies.values()) == [1] * 4 + [3] * 4
    body = next(iter(server.bodies.values()))
    assert body["logprobs"] == 0 and body["return_token_ids"] is True and body["max_tokens"] == 8
    for row, prompt in zip(out, prompts()):
        names = [c.text.split("|")[1] for c in row]
        assert len(set(names)) == 4 and all(n.split("-")[1] == str(prompt.prompt_id) for n in names)
        for c in row:
            assert c.prompt_id == prompt.prompt_id
            assert list(c.token_ids) == [ord(ch) for ch in c.text]  # in index order although the fake reversed them
            assert c.logprobs == pytest.approx([-1 / (i + 1) for i in range(len(c.text))])
    assert client.num_requests == 8 and client.num_completions == 16


def test_logprobs_can_be_turned_off_and_chat_asks_for_them_its_own_way():
    client = OpenAICompletionsEngine("http://127.0.0.1:1", "m", return_logprobs=False)
    _, body = client._payload(Prompt(0, "q"), 2)
    assert body["n"] == 2 and "logprobs" not in body and "return_token_ids" not in body
    path, body = OpenAICompletionsEngine("http://127.0.0.1:1", "m")._payload(Prompt(0, [{"role": "user",
                                                                                            "content": "q"}]))
    assert path == "/v1/chat/completions" and body["logprobs"] is True and body["top_logprobs"] == 0
    chat = {"choices": [{"index": 0, "message": {"content": "ab"}, "token_ids": [5, 6],
                         "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.5}]}}]}
    [c] = completions_of(Prompt(0, "q"), chat)
    assert c.token_ids == (5, 6) and c.logprobs == [-0.5, -1.5]
    named = {"choices": [{"index": 0, "text": "ab", "logprobs": {"tokens": ["token_id:7", "token_id:8"],
                                                                   "token_logprobs": [-0.1, -0.2]}}]}
    [c] = completions_of(Prompt(0, "q"), named)  # return_tokens_as_token_ids instead of token_ids
    assert c.token_ids == (7, 8) and c.logprobs == [-0.1, -0.2]
    with pytest.raises(ValueError, match="log-probs for"):
        completions_of(Prompt(0, "q"), {"choices": [{"text": "ab", "token_ids": [1],
                                                    "logprobs": {"token_logprobs": [-0.1, -0.2]}}]})
    with pytest.raises(ValueError, match="expected 2"):
        completions_of(Prompt(0, "q"), named, 2)


def test_the_streaming_sampler_coalesces_a_prompts_wave_into_one_request():
    cfg = SamplerConfig(samples_per_round=4, max_rounds=2, group_size=4)
    with FakeOpenAIServer(pass_rates=RATES) as server:
        client = OpenAICompletionsEngine(server.url, "m", max_tokens=8)
        options = StreamingOptions(allocation="fixed", fill_idle=False)
        batch = StreamingSampler(client, text_verifier, cfg, options).sample(prompts())
    assert sorted(batch.pools) == [0, 1, 2, 3]
    # "fixed": M=4 per wave, each wave of a prompt one request of n=4; prompt 3 (never right) takes both waves
    assert all(b["n"] == 4 for b in server.bodies.values())
    assert client.num_requests == len(server.bodies) == sum(p.num_drawn for p in batch.pools.values()) // 4
    assert batch.pools[3].num_drawn == 8
    kept = [c for p in batch.pools.values() for c in p.completions]
    assert len({c.text.split("|")[1] for c in kept}) == len(kept)  # every sample once
    assert all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids) > 0 for c in kept)
    # the round sampler on the same client: one request per prompt and round too
    with FakeOpenAIServer(pass_rates=RATES) as server:
        client = OpenAICompletionsEngine(server.url, "m", max_tokens=8)
        batch = AdaptiveSampler(client, text_verifier, cfg).sample(prompts())
    assert all(b["n"] == 4 for b in server.bodies.values()) and batch.pools[3].num_drawn == 8


def test_a_shared_request_is_cancelled_only_when_all_its_samples_are():
    async def scenario(server, client):
        prompt = Prompt(0, "question 0")
        calls = [asyncio.ensure_future(client.complete(prompt, f"s-0-{k}")) for k in range(3)]
        while not server.held["s-0-0"]:  # the server holds the one request for all three samples
            await asyncio.sleep(0.01)
        calls[0].cancel()
        calls[1].cancel()
        await asyncio.gather(calls[0], calls[1], return_exceptions=True)
        await asyncio.sleep(0)
        still_open = client.num_cancelled_requests == 0 and not calls[2].done()
        calls[2].cancel()
        await asyncio.gather(calls[2], return_exceptions=True)
        for _ in range(20):  # a few loop turns for the request's cancellation to run (not aclose's)
            await asyncio.sleep(0)
        cancelled = client.num_cancelled_requests
        await client.aclose()
        return still_open and cancelled == 1

    with FakeOpenAIServer(lambda i, rid, a: "hold") as server:
        client = OpenAICompletionsEngine(server.url, "m", max_tokens=8)
        still_open = asyncio.run(scenario(server, client))
        bodies = dict(server.bodies)
    assert list(bodies) == ["s-0-0"] and bodies["s-0-0"]["n"] == 3
    assert still_open  # two of three samples cancelled: the request keeps going for the third
    assert client.num_cancelled_requests == 1 and client.num_completions == 0


def test_samples_cancelled_before_the_request_is_sent_are_not_asked_for():
    async def scenario(client):
        prompt = Prompt(0, "question 0")
        calls = [asyncio.ensure_future(client.complete(prompt, f"s-0-{k}")) for k in range(3)]
        await asyncio.sleep(0)  # the calls have joined one forming request, not yet sent
        calls[0].cancel()
        out = await asyncio.gather(*calls, return_exceptions=True)
        await client.aclose()
        return out

    with FakeOpenAIServer() as server:
        client = OpenAICompletionsEngine(server.url, "m", max_tokens=8)
        out = asyncio.run(scenario(client))
    assert isinstance(out[0], asyncio.CancelledError) and all(c.prompt_id == 0 for c in out[1:])
    assert [b["n"] for b in server.bodies.values()] == [2]
