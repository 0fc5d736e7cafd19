"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 with injected failures.

No test here depends on how fast the machine is: a request the server holds ("hold") times out when the server has
counted it as held (:class:`EventClockEngine`, an event), never by a short wall-clock timeout that a loaded machine
can exceed for an ordinary answer too.
"""

import asyncio
from collections import Counter

import pytest

pytest.importorskip("httpx")

from reinforce_ada.config import SamplerConfig
from reinforce_ada.generation.server.answers import ServerRequestError, completions_of
from reinforce_ada.generation.server.client import OpenAICompletionsEngine
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.protocols import GenerationError, GenerationRequest
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
from reinforce_ada.types import Prompt

from streaming_fakes import FakeOpenAIServer, sample_name, text_verifier, unit_hash

FAILURES = ["500", "drop", "hold", "garbage", "429", "503"]
RATES = {f"question {i}": r for i, r in enumerate([0.5, 0.2, 0.8, 0.0, 1.0, 0.4, 0.6, 0.3])}


def prompts():
    return [Prompt(i, text) for i, text in enumerate(RATES)]


def first_attempt_fails(index, request_id, attempt):
    """Roughly 60% of requests fail on their first attempt with one of the failure kinds; retries succeed."""
    if attempt == 1 and unit_hash("fail", sample_name(request_id)) < 0.6:
        return FAILURES[int(unit_hash("kind", sample_name(request_id)) * len(FAILURES))]
    return "ok"


class EventClockEngine(OpenAICompletionsEngine):
    """The client with its clock replaced by an event: an attempt is late once the server says it holds it (the
    server's ``held`` count for that request id passed the timeouts already given to it), whatever the time."""

    def __init__(self, server, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.server = server
        self.timeouts_given: Counter = Counter()

    async def _within_deadline(self, answer, request_id):
        task = asyncio.ensure_future(answer)
        while not task.done():
            if self.server.held[request_id] > self.timeouts_given[request_id]:
                self.timeouts_given[request_id] += 1
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise asyncio.TimeoutError
            await asyncio.wait([task], timeout=0.01)  # polls the event; the outcome does not depend on its period
        return task.result()


def engine(server, **kw):
    """Retries fast; the deadline is the event above, and the real one (60 s) is never reached by a normal answer."""
    params = dict(timeout_s=60.0, max_attempts=4, backoff_s=0.001, backoff_max_s=0.01, max_connections=16)
    params.update(kw)
    return EventClockEngine(server, server.url, "fake-model", max_tokens=8, **params)


def check_no_prompt_lost_or_duplicated(batch):
    assert sorted(batch.pools) == list(range(len(RATES)))
    seen = Counter()
    for pid, pool in batch.pools.items():
        assert pool.count == pool.num_drawn
        for completion in pool.completions:
            request_id = completion.text.split("|")[1]
            assert request_id.split("-")[-2] == str(pid)  # the completion belongs to its prompt
            seen[request_id] += 1
    assert seen and max(seen.values()) == 1  # every sample once


def test_streaming_sampler_survives_injected_failures():
    with FakeOpenAIServer(first_attempt_fails, pass_rates=RATES) as server:
        client = engine(server, max_n=1)  # one request per sample: every sample meets its own failure
        sampler = StreamingSampler(client, text_verifier, SamplerConfig(), StreamingOptions(max_in_flight=16))
        batch = sampler.sample(prompts())
    assert batch.generation_error is None
    check_no_prompt_lost_or_duplicated(batch)
    kinds = Counter(action for _, action in server.actions)
    assert all(kinds[k] > 0 for k in FAILURES), kinds  # every failure kind was really exercised
    # a sample whose first attempt failed was retried and kept once (failures of cancelled samples need no retry)
    first_action = {}
    for request_id, action in server.actions:
        first_action.setdefault(request_id, action)
    kept = [c.text.split("|")[1] for p in batch.pools.values() for c in p.completions]
    retried = [rid for rid in kept if first_action[rid] != "ok"]
    assert retried and all(server.attempts[rid] >= 2 for rid in retried), [(r, first_action[r], server.attempts[r]) for r in retried if server.attempts[r] < 2]
    assert client.num_retries >= len(retried)
    assert client.num_completions == batch.metrics["total_samples"]
    # a prompt that is never right nor wrong can't meet the balanced rule: it uses the whole budget, exactly once each
    assert batch.pools[3].num_drawn == batch.pools[4].num_drawn == 32
    assert server.bodies and all(b["n"] == 1 and b["max_tokens"] == 8 for b in server.bodies.values())


def test_round_based_sampler_uses_the_same_client():
    with FakeOpenAIServer(first_attempt_fails, pass_rates=RATES) as server:
        batch = AdaptiveSampler(engine(server), text_verifier, SamplerConfig()).sample(prompts())
    assert sorted(batch.pools) == list(range(len(RATES)))
    assert all(p.count == p.num_drawn > 0 for p in batch.pools.values())


def test_persistent_failure_ends_the_step_without_losing_prompts():
    def one_prompt_always_fails(index, request_id, attempt):
        return "500" if request_id.split("-")[-2] == "2" else "ok"

    with FakeOpenAIServer(one_prompt_always_fails, pass_rates=RATES) as server:
        sampler = StreamingSampler(engine(server, max_attempts=2), text_verifier, SamplerConfig(generation_retries=0))
        batch = sampler.sample(prompts())
    assert batch.generation_error is not None and "failed 2 times" in batch.generation_error
    assert sorted(batch.pools) == list(range(len(RATES)))
    assert batch.pools[2].num_drawn == 0
    # bounded: attempts per request id never exceed max_attempts
    assert max(server.attempts.values()) <= 2


def test_client_errors_are_not_retried():
    with FakeOpenAIServer(lambda i, rid, a: "400") as server:
        client = engine(server)
        with pytest.raises(GenerationError, match="HTTP 400"):
            client.generate([GenerationRequest(Prompt(0, "question 0"), 1)])
    assert client.num_requests == 1
    assert issubclass(ServerRequestError, GenerationError)


def test_chat_prompts_use_the_chat_endpoint_and_bad_urls_fail_early():
    with pytest.raises(ValueError, match="http"):
        OpenAICompletionsEngine("127.0.0.1:8000", "m")
    client = OpenAICompletionsEngine("http://127.0.0.1:1/v1", "m")
    path, body = client._payload(Prompt(0, [{"role": "user", "content": "hi"}]))
    assert path == "/v1/chat/completions" and body["messages"][0]["content"] == "hi"
    assert client.base_url == "http://127.0.0.1:1"
    [completion] = completions_of(Prompt(0, "x"),
                                  {"choices": [{"message": {"content": "ok"}, "finish_reason": "length"}]})
    assert completion.text == "ok" and completion.finish_reason == "length"
