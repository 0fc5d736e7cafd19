"""Client for an OpenAI-compatible completions server (``vllm serve``, SGLang, ...).

One HTTP request per sample (``n=1``): the streaming sampler then scores each completion as soon as it arrives and
cancels a prompt's outstanding requests when it exits -- cancelling the awaiting task closes the connection, and
vLLM and SGLang abort a request whose client disconnected. Prompts given as chat messages go to
``/v1/chat/completions``, plain strings to ``/v1/completions``.

``timeout_s`` is a deadline for each attempt as a whole (connecting, sending, and reading the whole answer): a server
that keeps the connection alive by dripping a byte now and then cannot hold a request past it. httpx's own timeouts
(per connect, per read) apply inside it.

Failures are retried with exponential backoff (``backoff_s * 2**attempt``, capped at ``backoff_max_s``, with
deterministic jitter) when the library's one retry rule (``sampling.protocols.is_transient``) says so: connection
errors, dropped connections, timeouts, HTTP 408/409/429/5xx and malformed bodies are raised as transient
``GenerationError``; other 4xx answers (a bad request will not get better) as ``ServerRequestError``, a
``FatalGenerationError``, and fail at once. Every sample carries its own request id
(``X-Request-Id``), identical across its retries, and produces exactly one :class:`Completion` -- or raises, so a
prompt is never lost silently nor counted twice.

The same object also implements the synchronous :class:`~reinforce_ada.sampling.protocols.Generator` protocol, so the
round-based sampler can use a server too. There a sample that still fails after its retries does not fail the call:
``generate`` raises :class:`~reinforce_ada.sampling.protocols.PartialGenerationError` carrying the completions that
were made, and the sampler keeps them, asks again for the failed samples only and counts those it never gets
(``num_failed_samples``). When every sample fails, the first failure is raised. Every request has finished before
``generate`` returns or raises, so none is left running when its event loop closes.

Needs ``httpx`` (imported when the first request is made).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from typing import Any, Sequence

from reinforce_ada.sampling.protocols import (
    FatalGenerationError,
    GenerationError,
    GenerationRequest,
    PartialGenerationError,
    is_transient,
)
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ServerRequestError(FatalGenerationError):
    """The server refused a request in a way retrying will not fix (a 4xx other than 408/409/425/429)."""


def _httpx():
    try:
        import httpx
    except ImportError as err:  # pragma: no cover - httpx ships with the test extras
        raise ImportError("the OpenAI-compatible client needs httpx: pip install httpx") from err
    return httpx


class OpenAICompletionsEngine:
    """Asynchronous engine (and synchronous generator) over an OpenAI-compatible HTTP server."""

    def __init__(self, base_url: str, model: str, *, max_tokens: int = 1024, temperature: float = 1.0,
                 top_p: float = 1.0, stop: list[str] | None = None, api_key: str | None = None,
                 timeout_s: float = 600.0, max_attempts: int = 5, backoff_s: float = 0.5, backoff_max_s: float = 16.0,
                 max_connections: int = 256, extra_body: dict[str, Any] | None = None, seed: int = 0):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https:// (got {base_url!r})")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 (got {max_attempts})")
        if timeout_s <= 0 or backoff_s < 0 or backoff_max_s < 0:
            raise ValueError("timeout_s must be positive and backoff times >= 0")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive (got {max_tokens})")
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.model = model
        self.sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p}
        if stop:
            self.sampling["stop"] = list(stop)
        self.extra_body = dict(extra_body or {})
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_connections = max_connections
        self._rng = random.Random(seed)
        self._clients: dict[int, Any] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self.num_requests = 0
        """HTTP requests sent, retries included."""
        self.num_retries = 0
        self.num_completions = 0

    # -- HTTP -------------------------------------------------------------------------------------------------------
    def _client(self):
        """One ``httpx.AsyncClient`` per event loop (a client cannot move between loops)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(id(loop))
        if client is None or client.is_closed:
            httpx = _httpx()
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            limits = httpx.Limits(max_connections=self.max_connections,
                                  max_keepalive_connections=self.max_connections)
            # waiting for a free connection is queueing, not a failure: no pool timeout
            timeout = httpx.Timeout(self.timeout_s, pool=None)
            client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout, limits=limits)
            self._clients = {k: v for k, v in self._clients.items() if not v.is_closed}
            self._clients[id(loop)] = client
            self._slots = {k: v for k, v in self._slots.items() if k in self._clients}
            self._slots[id(loop)] = asyncio.Semaphore(self.max_connections)
        return client

    def _slot(self) -> asyncio.Semaphore:
        """At most ``max_connections`` attempts at once on this loop: waiting for a slot is queueing, so it is not
        counted against ``timeout_s``."""
        self._client()
        return self._slots[id(asyncio.get_running_loop())]

    async def aclose(self) -> None:
        for client in list(self._clients.values()):
            await client.aclose()
        self._clients.clear()

    def _payload(self, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "n": 1, **self.sampling, **self.extra_body}
        if isinstance(prompt.prompt, str):
            return "/v1/completions", {**body, "prompt": prompt.prompt}
        return "/v1/chat/completions", {**body, "messages": prompt.prompt}

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** attempt)
        return delay * (0.5 + 0.5 * self._rng.random())

    async def complete(self, prompt: Prompt, request_id: str) -> Completion:
        """One completion of ``prompt``; a failed attempt is tried again when the one retry rule
        (:func:`~reinforce_ada.sampling.protocols.is_transient`) says it may succeed, up to ``max_attempts``; raises
        :class:`GenerationError` after that, a deterministic failure at once."""
        path, body = self._payload(prompt)
        last: str = ""
        for attempt in range(self.max_attempts):
            if attempt:
                self.num_retries += 1
                await asyncio.sleep(self._backoff(attempt - 1))
            self.num_requests += 1
            try:
                completion = await self._attempt(path, body, prompt, request_id)
            except Exception as err:  # noqa: BLE001 -- the one rule decides what is tried again
                if not is_transient(err):
                    raise
                last = str(err)
                logger.debug("request %s attempt %d: %s", request_id, attempt + 1, last)
                continue
            self.num_completions += 1
            return completion
        raise GenerationError(f"request {request_id} for prompt {prompt.prompt_id!r} failed "
                              f"{self.max_attempts} times; last error: {last}")

    async def _attempt(self, path: str, body: dict[str, Any], prompt: Prompt, request_id: str) -> Completion:
        """One HTTP request for one completion. A failure is raised as the retry rule reads it: a plain
        :class:`GenerationError` (transient) for a timeout, a dropped connection, HTTP 408/409/425/429/5xx or a
        malformed body; :class:`ServerRequestError` (never retried) for any other answer than 200."""
        httpx = _httpx()
        try:
            async with self._slot():
                response = await asyncio.wait_for(
                    self._client().post(path, json=body, headers={"X-Request-Id": request_id}), self.timeout_s)
        except asyncio.TimeoutError:  # the whole attempt took longer than timeout_s (e.g. a dripping answer)
            raise GenerationError(f"no complete answer within timeout_s={self.timeout_s:g}") from None
        except (httpx.TransportError, httpx.DecodingError) as err:  # connect/read errors, timeouts, drops
            raise GenerationError(f"{type(err).__name__}: {err}") from err
        if response.status_code in RETRY_STATUS:
            raise GenerationError(f"HTTP {response.status_code}")
        if response.status_code != 200:
            raise ServerRequestError(f"request {request_id}: HTTP {response.status_code}: {response.text[:300]}")
        try:
            return self._parse(prompt, response.json())
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise GenerationError(f"malformed response: {err!r}") from err

    @staticmethod
    def _parse(prompt: Prompt, data: dict[str, Any]) -> Completion:
        choices = data["choices"]
        if len(choices) != 1:
            raise ValueError(f"expected one choice, got {len(choices)}")
        choice = choices[0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
        if not isinstance(text, str):
            raise TypeError(f"completion text is {type(text).__name__}, not str")
        token_ids = choice.get("token_ids") or ()
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(prompt.prompt_id, text, token_ids=tuple(token_ids), finish_reason=finish)

    # -- synchronous Generator protocol -----------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """All samples of all requests concurrently; one list per request (for the round-based sampler).

        Some samples failed after ``max_attempts``: :class:`PartialGenerationError` with the others; every sample
        failed: the first failure.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("OpenAICompletionsEngine.generate() was called inside a running event loop; "
                               "use `await engine.complete(prompt, request_id)` there")

        async def run() -> list[list[Completion | BaseException]]:
            call_id = uuid.uuid4().hex[:12]
            try:
                # return_exceptions: one failed sample neither cancels the others nor leaves them running
                flat = await asyncio.gather(*(self.complete(r.prompt, f"{call_id}-{i}-{j}")
                                              for i, r in enumerate(requests) for j in range(r.num_samples)),
                                            return_exceptions=True)
            finally:
                await self.aclose()
            out, start = [], 0
            for r in requests:
                out.append(list(flat[start:start + r.num_samples]))
                start += r.num_samples
            return out

        results = asyncio.run(run())
        errors = [x for row in results for x in row if isinstance(x, BaseException)]
        for error in errors:
            if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit, cancellation: not a failed sample
                raise error
        outputs = [[x for x in row if isinstance(x, Completion)] for row in results]
        if not errors:
            return outputs
        if len(errors) == sum(len(row) for row in results):
            raise errors[0]
        raise PartialGenerationError(f"{len(errors)} of {sum(len(row) for row in results)} samples failed; first: "
                                     f"{errors[0]}", outputs, [len(row) - len(out) for row, out in zip(results, outputs)])
