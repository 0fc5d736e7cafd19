"""The OpenAI-compatible client's total deadline, and one failed sample in the round-based sampler.

Servers run on 127.0.0.1 in this process and stop by themselves (bounded drip, daemon threads).
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
import warnings

import pytest

pytest.importorskip("httpx")

from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.generation.server.client import OpenAICompletionsEngine  # noqa: E402
from reinforce_ada.sampling.sampler import AdaptiveSampler  # noqa: E402
from reinforce_ada.sampling.protocols import GenerationError, GenerationRequest  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

from streaming_fakes import FakeOpenAIServer, text_verifier  # noqa: E402


class DripServer:
    """Answers every request with headers at once, then one body byte every ``interval_s``, at most ``max_bytes``
    (then it closes): a server that keeps a connection alive without ever finishing the answer in time."""

    def __init__(self, interval_s: float = 0.2, max_bytes: int = 60):
        self.interval_s, self.max_bytes = interval_s, max_bytes
        self.bytes_sent: list[int] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.drips: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            drip = threading.Thread(target=self._drip, args=(conn,), daemon=True)
            self.drips.append(drip)
            drip.start()

    def _drip(self, conn: socket.socket) -> None:
        sent = 0
        try:
            conn.settimeout(2.0)
            conn.recv(65536)  # the request (small enough for one read)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % (self.max_bytes + 1000))
            for _ in range(self.max_bytes):
                if self.stopped.wait(self.interval_s):
                    break
                conn.sendall(b" ")
                sent += 1
        except OSError:  # the client hung up: what the deadline should make it do
            pass
        finally:
            self.bytes_sent.append(sent)
            conn.close()

    def __enter__(self) -> "DripServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for drip in self.drips:  # each records its bytes_sent on the way out: read them only after that
            drip.join(timeout=5)
        self.sock.close()


def test_timeout_is_a_deadline_for_the_whole_answer():
    with DripServer(interval_s=0.2, max_bytes=60) as server:  # dripping all 60 bytes would take 12 s
        client = OpenAICompletionsEngine(server.url, "m", timeout_s=0.5, max_attempts=2, backoff_s=0.0)
        start = time.monotonic()
        with pytest.raises(GenerationError, match=r"failed 2 times; last error: no complete answer within "
                                                  r"timeout_s=0.5"):
            client.generate([GenerationRequest(Prompt(0, "question 0"), 1)])
        elapsed = time.monotonic() - start
    # two attempts of 0.5 s each; per-read timeouts would have waited for all 60 bytes (12 s per attempt)
    assert elapsed < 6.0, elapsed
    assert client.num_requests == 2
    assert len(server.bytes_sent) == 2 and max(server.bytes_sent) < 20, server.bytes_sent


def test_the_async_path_has_the_same_deadline():
    with DripServer(interval_s=0.2, max_bytes=60) as server:
        client = OpenAICompletionsEngine(server.url, "m", timeout_s=0.4, max_attempts=1)

        async def one():
            try:
                return await client.complete(Prompt(0, "q"), "r-0")
            finally:
                await client.aclose()

        start = time.monotonic()
        with pytest.raises(GenerationError, match="no complete answer within timeout_s=0.4"):
            asyncio.run(one())
        assert time.monotonic() - start < 5.0


def test_generate_inside_a_running_loop_fails_clearly_without_a_stray_coroutine():
    client = OpenAICompletionsEngine("http://127.0.0.1:1", "m")

    async def inside():
        client.generate([GenerationRequest(Prompt(0, "q"), 1)])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="inside a running event loop"):
            asyncio.run(inside())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


RATES = {f"question {i}": 0.5 for i in range(4)}


def prompts():
    return [Prompt(i, text) for i, text in enumerate(RATES)]


def one_doomed_sample():
    """A plan where the first sample of prompt 2 in the first call fails on every attempt (HTTP 500)."""
    state = {}

    def plan(index, request_id, attempt):
        call_id = request_id.split("-")[0]
        state.setdefault("first_call", call_id)
        return "500" if call_id == state["first_call"] and request_id.endswith("-2-0") else "ok"

    return plan


def test_round_based_sampler_keeps_the_round_when_one_sample_exhausts_its_retries():  # one request per sample
    cfg = SamplerConfig(samples_per_round=4, max_rounds=1, group_size=2, exit_rule="once", generation_retries=0)
    with FakeOpenAIServer(one_doomed_sample(), pass_rates=RATES) as server:
        client = OpenAICompletionsEngine(server.url, "m", timeout_s=5.0, max_attempts=2, backoff_s=0.001, max_n=1)
        batch = AdaptiveSampler(client, text_verifier, cfg).sample(prompts())
    assert batch.generation_error is None
    assert batch.metrics["num_failed_samples"] == 1.0
    assert {pid: pool.num_drawn for pid, pool in batch.pools.items()} == {0: 4, 1: 4, 2: 3, 3: 4}
    assert len(batch.groups) == 4  # no prompt lost: prompt 2 lost one sample, not its group
    assert max(server.attempts.values()) == 2  # the doomed sample had its max_attempts, no more
    # every attempt the client made reached the server: 16 first attempts and the doomed sample's one retry (a
    # connection reset before the server read the request, e.g. by a too small listen backlog, would show here)
    assert client.num_requests == sum(server.attempts.values()) == 17
    assert client.num_completions == 15


def test_round_based_sampler_asks_again_for_the_failed_sample_only():
    cfg = SamplerConfig(samples_per_round=4, max_rounds=1, group_size=2, exit_rule="once", generation_retries=1)
    with FakeOpenAIServer(one_doomed_sample(), pass_rates=RATES) as server:
        client = OpenAICompletionsEngine(server.url, "m", timeout_s=5.0, max_attempts=2, backoff_s=0.001, max_n=1)
        batch = AdaptiveSampler(client, text_verifier, cfg).sample(prompts())
    assert batch.metrics["num_failed_samples"] == 0.0
    assert all(pool.num_drawn == 4 for pool in batch.pools.values())
    # 16 samples in the first call, then one request for the one missing sample: the 15 made are not redone
    assert client.num_completions == 16 and len(server.served) == 16


def test_every_sample_failing_still_fails_the_first_round():
    with FakeOpenAIServer(lambda i, rid, a: "500") as server:
        client = OpenAICompletionsEngine(server.url, "m", timeout_s=5.0, max_attempts=1, backoff_s=0.0)
        with pytest.raises(GenerationError, match="HTTP 500"):
            AdaptiveSampler(client, text_verifier, SamplerConfig(generation_retries=0)).sample(prompts())
