"""One retry rule (``sampling.protocols.is_transient``): transient generator failures are tried again, deterministic
ones (bad arguments, a dead engine, a request the backend can never serve) are raised at once, in every sampler."""

import asyncio

import pytest

from reinforce_ada.config import ConfigError, SamplerConfig
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationError, GenerationRequest, is_transient
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.scoring import generate_samples
from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
from reinforce_ada.types import Completion, Prompt


def _verifier(prompts, completions):
    return [float(c.text) for c in completions]


class FailingThenFine:
    """Raises ``errors[i]`` on call ``i`` while there are errors left, then answers every request with rewards 1, 0,
    1, 0, ..."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.num_calls = 0

    def generate(self, requests):
        self.num_calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return [[Completion(r.prompt.prompt_id, str(j % 2)) for j in range(r.num_samples)] for r in requests]


@pytest.mark.parametrize("error, transient", [
    (RuntimeError("device busy"), True), (TimeoutError("slow"), True), (ConnectionError("reset"), True),
    (GenerationError("engine hiccup"), True), (ValueError("max_new_tokens too large"), False),
    (IndexError("index out of range in self"), False), (TypeError("bad argument"), False),
    (FatalGenerationError("engine dead"), False), (ConfigError("bad setting"), False),
])
def test_is_transient_by_type(error, transient):
    assert is_transient(error) is transient


def test_a_transient_failure_is_retried_and_a_deterministic_one_is_raised_at_once():
    requests = [GenerationRequest(Prompt(0, "a"), 2)]
    flaky = FailingThenFine(RuntimeError("busy"), RuntimeError("busy"))
    outputs, num_failed = generate_samples(flaky, requests, retries=2)
    assert (flaky.num_calls, len(outputs[0]), num_failed) == (3, 2, 0)

    broken = FailingThenFine(ValueError("Input length 70 exceeds max_length 64"))
    with pytest.raises(FatalGenerationError, match="not retried") as caught:
        generate_samples(broken, requests, retries=3)
    assert broken.num_calls == 1 and isinstance(caught.value.__cause__, ValueError)

    misconfigured = FailingThenFine(ConfigError("max_new_tokens=1024 does not fit"))
    with pytest.raises(ConfigError, match="does not fit"):  # a user error reaches the user as it is
        generate_samples(misconfigured, requests, retries=3)
    assert misconfigured.num_calls == 1


def test_a_fatal_failure_in_a_later_round_stops_the_step_instead_of_ending_it_early():
    cfg = SamplerConfig(samples_per_round=2, max_rounds=3, group_size=2, exit_rule="balanced")

    class AllWrongThenDead:
        num_calls = 0

        def generate(self, requests):
            self.num_calls += 1
            if self.num_calls == 2:
                raise FatalGenerationError("EngineDeadError: the engine process died")
            return [[Completion(r.prompt.prompt_id, "0") for _ in range(r.num_samples)] for r in requests]

    generator = AllWrongThenDead()
    with pytest.raises(FatalGenerationError, match="died"):
        AdaptiveSampler(generator, _verifier, cfg).sample([Prompt(0, "a")])
    assert generator.num_calls == 2

    # a transient failure in round 2 still ends the step with round 1's work, as before
    class AllWrongThenBusy(AllWrongThenDead):
        def generate(self, requests):
            if self.num_calls >= 1:
                self.num_calls += 1
                raise RuntimeError("busy")
            return super().generate(requests)

    batch = AdaptiveSampler(AllWrongThenBusy(), _verifier, cfg).sample([Prompt(0, "a")])
    assert len(batch.rounds) == 1 and "failed 3 times" in batch.generation_error


class Engine:
    """An async engine whose ``complete`` raises ``error`` for every sample of prompt 1."""

    def __init__(self, error):
        self.error = error
        self.calls: list[tuple[int, str]] = []

    async def complete(self, prompt, request_id):
        self.calls.append((prompt.prompt_id, request_id))
        await asyncio.sleep(0)
        if prompt.prompt_id == 1:
            raise self.error
        return Completion(prompt.prompt_id, "1" if len(self.calls) % 2 else "0")


def test_the_streaming_sampler_raises_a_fatal_failure_at_once_and_retries_a_transient_one():
    cfg = SamplerConfig(samples_per_round=2, max_rounds=2, group_size=2, exit_rule="balanced", generation_retries=2)
    prompts = [Prompt(0, "a"), Prompt(1, "b")]
    options = StreamingOptions(allocation="fixed")

    dead = Engine(FatalGenerationError("EngineDeadError"))
    with pytest.raises(FatalGenerationError, match="EngineDeadError"):
        StreamingSampler(dead, _verifier, cfg, options).sample(prompts)
    failed = [request_id for prompt_id, request_id in dead.calls if prompt_id == 1]
    assert len(failed) == len(set(failed)), "a sample of a dead engine was tried again"

    busy = Engine(RuntimeError("busy"))
    batch = StreamingSampler(busy, _verifier, cfg, options).sample(prompts)  # prompt 1's samples fail for good
    assert batch.generation_error is not None and "failed 3 times" in batch.generation_error
    tried = [request_id for prompt_id, request_id in busy.calls if prompt_id == 1]
    assert len(tried) > len(set(tried)), "a transient failure was not tried again"
