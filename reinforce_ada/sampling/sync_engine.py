"""A synchronous generator (``HFGenerator``, the simulator's generator, ...) behind the asynchronous engine interface.

Single-sample requests are queued; one worker takes everything queued (up to ``max_batch_size`` samples), groups it
by prompt into :class:`~reinforce_ada.sampling.protocols.GenerationRequest` s and runs the generator's ``generate``
in a worker thread, then resolves each request with one completion. While a batch runs, new requests queue up and
form the next batch (continuous batching at batch, not token, granularity).

Cancellation: a request cancelled while queued is removed before it reaches the generator, so its samples are never
generated; a batch already running on a synchronous backend cannot be interrupted and runs to the end (its results
for cancelled requests are discarded and counted in ``num_discarded``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from reinforce_ada.sampling.protocols import GenerationError, GenerationRequest, Generator
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    prompt: Prompt
    request_id: str
    future: asyncio.Future


class AsyncGeneratorEngine:
    """Wrap a synchronous :class:`~reinforce_ada.sampling.protocols.Generator` as an
    :class:`~reinforce_ada.sampling.streaming.AsyncEngine`."""

    def __init__(self, generator: Generator, max_batch_size: int = 64, use_thread: bool = True):
        if not callable(getattr(generator, "generate", None)):
            raise TypeError(f"generator must have a generate(requests) method (got {type(generator).__name__})")
        if max_batch_size <= 0:
            raise ValueError(f"max_batch_size must be positive (got {max_batch_size})")
        self.generator = generator
        self.max_batch_size = max_batch_size
        self.use_thread = use_thread
        self._queue: deque[_Pending] = deque()
        self._worker: asyncio.Task | None = None
        self.num_generated = 0
        """Samples the wrapped generator produced."""
        self.num_skipped = 0
        """Requests cancelled while queued (never generated)."""
        self.num_discarded = 0
        """Samples generated for requests cancelled while their batch ran."""
        self.num_batches = 0

    async def complete(self, prompt: Prompt, request_id: str) -> Completion:
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(prompt, request_id, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._run())
        return await future

    def _take_batch(self) -> list[_Pending]:
        batch: list[_Pending] = []
        while self._queue and len(batch) < self.max_batch_size:
            item = self._queue.popleft()
            if item.future.cancelled():
                self.num_skipped += 1
                continue
            batch.append(item)
        return batch

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)  # let the caller queue everything it is about to submit
            batch = self._take_batch()
            if not batch:
                return
            by_prompt: dict[int, list[_Pending]] = {}
            prompts: dict[int, Prompt] = {}
            for item in batch:
                by_prompt.setdefault(id(item.prompt), []).append(item)
                prompts[id(item.prompt)] = item.prompt
            requests = [GenerationRequest(prompts[k], len(items)) for k, items in by_prompt.items()]
            self.num_batches += 1
            try:
                if self.use_thread:
                    outputs = await asyncio.to_thread(self.generator.generate, requests)
                else:
                    outputs = self.generator.generate(requests)
                outputs = list(outputs)
                if len(outputs) != len(requests):
                    raise GenerationError(f"generator returned {len(outputs)} outputs for {len(requests)} requests")
            except Exception as err:  # noqa: BLE001 -- handed to every waiting request; the sampler retries
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(err if isinstance(err, Exception) else GenerationError(str(err)))
                continue
            for (key, items), completions in zip(by_prompt.items(), outputs):
                self.num_generated += len(completions)
                for i, item in enumerate(items):
                    if item.future.done():
                        self.num_discarded += 1
                    elif i < len(completions):
                        item.future.set_result(completions[i])
                    else:
                        item.future.set_exception(GenerationError(
                            f"generator returned {len(completions)} completions for {len(items)} requested"))

