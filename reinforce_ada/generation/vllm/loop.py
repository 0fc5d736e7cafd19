"""One asyncio event loop for an engine's whole life, in a thread of its own (:class:`EngineLoop`).

An ``AsyncLLM`` is bound to the event loop it first ran in (its output handler is a task of that loop), so a fresh
``asyncio.run`` loop per call kills it at the second call. :class:`EngineLoop` keeps one loop running in a daemon
thread; :meth:`EngineLoop.run` submits a coroutine to it from any other thread and waits for the result, and
:meth:`EngineLoop.close` cancels what still runs there, stops the loop and joins the thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

__all__ = ["EngineLoop"]


class EngineLoop:
    """A long-lived asyncio event loop in a daemon thread: :meth:`run` runs a coroutine there and waits for it."""

    def __init__(self, name: str = "reinforce-ada-engine-loop"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("the engine's event loop is closed (the engine was closed)")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:  # waiting here for the loop's own work would block it forever
            coro.close()
            raise RuntimeError("EngineLoop.run() was called from inside its own loop; await the coroutine")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join the thread; idempotent."""
        if self.loop.is_closed():
            return

        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
