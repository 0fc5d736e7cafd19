"""A server that stops answering is dead after a bounded time, not after hundreds of retries, and no partial batch
comes back from it; a server whose completions carry no token ids is refused by name, not retried."""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("httpx")

from reinforce_ada.generation.server.liveness import Liveness, ServerDeadError  # noqa: E402
from reinforce_ada.generation.server.answers import MissingTokenIdsError  # noqa: E402
from reinforce_ada.generation.server.client import OpenAICompletionsEngine  # noqa: E402
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationRequest  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

from streaming_fakes import FakeOpenAIServer  # noqa: E402


def requests(num: int = 16, samples: int = 4) -> list[GenerationRequest]:
    return [GenerationRequest(Prompt(i, f"q{i}"), samples) for i in range(num)]


class FakeClock:
    """Liveness's clock: ``sleep`` moves it on at once (no test waits for wall-clock time)."""

    def __init__(self):
        self.now = 0.0

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def test_a_server_that_is_gone_is_dead_after_the_bound_without_retrying_each_request():
    with FakeOpenAIServer() as server:
        url = server.url
    clock = FakeClock()
    engine = OpenAICompletionsEngine(url, "m", max_tokens=4, max_attempts=5, backoff_s=0.0)
    engine.liveness = Liveness(url, dead_after_s=30.0, probe_every_s=5.0, clock=clock.time, sleep=clock.sleep)
    with pytest.raises(ServerDeadError, match=r"the server at http://127.0.0.1:\d+ has answered nothing for 30 s .*"
                                              r"server_dead_after=30 s\): it is treated as dead; last error: "
                                              r"ConnectError"):
        engine.generate(requests())
    # each request was sent once, then waited for the server with the others: no request was retried
    assert engine.num_requests == 16 and engine.num_retries == 0
    assert engine.liveness.num_probes <= 30 / 5 + 1  # one probe every probe_every_s, shared by all requests


def test_a_hung_server_is_dead_after_the_bound_not_after_the_request_timeout():
    with FakeOpenAIServer(plan=lambda i, rid, a: "hold", health="hold") as server:
        engine = OpenAICompletionsEngine(server.url, "m", max_tokens=4, timeout_s=600.0, dead_after_s=0.4)
        engine.liveness.probe_every_s = 0.05
        with pytest.raises(ServerDeadError, match=r"has answered nothing for \d+\.\d s .* last error: no answer to "
                                                  r"/health") as raised:
            engine.generate(requests(4, 2))
        # at least the bound; how much later it is noticed depends on the machine's load, so no upper bound
        assert float(re.search(r"nothing for ([\d.]+) s", str(raised.value)).group(1)) >= 0.4
        assert sum(server.held.values()) == 4  # every request was sent once and held; none was sent again


def test_a_busy_server_that_answers_its_health_probe_is_not_dead():
    plan = lambda i, rid, a: "timeout"  # noqa: E731 -- every answer comes after slow_s, longer than dead_after_s
    with FakeOpenAIServer(plan=plan, slow_s=0.6) as server:
        engine = OpenAICompletionsEngine(server.url, "m", max_tokens=4, dead_after_s=0.3)
        engine.liveness.probe_every_s = 0.05
        out = engine.generate(requests(2, 2))
        assert [len(o) for o in out] == [2, 2] and server.health_checks > 0


def test_no_partial_batch_comes_back_from_a_server_that_died_midway():
    # the first two requests are answered, then the server hangs (requests and health probes alike)
    with FakeOpenAIServer(plan=lambda i, rid, a: "ok" if i < 2 else "hold", health="hold") as server:
        engine = OpenAICompletionsEngine(server.url, "m", max_tokens=4, max_n=2, dead_after_s=0.4)
        engine.liveness.probe_every_s = 0.05
        with pytest.raises(ServerDeadError):  # not a PartialGenerationError with what the first requests made
            engine.generate(requests(4, 2))
        assert sum(server.served.values()) == 2


def test_completions_without_token_ids_are_refused_by_name_and_not_retried():
    with FakeOpenAIServer(token_ids=False) as server:
        engine = OpenAICompletionsEngine(server.url, "m", max_tokens=4, require_token_ids=True)
        with pytest.raises(MissingTokenIdsError, match=r"returned a completion without token ids \(it ignored "
                                                       r"return_token_ids\)"):
            engine.generate(requests(3, 2))
        assert server.arrivals == 3 and issubclass(MissingTokenIdsError, FatalGenerationError)


def test_prompts_go_as_the_token_ids_given():
    with FakeOpenAIServer() as server:
        engine = OpenAICompletionsEngine(server.url, "m", max_tokens=4, prompt_token_ids=lambda p: [7, p.prompt_id])
        engine.generate([GenerationRequest(Prompt(3, [{"role": "user", "content": "hi"}]), 1)])
        [body] = server.bodies.values()
        assert body["prompt"] == [7, 3] and "messages" not in body
