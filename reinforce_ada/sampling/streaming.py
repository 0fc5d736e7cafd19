"""Streaming adaptive sampling: the same exit rules, selection and advantages as :class:`AdaptiveSampler`, without
the round barrier.

The round-based sampler (arXiv 2510.04996, Alg. 1) waits, every round, for the slowest completion of every active
prompt. Here each *sample* is its own request to an asynchronous engine, and each prompt moves on its own:

1. A prompt's next request size comes from its allocation rule. ``"beta"`` (default): the smallest ``k`` whose
   probability of meeting the exit rule reaches ``target`` under the Beta posterior on its pass rate
   (:mod:`reinforce_ada.core.allocation.exit_probability`); the prior is uniform, or comes from the cross-step
   :class:`~reinforce_ada.sampling.memory.PassRateMemory`. ``"fixed"``: ``M`` more once the previous ``M`` are scored.
2. Completions are scored as they finish; the exit rule is checked after every one. The moment a prompt exits, its
   in-flight requests are cancelled (the engine stops generating them). A prompt that has not exited gets its next
   request as soon as its outstanding samples are scored -- no other prompt is waited for.
3. At most ``max_in_flight`` samples are outstanding; free slots go first to prompts already being sampled (their
   follow-up requests are on the step's critical path), then to new prompts in order, so the engine stays saturated
   while any prompt still has work.
4. The per-prompt budget stays ``M * N`` (``SamplerConfig.max_samples``). Optionally, memory skips prompts whose
   chance of exiting within the budget looks below ``skip_below`` or caps their budget (``cap_below``).
5. The pools are then downsampled and given advantages exactly as in the round-based sampler (its selection and
   :func:`reinforce_ada.sampling.pools.build_batch`). ``Completion.round`` is the allocation *wave* of the prompt that
   requested it. Memory is updated only after the step, from the pool counts, and never enters a pool.

The allocation/exit/cancel logic lives in :class:`~reinforce_ada.sampling.scheduler.StreamingScheduler` (with
:class:`~reinforce_ada.sampling.scheduler.StreamingOptions`; both re-exported here), a synchronous state machine
driven by events (``want`` -> submit, ``record`` -> cancel). :class:`StreamingSampler` drives it with asyncio against
an :class:`AsyncEngine`; the latency model (:mod:`reinforce_ada.research.latency`) drives the very same scheduler in
virtual time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol, Sequence, runtime_checkable

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import PoolSampler
from reinforce_ada.sampling.protocols import GenerationError, is_transient
from reinforce_ada.sampling.scoring import not_retried, score, validate_prompts
from reinforce_ada.sampling.scheduler import SampleRequest, StreamingOptions, StreamingScheduler
from reinforce_ada.types import Completion, Prompt, PromptId, SampledBatch

logger = logging.getLogger(__name__)

__all__ = ["AsyncEngine", "SampleRequest", "SteppedEngine", "StreamingOptions", "StreamingSampler",
           "StreamingScheduler"]


@runtime_checkable
class AsyncEngine(Protocol):
    """An asynchronous generation backend: one completion per call.

    Cancelling the awaiting task must stop the work (abort the request, close the connection or drop it from the
    queue). ``request_id`` is unique per sample and the same across retries of that sample.
    """

    async def complete(self, prompt: Prompt, request_id: str) -> Completion: ...


@runtime_checkable
class SteppedEngine(Protocol):
    """A generation backend in this process that the sampler steps itself (the colocated vLLM engine): samples are
    submitted, each :meth:`step` runs one engine iteration and returns the samples it finished, and a cancelled
    sample stops generating. No event loop and no task per sample: the scheduler is driven straight from the
    engine's steps."""

    def submit(self, prompt: Prompt, request_id: str) -> None: ...

    def step(self) -> list[tuple[str, Completion]]: ...

    def cancel(self, request_ids: Sequence[str]) -> None: ...


class StreamingSampler(PoolSampler):
    """Streaming adaptive sampling over an :class:`AsyncEngine` (see the module docstring).

    ``sample(prompts)`` runs its own event loop, or the engine's when it has one (``engine.run_in_loop(coro)``, e.g.
    :class:`~reinforce_ada.generation.vllm.async_engine.VLLMAsyncEngine`, whose ``AsyncLLM`` is bound to the loop it started
    in); from async code use ``await sample_async(prompts)``.
    """

    scheduler_class = StreamingScheduler

    def __init__(self, engine: AsyncEngine | SteppedEngine, verifier, config: SamplerConfig | None = None,
                 options: StreamingOptions | None = None, memory: PassRateMemory | None = None):
        if not isinstance(engine, SteppedEngine) and not callable(getattr(engine, "complete", None)):
            raise TypeError(f"engine must have an async complete(prompt, request_id) method "
                            f"(got {type(engine).__name__}); wrap a synchronous generator in "
                            "reinforce_ada.sampling.sync_engine.AsyncGeneratorEngine")
        if not callable(verifier):
            raise TypeError(f"verifier must be callable (got {type(verifier).__name__})")
        super().__init__(verifier, config, memory)
        self.engine = engine
        self.generator = engine
        if self.config.is_budget:
            raise ConfigError("allocation='budget' runs on the round-based sampler (AdaptiveSampler), not streaming")
        self.options = options or StreamingOptions()
        StreamingScheduler([], self.config, self.options)  # validate the combination before any generation

    def sample(self, prompts: Sequence[Prompt]) -> SampledBatch:
        if isinstance(self.engine, SteppedEngine):
            return self._sample_stepped(prompts)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run_in_loop = getattr(self.engine, "run_in_loop", None)
            if callable(run_in_loop):  # an engine bound to its own long-lived loop (vLLM's AsyncLLM): run there
                return run_in_loop(self._sample_and_close(prompts))
            return asyncio.run(self._sample_and_close(prompts))
        raise RuntimeError("StreamingSampler.sample() was called inside a running event loop; "
                           "use `await sampler.sample_async(prompts)` there")

    async def _sample_and_close(self, prompts: Sequence[Prompt]) -> SampledBatch:
        try:
            return await self.sample_async(prompts)
        finally:
            close = getattr(self.engine, "aclose", None)
            if close is not None:  # clients bound to this event loop (e.g. httpx) must close with it
                await close()

    async def sample_async(self, prompts: Sequence[Prompt]) -> SampledBatch:
        prompts = validate_prompts(prompts)
        scheduler = self.scheduler_class(prompts, self.config, self.options, self.memory)
        max_attempts = self.options.max_attempts or self.config.generation_retries + 1
        tasks: dict[asyncio.Task, SampleRequest] = {}
        by_key: dict[tuple[PromptId, int], asyncio.Task] = {}
        attempts: dict[tuple[PromptId, int], int] = {}
        generation_error: str | None = None

        def submit(request: SampleRequest) -> None:
            task = asyncio.ensure_future(self.engine.complete(request.prompt, request.request_id))
            tasks[task] = request
            by_key[request.key] = task

        try:
            while True:
                for request in scheduler.want():
                    submit(request)
                if not tasks:
                    break
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                finished: list[tuple[SampleRequest, Completion]] = []
                for task in done:
                    request = tasks.pop(task)
                    if by_key.get(request.key) is task:
                        del by_key[request.key]
                    if task.cancelled():
                        continue
                    err = task.exception()
                    if err is None:
                        finished.append((request, task.result()))
                        continue
                    if not is_transient(err):  # a dead engine, a request it can never serve: stop at once
                        logger.error("sample %s failed and cannot succeed on another try: %r", request.request_id, err)
                        raise not_retried(err) from err
                    attempts[request.key] = attempts.get(request.key, 1) + 1
                    if attempts[request.key] <= max_attempts and generation_error is None:
                        logger.warning("sample %s failed (attempt %d of %d): %r", request.request_id,
                                       attempts[request.key] - 1, max_attempts, err)
                        submit(request)
                    else:
                        scheduler.fail(request)
                        if generation_error is None:
                            generation_error = f"sample {request.request_id} failed {max_attempts} times: {err!r}"
                            logger.error("%s; ending the step with the work already done", generation_error)
                            for other in scheduler.abort():
                                task_other = by_key.pop(other.key, None)
                                if task_other is not None:
                                    task_other.cancel()
                for request in self._record(scheduler, finished):
                    task = by_key.pop(request.key, None)
                    if task is not None:
                        task.cancel()
        finally:
            if tasks:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        if generation_error is not None and not any(p.count for p in scheduler.pools.values()):
            raise GenerationError(generation_error)
        return scheduler.finish(self.selector, prompts, self.memory, generation_error)

    def _sample_stepped(self, prompts: Sequence[Prompt]) -> SampledBatch:
        """The scheduler driven by a :class:`SteppedEngine`: submit what it wants, step the engine, record what
        finished, cancel what it no longer needs. The engine is in this process, so a failure is not a lost request
        to try again: it reaches the caller at once."""
        prompts = validate_prompts(prompts)
        scheduler = self.scheduler_class(prompts, self.config, self.options, self.memory)
        pending: dict[str, SampleRequest] = {}
        try:
            while True:
                for request in scheduler.want():
                    self.engine.submit(request.prompt, request.request_id)
                    pending[request.request_id] = request
                if not pending:
                    break
                finished = [(pending.pop(rid), c) for rid, c in self.engine.step() if rid in pending]
                unwanted = [r.request_id for r in self._record(scheduler, finished) if r.request_id in pending]
                for request_id in unwanted:
                    del pending[request_id]
                self.engine.cancel(unwanted)
        finally:
            if pending:
                self.engine.cancel(list(pending))
        return scheduler.finish(self.selector, prompts, self.memory)

    def _record(self, scheduler: StreamingScheduler,
                finished: list[tuple[SampleRequest, Completion]]) -> list[SampleRequest]:
        """Score the finished samples (in prompt, index order) and record them; the in-flight requests to cancel."""
        if not finished:
            return []
        finished.sort(key=lambda rc: (str(rc[0].prompt.prompt_id), rc[0].index))
        rewards = score(self.verifier, [r.prompt for r, _ in finished], [c for _, c in finished])
        return scheduler.record([(r, c, w) for (r, c), w in zip(finished, rewards)])
