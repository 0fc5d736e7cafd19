"""Client for an OpenAI-compatible completions server (vLLM's ``vllm.entrypoints.openai.api_server``, SGLang, ...).

**One request per prompt, ``n`` samples.** A prompt's samples go to the server as one request with ``n = k``
(at most ``max_n``): one HTTP round trip serves ``k`` samples (per-sample requests, ``max_n=1``, made the streaming
sampler about 2x slower on vLLM's CPU server). On the asynchronous path (:meth:`complete`, one call per
sample, the streaming sampler's :class:`~reinforce_ada.sampling.streaming.AsyncEngine`) the calls for one prompt made
in the same event-loop turn -- the scheduler's wave for that prompt -- are coalesced into one ``n``-request; each
call still returns exactly one :class:`Completion`. Cancelling a call drops its sample; when every call of a request
is cancelled (the prompt exited) the HTTP request is cancelled, which closes the connection, and vLLM and SGLang
abort a request whose client disconnected: the whole request stops. Prompts given as chat messages go to
``/v1/chat/completions``, plain strings to ``/v1/completions``.

**Token ids and log-probs.** With ``return_logprobs`` (default) every request asks for the sampled tokens' ids and
log-probabilities (``logprobs: 0`` and ``return_token_ids`` on ``/v1/completions``; ``logprobs: true``,
``top_logprobs: 0`` and ``return_token_ids`` on chat), and ``Completion.token_ids`` / ``Completion.logprobs`` hold
them, so a server's completions can be trained on without re-tokenising and the rollout/trainer mismatch can be
measured. A server that names tokens ``"token_id:N"`` (``return_tokens_as_token_ids``) instead of returning
``token_ids`` is read too. vLLM's log-probs are those of the raw model (temperature 1) unless the server runs with
``--logprobs-mode processed_logprobs``. A server that refuses the extra fields: ``return_logprobs=False``. For
training, ``prompt_token_ids`` sends every prompt as the trainer's token ids and ``require_token_ids`` refuses a
completion without them (:class:`~reinforce_ada.generation.server.answers.MissingTokenIdsError`).

``timeout_s`` is a deadline for each attempt as a whole (connecting, sending, and reading the whole answer): a server
that keeps the connection alive by dripping a byte now and then cannot hold a request past it. httpx's own timeouts
(per connect, per read) apply inside it. The deadline itself is one method (:meth:`_within_deadline`), the one place
a test may replace the clock. With ``dead_after_s``, a server that answers nothing -- no request, no ``/health``
probe -- for that long is dead (:mod:`~reinforce_ada.generation.server.liveness`): a fatal error, not hundreds of
retries.

Failures are retried with exponential backoff (``backoff_s * 2**attempt``, capped at ``backoff_max_s``, with
deterministic jitter) when the library's one retry rule (``sampling.protocols.is_transient``) says so: connection
errors, dropped connections, timeouts, HTTP 408/409/429/5xx and a body that is not JSON are raised as transient
``GenerationError``; other 4xx answers as ``ServerRequestError``, and a JSON answer that does not fit the request
(another number of choices, ``text: null``, fewer log-probs than token ids) as ``ServerAnswerError`` -- both
``FatalGenerationError``, failing at once. Every request carries its own request id (``X-Request-Id``: its first
sample's), identical across its retries; every sample produces exactly one :class:`Completion` -- or raises, so a
prompt is never lost silently nor counted twice. A failed ``n``-request fails each of its samples.

The same object also implements the synchronous :class:`~reinforce_ada.sampling.protocols.Generator` protocol, so the
round-based sampler can use a server too. There a request that still fails after its retries does not fail the call:
``generate`` raises :class:`~reinforce_ada.sampling.protocols.PartialGenerationError` carrying the completions that
were made, and the sampler keeps them, asks again for the failed samples only and counts those it never gets
(``num_failed_samples``); a fatal failure of any request (a dead server) is raised instead, with no partial batch.
When every sample fails, the first failure is raised. Every request has finished before ``generate`` returns or
raises, so none is left running when its event loop closes. Needs ``httpx`` (imported at the first request).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from reinforce_ada.errors import ConfigError
from reinforce_ada.generation.base import GeneratorBase
from reinforce_ada.sampling.protocols import (
    FatalGenerationError,
    GenerationError,
    GenerationRequest,
    PartialGenerationError,
    is_transient,
)
from reinforce_ada.generation.server.liveness import Liveness, ServerUnreachable
from reinforce_ada.generation.server.answers import read_answer
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

def check_base_url(base_url: str, option: str = "base_url") -> None:
    """A :class:`~reinforce_ada.errors.ConfigError` unless ``base_url`` is an ``http://`` or ``https://`` URL (one
    without a scheme gets the ``http://`` spelling suggested)."""
    if not base_url.startswith(("http://", "https://")):
        hint = f"; did you mean 'http://{base_url}'?" if "://" not in base_url else ""
        raise ConfigError(f"{option} must start with http:// or https:// (got {base_url!r}){hint}")


def _httpx():
    try:
        import httpx
    except ImportError as err:  # pragma: no cover - httpx ships with the test extras
        raise ImportError("the OpenAI-compatible client needs httpx: pip install httpx") from err
    return httpx


@dataclass
class _SharedRequest:
    """One prompt's samples asked for in one event-loop turn: a future per :meth:`complete` call, one request."""

    prompt: Prompt
    waiters: list[tuple[str, asyncio.Future]] = field(default_factory=list)
    task: asyncio.Task | None = None

    def drop_if_unwanted(self, _future: asyncio.Future | None = None) -> None:
        """Cancel the HTTP request once no call waits for it any more (every sample was cancelled)."""
        if self.task is not None and not self.task.done() and all(f.done() for _, f in self.waiters):
            self.task.cancel()

    def deliver(self, task: asyncio.Task) -> None:
        if task.cancelled():  # no sample wanted it any more, or the engine was closed under it
            for _, future in self.waiters:
                future.cancel()
            return
        error = task.exception()
        for i, (_, future) in enumerate(self.waiters):
            if future.done():  # that sample was cancelled
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(task.result()[i])


class OpenAICompletionsEngine(GeneratorBase):
    """Asynchronous engine (and synchronous generator) over an OpenAI-compatible HTTP server."""

    def __init__(self, base_url: str, model: str, *, max_tokens: int = 1024, temperature: float = 1.0,
                 top_p: float = 1.0, stop: list[str] | None = None, api_key: str | None = None,
                 timeout_s: float = 600.0, max_attempts: int = 5, backoff_s: float = 0.5, backoff_max_s: float = 16.0,
                 max_connections: int = 256, extra_body: dict[str, Any] | None = None, seed: int = 0,
                 max_n: int = 64, return_logprobs: bool = True,
                 prompt_token_ids: Callable[[Prompt], list[int]] | None = None, require_token_ids: bool = False,
                 dead_after_s: float | None = None):
        check_base_url(base_url)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 (got {max_attempts})")
        if timeout_s <= 0 or backoff_s < 0 or backoff_max_s < 0:
            raise ValueError("timeout_s must be positive and backoff times >= 0")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive (got {max_tokens})")
        if not isinstance(max_n, int) or max_n < 1:
            raise ValueError(f"max_n must be a positive integer (got {max_n!r})")
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
        self.max_n = max_n
        """Most samples in one request; a prompt's samples are sent as ``ceil(k / max_n)`` requests."""
        self.return_logprobs = return_logprobs
        self.prompt_token_ids = prompt_token_ids  # set: every prompt goes to /v1/completions as these token ids
        self.require_token_ids = require_token_ids  # a completion without token ids: MissingTokenIdsError
        self.liveness = Liveness(self.base_url, dead_after_s) if dead_after_s is not None else None  # :mod:`.liveness`
        self._rng = random.Random(seed)
        self._clients: dict[int, Any] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._forming: dict[tuple[int, Any], _SharedRequest] = {}
        self._running: set[asyncio.Task] = set()
        self.num_requests = 0
        """HTTP requests sent, retries included."""
        self.num_retries = 0
        self.num_completions = 0
        self.num_cancelled_requests = 0
        """HTTP requests cancelled while in flight (every one of their samples was cancelled)."""

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
        """Cancel this loop's requests still in flight, then close the HTTP clients."""
        loop = asyncio.get_running_loop()
        mine = [t for t in self._running if t.get_loop() is loop]
        for task in mine:
            task.cancel()
        if mine:
            await asyncio.gather(*mine, return_exceptions=True)
        for client in list(self._clients.values()):
            await client.aclose()
        self._clients.clear()

    def _payload(self, prompt: Prompt, n: int = 1) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "n": n, **self.sampling}
        chat = self.prompt_token_ids is None and not isinstance(prompt.prompt, str)
        if self.return_logprobs:
            body["return_token_ids"] = True
            body.update({"logprobs": True, "top_logprobs": 0} if chat else {"logprobs": 0})
        body.update(self.extra_body)
        if self.prompt_token_ids is not None:
            return "/v1/completions", {**body, "prompt": self.prompt_token_ids(prompt)}
        if not chat:
            return "/v1/completions", {**body, "prompt": prompt.prompt}
        return "/v1/chat/completions", {**body, "messages": prompt.prompt}

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** attempt)
        return delay * (0.5 + 0.5 * self._rng.random())

    # -- the asynchronous engine ------------------------------------------------------------------------------------
    async def complete(self, prompt: Prompt, request_id: str) -> Completion:
        """One completion of ``prompt``. Calls for the same prompt made in the same event-loop turn share one
        ``n``-request (see the module docstring); cancelling this call drops its sample, and the request once no
        call waits for it."""
        if self.max_n == 1:
            [completion] = await self._request(prompt, [request_id])
            return completion
        loop = asyncio.get_running_loop()
        key = (id(loop), prompt.prompt_id)
        shared = self._forming.get(key)
        if shared is None or shared.prompt is not prompt:
            shared = self._forming[key] = _SharedRequest(prompt)
            loop.call_soon(self._launch, key, shared)
        future = loop.create_future()
        shared.waiters.append((request_id, future))
        return await future

    def _launch(self, key: tuple[int, Any], shared: _SharedRequest) -> None:
        """Send the samples gathered for one prompt this turn, ``max_n`` per request."""
        if self._forming.get(key) is shared:
            del self._forming[key]
        live = [(rid, f) for rid, f in shared.waiters if not f.done()]  # cancelled before they were sent: never sent
        for start in range(0, len(live), self.max_n):
            part = _SharedRequest(shared.prompt, live[start:start + self.max_n])
            part.task = asyncio.ensure_future(self._request(part.prompt, [rid for rid, _ in part.waiters]))
            self._running.add(part.task)
            part.task.add_done_callback(self._running.discard)
            part.task.add_done_callback(part.deliver)
            for _, future in part.waiters:
                future.add_done_callback(part.drop_if_unwanted)

    async def _request(self, prompt: Prompt, request_ids: list[str]) -> list[Completion]:
        """``len(request_ids)`` completions of ``prompt`` from one request (``n``); a failed attempt is tried again
        when the one retry rule (:func:`~reinforce_ada.sampling.protocols.is_transient`) says it may succeed, up to
        ``max_attempts``; raises :class:`GenerationError` after that, a deterministic failure at once. An attempt that
        did not reach the server waits, uncounted, until :attr:`liveness` hears from it again or declares it dead."""
        path, body = self._payload(prompt, len(request_ids))
        request_id = request_ids[0]
        last: str = ""
        attempt = 0
        try:
            with self.liveness.asking() if self.liveness is not None else contextlib.nullcontext():
                while attempt < self.max_attempts:
                    if attempt:
                        self.num_retries += 1
                        await asyncio.sleep(self._backoff(attempt - 1))
                    self.num_requests += 1
                    try:
                        completions = await self._attempt(path, body, prompt, request_id)
                    except Exception as err:  # noqa: BLE001 -- the one rule decides what is tried again
                        if not is_transient(err):
                            raise
                        last = str(err)
                        logger.debug("request %s attempt %d: %s", request_id, attempt + 1, last)
                        if isinstance(err, ServerUnreachable) and self.liveness is not None:
                            await self.liveness.wait_until_back(self._client(), last)
                            continue
                        attempt += 1
                        continue
                    self.num_completions += len(completions)
                    return completions
        except asyncio.CancelledError:
            self.num_cancelled_requests += 1
            raise
        raise GenerationError(f"request {request_id} for prompt {prompt.prompt_id!r} failed "
                              f"{self.max_attempts} times; last error: {last}")

    async def _within_deadline(self, answer: Awaitable, request_id: str):
        """``answer`` if it comes within ``timeout_s``, else :class:`asyncio.TimeoutError`; meanwhile :attr:`liveness`
        asks whether the server is there at all (a hung one is dead after ``dead_after_s``). The client's only clock:
        a test replaces this method to decide by an event, not by wall-clock time, when an answer is late."""
        if self.liveness is None:
            return await asyncio.wait_for(answer, self.timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        task = asyncio.ensure_future(answer)
        try:
            while True:
                await asyncio.wait({task}, timeout=max(0.0, min(self.liveness.probe_every_s, deadline - loop.time())))
                if task.done():
                    return task.result()
                if loop.time() >= deadline:
                    raise asyncio.TimeoutError
                await self.liveness.check(self._client())
        finally:
            if not task.done():
                task.cancel()

    async def _attempt(self, path: str, body: dict[str, Any], prompt: Prompt, request_id: str) -> list[Completion]:
        """One HTTP request for ``body["n"]`` completions. A failure is raised as the retry rule reads it: a plain
        :class:`GenerationError` (transient) for a timeout or a dropped connection; the answer itself is read by
        :func:`~reinforce_ada.generation.server.answers.read_answer` (HTTP 408/409/425/429/5xx and a malformed body
        transient, any other answer than 200 a :class:`ServerRequestError`, never retried). Only a request that
        never reached the server (the connection refused or not made in time) is :class:`ServerUnreachable`, which
        :attr:`liveness` holds until the server is back without counting it: a server that takes connections and
        answers its ``/health`` probe but never a request would otherwise be asked again forever."""
        httpx = _httpx()
        try:
            async with self._slot():
                response = await self._within_deadline(
                    self._client().post(path, json=body, headers={"X-Request-Id": request_id}), request_id)
        except asyncio.TimeoutError:  # reached, but no whole answer within timeout_s (e.g. a dripping one): an attempt
            raise GenerationError(f"no complete answer within timeout_s={self.timeout_s:g}") from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:  # the server was not reached
            raise ServerUnreachable(f"{type(err).__name__}: {err}") from err
        except (httpx.TransportError, httpx.DecodingError) as err:  # reached: read errors, timeouts, drops
            raise GenerationError(f"{type(err).__name__}: {err}") from err
        if self.liveness is not None:
            self.liveness.answered()
        return read_answer(response, prompt, body["n"], request_id,
                           token_ids_from=self.base_url if self.require_token_ids else None)

    # -- synchronous Generator protocol -----------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """All samples of all requests concurrently, ``max_n`` per HTTP request; one list per request (for the
        round-based sampler).

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
            parts = [(i, [f"{call_id}-{i}-{j}" for j in range(start, min(r.num_samples, start + self.max_n))])
                     for i, r in enumerate(requests) for start in range(0, r.num_samples, self.max_n)]
            try:
                # return_exceptions: one failed request neither cancels the others nor leaves them running
                answers = await asyncio.gather(*(self._request(requests[i].prompt, ids) for i, ids in parts),
                                               return_exceptions=True)
            finally:
                await self.aclose()
            out: list[list[Completion | BaseException]] = [[] for _ in requests]
            for (i, ids), answer in zip(parts, answers):
                out[i].extend([answer] * len(ids) if isinstance(answer, BaseException) else answer)
            return out

        results = asyncio.run(run())
        errors = [x for row in results for x in row if isinstance(x, BaseException)]
        for error in errors:
            if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit, cancellation: not a failed sample
                raise error
        outputs = [[x for x in row if isinstance(x, Completion)] for row in results]
        if not errors:
            return outputs
        fatal = [error for error in errors if isinstance(error, FatalGenerationError)]
        if fatal:  # a dead server, a request it can never serve: no partial batch, the caller stops
            raise fatal[0]
        if len(errors) == sum(len(row) for row in results):
            raise errors[0]
        raise PartialGenerationError(f"{len(errors)} of {sum(len(row) for row in results)} samples failed; first: "
                                     f"{errors[0]}", outputs,
                                     [len(row) - len(out) for row, out in zip(results, outputs)])
