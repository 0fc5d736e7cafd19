"""A generation-latency model, so round-based and streaming sampling can be timed on a CPU.

The engine is modelled the way continuous-batching servers (vLLM, SGLang) behave in the decode phase:

* it runs at most ``concurrency`` sequences at once; further requests wait in a FIFO queue;
* every *token step* advances each running sequence by one token and takes
  ``step_time = step_time_base + step_time_per_seq * num_running`` seconds;
* a completion's length is drawn from a log-normal distribution (median ``length_median``, log-std ``length_sigma``)
  and truncated at ``max_tokens``; a request cancelled mid-way has generated the tokens of the steps it ran.

Prefill is not modelled (it is small next to long reasoning decodes, and the same for every strategy).

Three ways of producing completions are timed with it:

* :func:`batched_time` -- one call that generates a given list of completions (the reference: no adaptivity);
* :class:`TimedGenerator` -- the round-based sampler's calls, one per round, each waiting for its slowest sequence;
* :func:`run_streaming` -- the :class:`~reinforce_ada.sampling.scheduler.StreamingScheduler` driven event by event in
  virtual time (the same scheduler code the asyncio sampler runs), with cancellation.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from reinforce_ada.sampling.scoring import score
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion, Prompt


@dataclass
class LatencyModel:
    """Parameters of the engine model (see the module docstring). Defaults: a 1.5B model on one GPU, long CoT."""

    concurrency: int = 256
    """Sequences the engine runs at once."""
    step_time_base: float = 0.012
    """Seconds per decode step with an empty batch."""
    step_time_per_seq: float = 0.00005
    """Extra seconds per decode step per running sequence."""
    length_median: float = 600.0
    """Median completion length in tokens."""
    length_sigma: float = 0.7
    """Log-std of the completion length."""
    max_tokens: int = 3072
    """Completions are truncated here."""

    def __post_init__(self) -> None:
        if self.concurrency <= 0 or self.max_tokens <= 0 or self.length_median <= 0:
            raise ValueError("concurrency, max_tokens and length_median must be positive")
        if self.step_time_base < 0 or self.step_time_per_seq < 0 or self.length_sigma < 0:
            raise ValueError("step times and length_sigma must be >= 0")

    def draw_lengths(self, num: int, rng: np.random.Generator) -> np.ndarray:
        lengths = np.exp(rng.normal(math.log(self.length_median), self.length_sigma, size=num))
        return np.clip(np.ceil(lengths), 1, self.max_tokens).astype(np.int64)

    def step_time(self, num_running: int) -> float:
        return self.step_time_base + self.step_time_per_seq * num_running


@dataclass
class _Seq:
    key: object
    length: int
    start_step: int
    cancelled: bool = False


class VirtualEngine:
    """Event-driven simulation of the engine: submit sequences, advance to the next completion, cancel."""

    def __init__(self, model: LatencyModel):
        self.model = model
        self.time = 0.0
        self.step = 0
        self.tokens = 0
        """Tokens generated so far (including those of cancelled sequences)."""
        self._running: dict[object, _Seq] = {}
        self._heap: list[tuple[int, int, object]] = []
        self._waiting: deque[tuple[object, int]] = deque()
        self._counter = 0

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def busy(self) -> bool:
        return bool(self._running or self._waiting)

    def submit(self, key: object, length: int) -> None:
        self._waiting.append((key, int(length)))
        self._start_waiting()

    def _start_waiting(self) -> None:
        while self._waiting and len(self._running) < self.model.concurrency:
            key, length = self._waiting.popleft()
            seq = _Seq(key, length, self.step)
            self._running[key] = seq
            self._counter += 1
            heapq.heappush(self._heap, (self.step + length, self._counter, key))

    def cancel(self, key: object) -> None:
        seq = self._running.pop(key, None)
        if seq is not None:
            self.tokens += self.step - seq.start_step
            seq.cancelled = True
        else:
            self._waiting = deque((k, n) for k, n in self._waiting if k != key)
        self._start_waiting()

    def advance(self) -> list[object]:
        """Run to the next completion; return the keys that finished at that step."""
        while self._heap:
            finish, _, key = self._heap[0]
            seq = self._running.get(key)
            if seq is None or seq.start_step + seq.length != finish:
                heapq.heappop(self._heap)  # cancelled
                continue
            break
        else:
            return []
        finish = self._heap[0][0]
        self.time += (finish - self.step) * self.model.step_time(len(self._running))
        self.step = finish
        done = []
        while self._heap and self._heap[0][0] == finish:
            _, _, key = heapq.heappop(self._heap)
            seq = self._running.get(key)
            if seq is None or seq.start_step + seq.length != finish:
                continue
            del self._running[key]
            self.tokens += seq.length
            done.append(key)
        self._start_waiting()
        return done


def batched_time(lengths: Sequence[int], model: LatencyModel) -> float:
    """Time of one call that generates completions of these lengths (submitted together, FIFO)."""
    engine = VirtualEngine(model)
    for i, length in enumerate(lengths):
        engine.submit(i, length)
    while engine.busy:
        engine.advance()
    return engine.time


class TimedGenerator:
    """Wraps a simulated generator: every ``generate`` call (one round of the round-based sampler) is timed as a
    batched call, so the total is the round-based sampler's time with its barrier. ``lengths`` keeps every
    completion's length."""

    def __init__(self, generator, model: LatencyModel, seed: int = 0):
        self.generator = generator
        self.model = model
        self.rng = np.random.default_rng(seed + 7919)
        self.time = 0.0
        self.lengths: list[int] = []
        self.round_times: list[float] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        outputs = self.generator.generate(requests)
        lengths = self.model.draw_lengths(sum(len(o) for o in outputs), self.rng)
        self.lengths.extend(int(x) for x in lengths)
        elapsed = batched_time(lengths, self.model)
        self.round_times.append(elapsed)
        self.time += elapsed
        return outputs


@dataclass
class StreamingRun:
    time: float
    tokens: int
    lengths: list[int] = field(default_factory=list)
    """Lengths of the completions that finished (cancelled ones excluded)."""
    max_running: int = 0


def run_streaming(scheduler, model: LatencyModel, verifier: Callable, make_completion: Callable[[Prompt, np.random.Generator], Completion],
                  seed: int = 0) -> StreamingRun:
    """Drive a :class:`~reinforce_ada.sampling.scheduler.StreamingScheduler` in virtual time until it is done.

    ``make_completion(prompt, rng)`` produces the (unscored) completion a request will return; ``verifier`` scores
    it when it finishes. In-flight requests are limited by the scheduler's ``max_in_flight`` (set it to the
    engine's concurrency for a saturated-but-not-queued engine).
    """
    rng = np.random.default_rng(seed)
    engine = VirtualEngine(model)
    requests: dict[object, tuple] = {}
    run = StreamingRun(0.0, 0)
    while True:
        for request in scheduler.want():
            length = int(model.draw_lengths(1, rng)[0])
            requests[request.key] = (request, make_completion(request.prompt, rng), length)
            engine.submit(request.key, length)
        run.max_running = max(run.max_running, engine.num_running)
        if not engine.busy:
            break
        finished = [requests.pop(key) for key in engine.advance()]
        if not finished:
            continue
        run.lengths.extend(length for _, _, length in finished)
        rewards = score(verifier, [r.prompt for r, _, _ in finished], [c for _, c, _ in finished])
        for request in scheduler.record([(r, c, w) for (r, c, _), w in zip(finished, rewards)]):
            engine.cancel(request.key)
            requests.pop(request.key, None)
    run.time, run.tokens = engine.time, engine.tokens
    return run
