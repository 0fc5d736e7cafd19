"""When a server that stopped answering is dead: a bounded time without any answer, not a count of retries.

A server can go away in two ways: its process is gone (connections are refused at once) or it hangs (connections
are accepted, nothing comes back). Retrying each of a step's requests with backoff turns the first into hundreds of
failed attempts and the second into a wait of ``timeout_s`` per attempt, and when some requests had succeeded, the
step went on with a partial batch. :class:`Liveness` instead keeps one clock per client: the time of the server's
last answer of any kind -- a request answered (whatever its status) or a probe of ``/health`` answered. While a
request waits, or after one failed to reach the server, the client asks :meth:`Liveness.check`; when the last
answer is older than ``probe_every_s`` it probes ``/health`` (one probe at a time, shared by every waiting request),
and once the server has answered nothing for ``dead_after_s`` it raises :class:`ServerDeadError` -- a
:class:`~reinforce_ada.sampling.protocols.FatalGenerationError`, never retried: the sampler stops the step and the
trainer stops the run (exit 3, a ``stopped`` event; nothing of the step is trained on or saved).
:meth:`Liveness.wait_until_back` holds a request that could not reach the server until a probe answers (then it is
sent again without using up one of its attempts) or the server is dead.

The clock is injectable (``clock``; ``sleep``): tests decide by events, not by wall-clock time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Awaitable, Callable, Iterator

from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationError

__all__ = ["Liveness", "ServerDeadError", "ServerUnreachable"]


class ServerDeadError(FatalGenerationError):
    """The server has answered nothing -- no request, no probe -- for ``dead_after_s``."""


class ServerUnreachable(GenerationError):
    """One attempt did not reach the server or got no answer (refused, dropped, timed out): transient, and a reason
    to ask :class:`Liveness` whether the server is there at all."""


class Liveness:
    """The time of a server's last answer, and the rule that it is dead after ``dead_after_s`` without one."""

    def __init__(self, base_url: str, dead_after_s: float, probe_every_s: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        if not dead_after_s > 0:
            raise ValueError(f"dead_after_s must be positive (got {dead_after_s!r})")
        self.base_url = base_url
        self.dead_after_s = float(dead_after_s)
        self.probe_every_s = float(probe_every_s if probe_every_s is not None else min(5.0, dead_after_s / 4))
        self.clock, self.sleep = clock, sleep
        self.last_answer = clock()
        self.last_error = ""
        self.num_probes = 0
        self._asking = 0
        self._asking_since = self.last_answer
        self._probes: dict[int, asyncio.Task] = {}

    @contextlib.contextmanager
    def asking(self) -> Iterator[None]:
        """Around a request (with its retries): the server's silence is counted only while something is asked of it
        (a long update between two steps is not silence)."""
        if self._asking == 0:
            self._asking_since = self.clock()
        self._asking += 1
        try:
            yield
        finally:
            self._asking -= 1

    def answered(self) -> None:
        """The server answered something: it is alive now."""
        self.last_answer = self.clock()

    def silent_for(self) -> float:
        """Seconds since the server's last answer, or since it was asked something, whichever is later."""
        return self.clock() - max(self.last_answer, self._asking_since)

    async def check(self, client: Any) -> None:
        """Raise :class:`ServerDeadError` when the server has answered nothing for ``dead_after_s`` (probing
        ``/health`` first when its last answer is older than ``probe_every_s``)."""
        if self.silent_for() < self.probe_every_s:
            return
        await self._probe(client)
        self._raise_if_dead()

    async def wait_until_back(self, client: Any, error: str) -> None:
        """After an attempt that did not reach the server (``error``): return once the server answers a probe, or
        raise :class:`ServerDeadError` when it stays silent for ``dead_after_s``."""
        self.last_error = error
        while not await self._probe(client):
            self._raise_if_dead()
            await self.sleep(self.probe_every_s)

    def _raise_if_dead(self) -> None:
        silent = self.silent_for()
        if silent >= self.dead_after_s:
            shown = f"{silent:.1f}" if silent < 10 else f"{silent:.0f}"  # 0.4 s is not "0 s" (nor, checked late, "1 s")
            raise ServerDeadError(f"the server at {self.base_url} has answered nothing for {shown} s (no "
                                  f"request, no /health probe; server_dead_after={self.dead_after_s:g} s): it is "
                                  f"treated as dead" + (f"; last error: {self.last_error}" if self.last_error else ""))

    async def _probe(self, client: Any) -> bool:
        """One ``GET /health`` (shared by the requests of this event loop that ask meanwhile); whether the server
        answered (anything)."""
        loop = asyncio.get_running_loop()
        task = self._probes.get(id(loop))
        if task is None or task.done():
            task = self._probes[id(loop)] = loop.create_task(self._health(client))
        return await asyncio.shield(task)

    async def _health(self, client: Any) -> bool:
        self.num_probes += 1
        try:
            await asyncio.wait_for(client.get("/health"), self.probe_every_s)
        except asyncio.TimeoutError:  # no answer: the clock keeps running
            self.last_error = self.last_error or f"no answer to /health within {self.probe_every_s:g} s"
            return False
        except Exception as err:  # noqa: BLE001 -- refused, dropped: the clock keeps running
            self.last_error = self.last_error or f"{type(err).__name__}: {err}"
            return False
        self.answered()
        return True
