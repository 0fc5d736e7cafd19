"""A persistent pool of worker processes that runs one function per item under a hard per-item timeout.

Why: symbolic answer checking (sympy via ``math-verify``) can hang on adversarial strings, and ``math-verify``'s own
timeout uses ``signal.alarm``, which works only in a process's main thread -- not in a trainer's scoring thread, and
never for C code that ignores signals. Here each item runs in a worker process; the parent waits on the workers'
pipes with a deadline per item, and a worker that misses its deadline is killed (SIGKILL) and replaced. So a call
returns within about ``timeout`` seconds of its slowest item's dispatch, whatever the item does.

How: ``num_workers`` processes each hold one end of a pipe and loop ``recv item -> fn(*item) -> send result``. The
parent keeps every worker busy (one item each, so a timeout loses only that item), collects results with
:func:`multiprocessing.connection.wait`, and marks each item ``ok``, ``error`` (``fn`` raised), ``timeout`` or
``crash`` (the worker died). Workers start lazily on first use, are daemonic (they die with the parent), and use the
``forkserver`` start method where available with ``preload`` modules imported once in the server, so a replacement
worker is a cheap fork rather than a fresh interpreter that re-imports sympy. ``fn`` must be a module-level
function (it is pickled by reference).
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one item: ``status`` is ``ok``, ``error``, ``timeout`` or ``crash``."""

    status: str
    value: Any = None
    """``fn``'s return value when ``ok``; the error text when ``error``."""


_READY = -1


def _worker_main(conn: Any, fn: Callable, preload: Sequence[str] = ()) -> None:
    """Worker loop: receive ``(task_id, args)``, reply ``(task_id, status, value)``; ``None`` or EOF stops it.

    The ``preload`` modules are imported before the worker reports ready, so their import time never counts against
    an item's timeout -- also when the fork server was started by another pool with other preloads (there is one
    fork server per process) and did not import them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # fn reports the missing package itself, with its own message
            pass
    try:
        conn.send((_READY, "ready", os.getpid()))
    except (EOFError, OSError):
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, args = message
        try:
            reply = (task_id, "ok", fn(*args))
        except BaseException as err:  # noqa: BLE001 - report every failure to the parent
            reply = (task_id, "error", f"{type(err).__name__}: {err}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


class _Worker:
    def __init__(self, ctx: Any, fn: Callable, preload: Sequence[str] = ()):
        self.conn, child_conn = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(child_conn, fn, tuple(preload)), daemon=True,
                                   name="reinforce-ada-verifier")
        self.process.start()
        child_conn.close()
        self.ready = False
        self.started_at = time.monotonic()

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(timeout=5)
        except (OSError, ValueError):
            pass
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


def default_start_method() -> str:
    """``forkserver`` where the platform has it (cheap, fork-safe replacements), else ``spawn``."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class WorkerPool:
    """Run ``fn(*args)`` for each ``args`` in a batch, in worker processes, with a hard timeout per item.

    >>> pool = WorkerPool(abs, num_workers=1, timeout=10.0)
    >>> [outcome.value for outcome in pool.map([(-1,), (2,)])]
    [1, 2]
    >>> pool.close()
    """

    def __init__(self, fn: Callable, *, num_workers: int, timeout: float, start_method: str | None = None,
                 preload: Sequence[str] = (), startup_timeout: float = 120.0):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1 (got {num_workers})")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds (got {timeout})")
        self.fn = fn
        self.num_workers = num_workers
        self.timeout = float(timeout)
        self.start_method = start_method or default_start_method()
        self.preload = list(preload)
        self.startup_timeout = float(startup_timeout)
        self.num_replaced = 0
        """Workers killed (timeout) or found dead (crash) and replaced."""
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _context(self) -> Any:
        ctx = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":
            # Import these once in the fork server so every worker (and every replacement) is a cheap fork. Only
            # takes effect if the fork server is not running yet; '__main__' is the stdlib default.
            modules = ["__main__", __name__, getattr(self.fn, "__module__", None) or __name__, *self.preload]
            ctx.set_forkserver_preload(list(dict.fromkeys(modules)))
        return ctx

    def _ensure_started(self) -> None:
        if self._pid != os.getpid():  # we are in a forked child: the parent's workers are not ours
            self._workers, self._pid = [], os.getpid()
        if not self._workers:
            self._ctx = self._context()
            self._workers = [_Worker(self._ctx, self.fn, self.preload) for _ in range(self.num_workers)]

    def _replace(self, index: int) -> None:
        self._workers[index].kill()
        self._workers[index] = _Worker(self._ctx, self.fn, self.preload)
        self.num_replaced += 1

    def map(self, items: Sequence[tuple], timeout: float | None = None) -> list[Outcome]:
        """One :class:`Outcome` per item, in order. Each item gets ``timeout`` seconds from its dispatch.

        Workers that are still starting take no item (so start-up time never counts against an item); if none
        becomes ready within ``startup_timeout`` seconds, :class:`RuntimeError` is raised.
        """
        timeout = self.timeout if timeout is None else timeout
        outcomes: list[Outcome | None] = [None] * len(items)
        if not items:
            return []
        with self._lock:
            self._ensure_started()
            busy: dict[int, tuple[int, float]] = {}  # worker index -> (item index, deadline)
            try:
                self._run(items, timeout, outcomes, busy)
            except BaseException:
                for w in busy:  # interrupted mid-batch: a busy worker would answer the next batch with a stale reply
                    self._replace(w)
                raise
        return outcomes  # type: ignore[return-value]

    def _run(self, items: Sequence[tuple], timeout: float, outcomes: list, busy: dict[int, tuple[int, float]]) -> None:
        """Keep every ready worker busy until each item has an outcome (``busy`` is shared with :meth:`map`)."""
        next_item = 0
        while next_item < len(items) or busy:
            for w, worker in enumerate(self._workers):
                if not worker.ready or w in busy or next_item >= len(items):
                    continue
                try:
                    worker.conn.send((next_item, tuple(items[next_item])))
                except (OSError, ValueError):  # the worker died while idle: replace it, retry this item later
                    self._replace(w)
                    continue
                busy[w] = (next_item, time.monotonic() + timeout)
                next_item += 1
            now = time.monotonic()
            starting = [w for w, worker in enumerate(self._workers) if not worker.ready]
            deadlines = [deadline for _, deadline in busy.values()]
            deadlines += [self._workers[w].started_at + self.startup_timeout for w in starting]
            conn_to_worker = {self._workers[w].conn: w for w in [*busy, *starting]}
            ready_conns = multiprocessing.connection.wait(list(conn_to_worker),
                                                          timeout=max(0.0, min(deadlines) - now))
            for conn in ready_conns:
                w = conn_to_worker[conn]
                worker = self._workers[w]
                try:
                    task_id, status, value = conn.recv()
                except (EOFError, OSError):
                    if not worker.ready:
                        raise RuntimeError(f"a verifier worker process exited during start-up (exit code "
                                           f"{worker.process.exitcode}); see its stderr") from None
                    item, _ = busy.pop(w)
                    logger.warning("verifier worker died on item %d; replacing it", item)
                    outcomes[item] = Outcome("crash")
                    self._replace(w)
                    continue
                if task_id == _READY:
                    worker.ready = True
                    continue
                item, _ = busy.pop(w)
                outcomes[item] = Outcome(status, value)
            now = time.monotonic()
            for w, (item, deadline) in list(busy.items()):
                if now >= deadline:
                    busy.pop(w)
                    logger.warning("verifier item %d ran past %.1fs; killing its worker", item, timeout)
                    outcomes[item] = Outcome("timeout")
                    self._replace(w)
            for w in starting:
                worker = self._workers[w]
                if not worker.ready and now >= worker.started_at + self.startup_timeout:
                    raise RuntimeError(f"a verifier worker process did not start within "
                                       f"{self.startup_timeout:.0f}s (start method {self.start_method!r})")

    def close(self) -> None:
        """Stop the workers (idempotent; the pool restarts them if used again)."""
        with self._lock:
            if self._pid == os.getpid():
                for worker in self._workers:
                    worker.stop()
            self._workers = []

    def __getstate__(self) -> dict:
        """A pickled pool carries its settings only; the copy starts its own workers on first use."""
        state = self.__dict__.copy()
        for key in ("_workers", "_lock", "_ctx"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._workers, self._lock, self._pid = [], threading.Lock(), os.getpid()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
